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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from pipeline.keys import Keys
from pipeline.redis_io import Redis, execute

__all__ = ["FINAL_FIELDS", "queue_write", "read_records"]

# Fields of the final-state hash; every other field but `raw` belongs to the call hash.
FINAL_FIELDS: Final = frozenset({"st", "ev", "res", "mo", "cv", "t1"})


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
        if raw is not None:
            record["raw"] = raw
        out.append(record)
    return out


def queue_write(
    pipe: Any, keys: Keys, session: str, tool_call_id: str, fields: dict[str, bytes], ttl_ms: int
) -> None:
    """Queue the writes of a whole (finished) record on a pipeline, split into its keys."""
    call = {k: v for k, v in fields.items() if k not in FINAL_FIELDS and k != "raw"}
    final = {k: v for k, v in fields.items() if k in FINAL_FIELDS}
    call_key = keys.call(session, tool_call_id)
    result_key = keys.result(session, tool_call_id)
    if call:
        pipe.hset(call_key, mapping=call)
        pipe.pexpire(call_key, ttl_ms)
    if final:
        pipe.hset(result_key, mapping=final)
        pipe.pexpire(result_key, ttl_ms)
    if "raw" in fields:
        pipe.set(keys.raw(session, tool_call_id), fields["raw"], px=ttl_ms)
