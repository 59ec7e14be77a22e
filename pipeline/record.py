"""The stored record of one invocation, read and written as one map of fields.

An invocation's record lives in three keys, so Redis ACLs can tell who may touch what
(see `pipeline.keys`):

- `call` — the submit-time state, written by the submit script: `st` (PROJECTING), `eid` (the
  stream entry the submit recorded), `inv` (the envelope), `t0`, `tool`, `dup`, `fp`, `sk`
  (the scope key a repeated submit is compared with);
- `res` — the final state, written only by a worker's finish script: `st` (READY or ERROR),
  `ev`, `res` (the canonical result), `mo` and `cv` (the two views), `t1`;
- `raw` — the raw upstream answer (a string), for workers and auditors only.

Readers see the three merged (final fields over submit-time ones), as one record did before.

Large bodies are stored compressed: the raw answer and the canonical result (`res`, read only
here, by replay) when longer than 1 KiB are kept as `zlib:` + zlib data if that is smaller
(JSON never starts with `z`, so the marker is unambiguous); `read_records` inflates them, so
every reader (replay, export, the chaos books' secrets scan) sees the JSON as it was. The views
(`mo`, `cv`) stay plain: clients read them directly.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any, Final

from pipeline.keys import Keys
from pipeline.redis_io import Redis, execute

__all__ = ["FINAL_FIELDS", "PACKED", "pack", "queue_write", "read_records", "unpack"]

# Fields of the final-state hash; every other field but `raw` belongs to the call hash.
FINAL_FIELDS: Final = frozenset({"st", "ev", "res", "mo", "cv", "t1"})
PACKED: Final = b"zlib:"
_PACK_ABOVE: Final = 1024
_PACK_LEVEL: Final = 1  # level 6: 13 % smaller, twice the CPU (400 µs per 33 KB)
_UNPACKED_MAX: Final = 64 * 1024 * 1024  # far above any bounded raw answer


def pack(data: bytes) -> bytes:
    """`data` as stored: `zlib:` + compressed when longer than 1 KiB and smaller so."""
    if len(data) <= _PACK_ABOVE:
        return data
    packed = PACKED + zlib.compress(data, _PACK_LEVEL)
    return packed if len(packed) < len(data) else data


def unpack(data: bytes) -> bytes:
    """A stored body as written: inflated when packed. A damaged or oversized packed body is
    returned as stored (not JSON: replay reports it as undecodable)."""
    if not data.startswith(PACKED):
        return data
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data[len(PACKED) :], _UNPACKED_MAX)
    except zlib.error:
        return data
    if inflater.unconsumed_tail or not inflater.eof:
        return data
    return out


def _text_keys(raw: dict[Any, Any]) -> dict[str, bytes]:
    return {(k.decode() if isinstance(k, bytes) else str(k)): v for k, v in raw.items()}


async def read_records(
    redis: Redis, keys: Keys, pairs: Sequence[tuple[str, str]]
) -> list[dict[str, bytes]]:
    """The merged records of (session, tool call id) pairs, in order; {} for an unknown one."""
    pipe = redis.pipeline(transaction=False)
    for session, tool_call_id in pairs:
        pipe.hgetall(keys.call(session, tool_call_id))
        pipe.hgetall(keys.result(session, tool_call_id))
        pipe.get(keys.raw(session, tool_call_id))
    rows = await execute(pipe) if pairs else []
    out: list[dict[str, bytes]] = []
    for i in range(0, len(rows), 3):
        call, final, raw = rows[i : i + 3]
        if not call:
            out.append({})
            continue
        record = _text_keys(call)
        record.update(_text_keys(final or {}))
        if "res" in record:
            record["res"] = unpack(record["res"])
        if raw is not None:
            record["raw"] = unpack(raw)
        out.append(record)
    return out


def queue_write(
    pipe: Any, keys: Keys, session: str, tool_call_id: str, fields: dict[str, bytes], ttl_ms: int
) -> None:
    """Queue the writes of a whole (finished) record on a pipeline, split into its keys (the
    raw answer and the result packed as a worker's finish stores them)."""
    call = {k: v for k, v in fields.items() if k not in FINAL_FIELDS and k != "raw"}
    final = {k: pack(v) if k == "res" else v for k, v in fields.items() if k in FINAL_FIELDS}
    call_key = keys.call(session, tool_call_id)
    result_key = keys.result(session, tool_call_id)
    if call:
        pipe.hset(call_key, mapping=call)
        pipe.pexpire(call_key, ttl_ms)
    if final:
        pipe.hset(result_key, mapping=final)
        pipe.pexpire(result_key, ttl_ms)
    if "raw" in fields:
        pipe.set(keys.raw(session, tool_call_id), pack(fields["raw"]), px=ttl_ms)
