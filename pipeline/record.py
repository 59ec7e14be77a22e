"""The owner of the stored record: every field name of an invocation's record and of the
stream entries around it, the argument builder of the finish script (`pipeline/lua/finish.lua`;
the admission scripts' builders are in `pipeline.admission`), its reply codes, the decoders of
what they write, and reading or writing a whole record. No other module types a field name (a
test checks).

An invocation's record lives in three keys, so Redis ACLs can tell who may touch what
(see `pipeline.keys`):

- `call` — the admission-time state, written only by a worker's admission
  (`pipeline/lua/admit.lua`): `st` (PROJECTING), `eid` (the invocation entry admission
  recorded), `inv` (the envelope), `t0`, `tool`, `dup`, `fp`, `sk` (the scope key a repeated
  request is compared with, and a submitter reads to learn its request was admitted); and two
  marks (`pipeline.cancel`): `cx` (its cancel was admitted: set by admit.lua as it acks the
  cancel) and `tk`/`ta` (the attempt a worker runs, and since when);
- `res` — the final state, written only by a worker's finish script: `st` (READY or ERROR),
  `ev`, `res` (the canonical result), `mo` and `cv` (the two views), `t1`, `sk`;
- `raw` — the raw upstream answer (a string), for workers and auditors only.

Readers see the three merged (final fields over submit-time ones), as one record did before.

The streams: a request entry is `d` (the envelope) alone; an invocation entry is `d`, `dup` and
`sk` (the scope key admission recorded, so the worker need not compute it again);
a view entry (model, control) is `id`, `d` (the view) and `sk` (the scope key it was finished
with, so any reader can check it is the scope it asked); a lifecycle entry is
`session`, `id`, `tool`, `status`, `at`, `eid` (and `evidence` once final); a dead letter is
`eid`, `reason` and `d` (written by a worker) or `session` and `id` (by the finish script).

Large bodies are stored compressed: the raw answer and the canonical result (`res`, read only
here, by replay) when longer than 1 KiB are kept as `zlib:` + zlib data if that is smaller
(JSON never starts with `z`, so the marker is unambiguous); `read_records` inflates them, so
every reader (replay, export, the chaos books' secrets scan) sees the JSON as it was. The views
(`mo`, `cv`) stay plain: clients read them directly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

from msgspec import UNSET, UnsetType

from pipeline.keys import GROUP, Keys, Partition
from pipeline.packing import PACK_ABOVE, PACKED, pack, unpack
from pipeline.redis_io import Redis, execute

__all__ = [
    "CANCELLED_AT",
    "CONTROL",
    "CONTROL_ENTRY",
    "DUPLICATE_OF",
    "ENTRY_AT",
    "ENTRY_CALL",
    "ENTRY_DATA",
    "ENTRY_DUPLICATE_OF",
    "ENTRY_EVIDENCE",
    "ENTRY_ID",
    "ENTRY_REASON",
    "ENTRY_SCOPE_KEY",
    "ENTRY_SESSION",
    "ENTRY_STATUS",
    "ENTRY_STREAM_ID",
    "ENTRY_TOOL",
    "ENVELOPE",
    "EVIDENCE",
    "FINAL_FIELDS",
    "FINGERPRINT",
    "FINISHED_AT",
    "FINISH_APPLIED",
    "FINISH_FINAL",
    "FINISH_REFUSED",
    "FINISH_WRONG_TYPE",
    "MODEL",
    "MODEL_ENTRY",
    "PACKED",
    "RAW",
    "RESULT",
    "RESULT_ROW",
    "SCOPE_KEY",
    "STATE_FIELDS",
    "STATUS",
    "SUBMITTED_AT",
    "TAKEN",
    "TAKEN_AT",
    "TOOL",
    "FinalRow",
    "LifecycleEntry",
    "ToFinish",
    "ViewEntry",
    "dead_letter",
    "final_row",
    "finish_calls",
    "invocation_entry",
    "invocation_scope",
    "lifecycle_entry",
    "pack",
    "queue_write",
    "read_records",
    "unpack",
    "view_data",
    "view_entry",
    "view_entry_flat",
    "view_fields",
    "with_views",
]

# -- the record's fields (call hash, result hash, raw key; merged by `read_records`) ----------
STATUS: Final = "st"  # PROJECTING in the call hash; READY or ERROR in the result hash
ENTRY_ID: Final = "eid"  # the invocation stream entry the submit recorded for the call
ENVELOPE: Final = "inv"  # the envelope as submitted
SUBMITTED_AT: Final = "t0"  # epoch ms
TOOL: Final = "tool"
DUPLICATE_OF: Final = "dup"  # the first tool call id of the same scope fingerprint, or ''
FINGERPRINT: Final = "fp"  # the scope fingerprint, or ''
SCOPE_KEY: Final = "sk"  # in both hashes: the scope submitted, and the scope finished
EVIDENCE: Final = "ev"  # the evidence status
RESULT: Final = "res"  # the canonical result (packed when large)
MODEL: Final = "mo"  # the Model Observation
CONTROL: Final = "cv"  # the Harness Control View
FINISHED_AT: Final = "t1"  # epoch ms
RAW: Final = "raw"  # the raw upstream answer: a key of its own, merged under this name
MODEL_ENTRY: Final = "mid"  # the result hash: the model stream entry holding the view
CONTROL_ENTRY: Final = "cid"  # the result hash: the control stream entry holding the view
# Issue 32, in the call hash (workers write them; a submitter reads them):
CANCELLED_AT: Final = "cx"  # epoch ms its cancel was admitted (`pipeline.cancel`)
TAKEN: Final = "tk"  # the attempt a worker is running (1, 2, ...): "running" to a client
TAKEN_AT: Final = "ta"  # epoch ms that attempt started

# Fields of the final-state hash; every other field but `raw` belongs to the call hash.
FINAL_FIELDS: Final = frozenset(
    {STATUS, EVIDENCE, RESULT, MODEL, CONTROL, FINISHED_AT, MODEL_ENTRY, CONTROL_ENTRY}
)
# The state fields of a record (every field but the bodies), in export order.
STATE_FIELDS: Final[tuple[str, ...]] = (
    STATUS, ENTRY_ID, SUBMITTED_AT, FINISHED_AT, TOOL, DUPLICATE_OF, FINGERPRINT, EVIDENCE,
    SCOPE_KEY,
)  # fmt: skip
# What a client reads of a result hash (HMGET), decoded by `final_row`.
# `mo`/`cv` in the hash (a record an import wrote), or the entries `mid`/`cid` (a worker's finish
# keeps each view once, on its stream): `with_views` completes a row of the second kind.
RESULT_ROW: Final = (STATUS, MODEL, CONTROL, SCOPE_KEY, MODEL_ENTRY, CONTROL_ENTRY)

# -- stream entry fields ----------------------------------------------------------------------
ENTRY_DATA: Final = "d"  # request, invocation: the envelope; view: the view; dead letter: its data
ENTRY_DUPLICATE_OF: Final = "dup"  # invocation entries
ENTRY_CALL: Final = "id"  # the tool call id (view, lifecycle and dead-letter entries)
ENTRY_SCOPE_KEY: Final = "sk"  # view entries (model and control) and invocation entries
ENTRY_SESSION: Final = "session"  # lifecycle and dead-letter entries
ENTRY_TOOL: Final = "tool"  # lifecycle entries
ENTRY_STATUS: Final = "status"  # lifecycle entries: the lifecycle status
ENTRY_EVIDENCE: Final = "evidence"  # final lifecycle entries: the evidence status
ENTRY_AT: Final = "at"  # lifecycle entries: epoch ms
ENTRY_STREAM_ID: Final = "eid"  # lifecycle and dead-letter entries: the invocation entry
ENTRY_REASON: Final = "reason"  # dead-letter entries

# -- the scripts' replies -----------------------------------------------------------------------
FINISH_APPLIED: Final = 1
FINISH_FINAL: Final = 0  # already final: another finisher applied it first (only acked)
FINISH_REFUSED: Final = -1  # not the entry (or scope) recorded for the call: dead-lettered
FINISH_WRONG_TYPE: Final = -2  # a key of the call (or, alone, of the batch) has the wrong type

_REASON_MAX: Final = 300
_DEAD_DATA_MAX: Final = 65536

Args = list[Any]


class ToFinish(NamedTuple):
    """One outcome to finish (`finish_calls`): what the finish script writes of it."""

    session_id: str
    tool_call_id: str
    tool: str
    entry_id: str
    status: str
    evidence_status: str
    result: bytes
    raw: bytes
    model: bytes
    control: bytes
    scope_key: str  # '' skips the script's scope check (an envelope that could not be decoded)


def finish_calls(
    part: Partition,
    finishes: Sequence[ToFinish],
    *,
    now_ms: int,
    retention_ms: int,
    maxlen: int,
) -> tuple[list[str], Args]:
    """The keys and arguments of one finish script call (see `pipeline/lua/finish.lua`) for a
    batch of one partition's outcomes; each result and raw answer is packed here (large
    bodies compressed). The reply is one code per outcome (`FINISH_APPLIED`, ...), or
    `[FINISH_WRONG_TYPE]` alone when a stream of the partition has the wrong type."""
    keys = [part.invocations, part.lifecycle, part.dead]
    args: Args = [GROUP, now_ms, retention_ms, maxlen, len(finishes)]
    for f in finishes:
        session, call, result, raw = f.session_id, f.tool_call_id, f.result, f.raw
        keys += part.finished(session, call)
        # `pack` leaves a body of at most `PACK_ABOVE` bytes as it is: not called for one.
        args += [f.entry_id, f.status, f.evidence_status,
                 result if len(result) <= PACK_ABOVE else pack(result),
                 raw if len(raw) <= PACK_ABOVE else pack(raw), f.model, f.control, session,
                 call, f.tool, f.scope_key]  # fmt: skip
    return keys, args


def _get(fields: Mapping[Any, bytes], name: str) -> bytes | None:
    # Entries come with str keys (`pipeline.lane.stream_entries`, `decode_fields`) or, read
    # with redis-py directly, bytes keys.
    value = fields.get(name)
    return fields.get(name.encode()) if value is None else value


def _str(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", "replace")


class FinalRow(NamedTuple):
    """A final result as a client reads it (`RESULT_ROW`)."""

    status: str
    model: bytes
    control: bytes
    scope_key: str


def final_row(row: Sequence[bytes | None]) -> FinalRow | None:
    """An HMGET of `RESULT_ROW` (completed by `with_views`), or None while the call is not
    final (or unknown)."""
    st, mo, cv, sk = row[:4]
    if st is None or st == b"PROJECTING" or mo is None or cv is None:
        return None
    return FinalRow(st.decode(), mo, cv, (sk or b"").decode("utf-8", "replace"))


class ViewEntry(NamedTuple):
    """A model or control view stream entry."""

    tool_call_id: str
    data: bytes | None  # the view
    scope_key: bytes  # the scope key it was finished with (b'' when none)


def view_entry(fields: Mapping[Any, bytes]) -> ViewEntry:
    """A view stream entry: (tool call id, the view, the scope key it was finished with)."""
    return ViewEntry(
        (_get(fields, ENTRY_CALL) or b"").decode(),
        _get(fields, ENTRY_DATA),
        _get(fields, ENTRY_SCOPE_KEY) or b"",
    )


_VIEW_LAYOUT: Final = (ENTRY_CALL.encode(), ENTRY_DATA.encode(), ENTRY_SCOPE_KEY.encode())


def view_entry_flat(flat: Sequence[bytes]) -> ViewEntry:
    """`view_entry` of an entry's fields as Redis sends them (a flat list of names and
    values): the finish script's layout (id, d, sk) read in place, any other through the
    fields' mapping, as `pipeline.lane.stream_entries` builds it."""
    if len(flat) == 6 and (flat[0], flat[2], flat[4]) == _VIEW_LAYOUT:
        return ViewEntry(flat[1].decode(), flat[3], flat[5] or b"")
    return view_entry({flat[i].decode("utf-8", "replace"): flat[i + 1]
                       for i in range(0, len(flat), 2)})  # fmt: skip


async def with_views(
    redis: Redis, keys: Keys, session_id: str, rows: list[list[bytes | None]]
) -> list[list[bytes | None]]:
    """HMGETs of `RESULT_ROW` with the views filled in from the entries a finish named (one
    round trip, none when every row has them or none is final). A view whose entry is gone (a
    session stream over `ACI_STREAM_MAXLEN`) stays missing: the row reads as not final."""
    need = [(n, row) for n, row in enumerate(rows) if row and row[0] and row[4] and row[5]
            and (row[1] is None or row[2] is None)]  # fmt: skip
    if not need:
        return rows
    pipe = redis.pipeline(transaction=False)
    for _n, row in need:  # XREVRANGE end start: exactly that entry
        pipe.xrevrange(keys.model(session_id), row[4], row[4], count=1)
        pipe.xrevrange(keys.control(session_id), row[5], row[5], count=1)
    found = await execute(pipe)
    for k, (n, row) in enumerate(need):
        model, control = found[2 * k], found[2 * k + 1]
        if model and control:
            rows[n] = [row[0], view_data(model[0][1]), view_data(control[0][1]), *row[3:]]
    return rows


def view_data(fields: Mapping[Any, bytes]) -> bytes:
    """The view of a view stream entry (b'' when it has none)."""
    return _get(fields, ENTRY_DATA) or b""


def view_fields(tool_call_id: str, data: bytes) -> dict[str, Any]:
    """The fields of a view stream entry (as an import writes one back)."""
    return {ENTRY_CALL: tool_call_id, ENTRY_DATA: data}


def invocation_scope(fields: Mapping[Any, bytes]) -> str:
    """The scope key admission recorded on an invocation entry ('' on an entry without one)."""
    return (_get(fields, ENTRY_SCOPE_KEY) or b"").decode("utf-8", "replace")


def invocation_entry(fields: Mapping[Any, bytes]) -> tuple[bytes, str | UnsetType]:
    """An invocation stream entry: (the envelope, `duplicate_of` or UNSET)."""
    dup = _get(fields, ENTRY_DUPLICATE_OF)
    return _get(fields, ENTRY_DATA) or b"", dup.decode("utf-8", "replace") if dup else UNSET


def dead_letter(entry_id: str, reason: str, fields: Mapping[Any, bytes]) -> dict[str, Any]:
    """The fields of a worker's dead letter for the invocation entry `fields` (cut to bounds)."""
    data = _get(fields, ENTRY_DATA) or b""
    return {
        ENTRY_STREAM_ID: entry_id,
        ENTRY_REASON: reason[:_REASON_MAX],
        ENTRY_DATA: data[:_DEAD_DATA_MAX],
    }


class LifecycleEntry(NamedTuple):
    """A lifecycle stream entry, as text (None for a field it does not have)."""

    session: str | None
    tool_call_id: str | None
    tool: str | None
    status: str | None
    evidence: str | None
    at: str | None
    entry_id: str | None

    @property
    def submitted(self) -> bool:
        """The submit's entry (PROJECTING), not a final one."""
        return self.status == "PROJECTING"


_LIFECYCLE: Final = (
    ENTRY_SESSION, ENTRY_CALL, ENTRY_TOOL, ENTRY_STATUS, ENTRY_EVIDENCE, ENTRY_AT, ENTRY_STREAM_ID,
)  # fmt: skip


def lifecycle_entry(fields: Mapping[Any, bytes]) -> LifecycleEntry:
    """A lifecycle stream entry (str or bytes field names)."""
    return LifecycleEntry(*(_str(_get(fields, name)) for name in _LIFECYCLE))


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
    views = redis.pipeline(transaction=False)
    named: list[dict[str, bytes]] = []
    for (session, _id), i in zip(pairs, range(0, len(rows), 3), strict=True):
        call, final, raw = rows[i : i + 3]
        if not call:
            out.append({})
            continue
        record = _text_keys(call)
        record.update(_text_keys(final or {}))
        if RESULT in record:
            record[RESULT] = unpack(record[RESULT])
        if raw is not None:
            record[RAW] = unpack(raw)
        if MODEL_ENTRY in record and MODEL not in record:  # each view kept once: on its stream
            views.xrevrange(keys.model(session), record[MODEL_ENTRY], record[MODEL_ENTRY], count=1)
            views.xrevrange(
                keys.control(session), record[CONTROL_ENTRY], record[CONTROL_ENTRY], count=1
            )
            named.append(record)
        out.append(record)
    found = await execute(views) if named else []
    for k, record in enumerate(named):
        for field, entry in ((MODEL, found[2 * k]), (CONTROL, found[2 * k + 1])):
            if entry:
                record[field] = view_data(entry[0][1])
    return out


def queue_write(
    pipe: Any, keys: Keys, session: str, tool_call_id: str, fields: dict[str, bytes], ttl_ms: int
) -> None:
    """Queue the writes of a whole (finished) record on a pipeline, split into its keys (the
    raw answer and the result packed as a worker's finish stores them)."""
    call = {k: v for k, v in fields.items() if k not in FINAL_FIELDS and k != RAW}
    final = {k: pack(v) if k == RESULT else v for k, v in fields.items() if k in FINAL_FIELDS}
    call_key = keys.call(session, tool_call_id)
    result_key = keys.result(session, tool_call_id)
    if call:
        pipe.hset(call_key, mapping=call)
        pipe.pexpire(call_key, ttl_ms)
    if final:
        pipe.hset(result_key, mapping=final)
        pipe.pexpire(result_key, ttl_ms)
    if RAW in fields:
        pipe.set(keys.raw(session, tool_call_id), pack(fields[RAW]), px=ttl_ms)
