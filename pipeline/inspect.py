"""Read-only inspection of a deployment for the web console (`app/console/`): sessions newest
first, a session's calls with their state, one call's whole record, the lifecycle streams
paged backwards or tailed forwards, and the dead letters.

Every read is a plain read (ZRANGE, SCAN, HMGET, XRANGE, XREVRANGE, XREAD, XLEN) that the
`auditor` Redis user of `pipeline.acl` may run: nothing here writes, reads with a consumer
group (`XREADGROUP` moves group state) or runs a script. Every read is bounded by a count the
caller gives, so a console keeps no history of its own and pages through Redis instead.

The other read paths stay where they are (`pipeline.status.collect_status`,
`pipeline.views.read_views`, `pipeline.admin.session_timeline`, `pipeline.record`): this module
only adds what the console needs beside them, in one place.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Final, NamedTuple

import msgspec

from pipeline.call_index import indexed_call_ids
from pipeline.envelope import peek_identity
from pipeline.keys import Keys, Partition
from pipeline.record import (
    CONTROL,
    CONTROL_ENTRY,
    DUPLICATE_OF,
    ENTRY_AT,
    ENTRY_CALL,
    ENTRY_DATA,
    ENTRY_EVIDENCE,
    ENTRY_ID,
    ENTRY_REASON,
    ENTRY_SCOPE_KEY,
    ENTRY_SESSION,
    ENTRY_STATUS,
    ENTRY_STREAM_ID,
    ENTRY_TOOL,
    EVIDENCE,
    FINISHED_AT,
    STATUS,
    SUBMITTED_AT,
    TOOL,
    LifecycleEntry,
    ViewEntry,
    lifecycle_entry,
    read_records,
    view_data,
)
from pipeline.redis_io import Redis, call_redis, execute

__all__ = [
    "BAD_JSON",
    "CallRow",
    "DeadLetter",
    "call_controls",
    "call_record",
    "call_rows",
    "dead_letters",
    "digits",
    "find_call_sessions",
    "latest_lifecycle_ids",
    "lifecycle_after",
    "lifecycle_window",
    "recent_sessions",
    "session_call_ids",
    "session_count",
    "view_page",
]

# Keys a SCAN call visits (it walks the whole keyspace): 200,000 keys take 40 calls of ~2 ms.
# What a stored body that is not JSON the console can show raises when decoded: invalid JSON,
# or valid JSON nested past the recursion limit (`[[[[…]]]]`, 5,000 deep).
BAD_JSON: Final = (msgspec.DecodeError, RecursionError)
_SCAN_COUNT: Final = 5000
_CHUNK: Final = 500
_DEAD_DATA_SHOWN: Final = 4096
_CALL_FIELDS: Final = (STATUS, SUBMITTED_AT, TOOL, DUPLICATE_OF, ENTRY_ID)
_RESULT_FIELDS: Final = (STATUS, EVIDENCE, FINISHED_AT)


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _int(value: Any) -> int | None:
    return digits(_text(value))


def digits(text: str | None) -> int | None:
    """`text` as a non-negative integer when it is 1-20 ASCII digits, else None (a field of a
    malformed entry: `str.isdigit` admits '²', which `int` refuses)."""
    if not text or len(text) > 20 or not text.isascii() or not text.isdigit():
        return None
    return int(text)


async def session_count(redis: Redis, keys: Keys) -> int:
    """How many sessions the deployment indexes (over its partitions)."""
    total = 0
    for part in keys.parts:
        total += await call_redis(redis.zcard(part.sessions))
    return int(total)


async def recent_sessions(
    redis: Redis, keys: Keys, *, offset: int, limit: int
) -> list[tuple[str, int]]:
    """(session, last submit epoch ms), newest first over every partition, `limit` of them
    from `offset` (each partition is asked for at most `offset + limit`)."""
    rows: list[tuple[str, int]] = []
    stop = max(0, offset) + max(0, limit) - 1
    if stop < 0 or limit <= 0:
        return rows
    if len(keys.parts) == 1:  # nothing to merge: read only the page (page 4,000 is 25 rows)
        reply = await call_redis(
            redis.execute_command(
                "ZRANGE", keys.parts[0].sessions, max(0, offset), stop, "REV", "WITHSCORES"
            )
        )
        return _pairs(reply)
    for part in keys.parts:
        # ZRANGE .. REV (not ZREVRANGE): the auditor's rules name ZRANGE.
        reply = await call_redis(
            redis.execute_command("ZRANGE", part.sessions, 0, stop, "REV", "WITHSCORES")
        )
        rows.extend(_pairs(reply))
    rows.sort(key=lambda r: (-r[1], r[0]))
    return rows[offset : offset + limit]


def _pairs(reply: Any) -> list[tuple[str, int]]:
    # RESP2 answers a flat list, RESP3 (and redis-py's parsers) pairs.
    if reply and not isinstance(reply[0], list | tuple):
        reply = list(zip(reply[::2], reply[1::2], strict=True))
    return [(_text(name), int(float(score))) for name, score in reply]


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


async def _scan(redis: Redis, pattern: str, limit: int) -> list[str]:
    # Through call_redis like every other read: Redis down is RedisUnavailable, not a
    # driver error that a page would turn into a 500.
    return await call_redis(_scan_keys(redis, pattern, limit))


async def _scan_keys(redis: Redis, pattern: str, limit: int) -> list[str]:
    found: list[str] = []
    async for key in redis.scan_iter(match=pattern, count=_SCAN_COUNT):
        found.append(_text(key))
        if len(found) >= limit:
            break
    return found


async def session_call_ids(redis: Redis, keys: Keys, session: str, limit: int) -> list[str]:
    """The tool call ids of a session's calls, at most `limit` (the newest, by admission):
    from its call index (`pipeline.call_index`; an id whose record expired may still be
    there: its row has no status). Where the index may lack calls recorded before it existed
    (its partition is not marked complete), also by key name, a SCAN of the keyspace."""
    if limit <= 0:
        return []
    ids, complete = await call_redis(indexed_call_ids(redis, keys, session, limit))
    if complete:
        return ids
    head = keys.call(session, "")
    seen = set(ids)
    for key in await _scan(redis, _glob_escape(head) + "*", limit):
        if key[len(head) :] not in seen:
            seen.add(key[len(head) :])
            ids.append(key[len(head) :])
    return ids[-limit:] if len(ids) > limit else ids


async def find_call_sessions(redis: Redis, keys: Keys, tool_call_id: str, limit: int) -> list[str]:
    """The sessions that hold a call with exactly this tool call id, at most `limit`."""
    sessions: list[str] = []
    for part in keys.parts:
        head = part.call("", "")[:-1]  # `{tag}:call:`
        pattern = _glob_escape(head) + "*:" + _glob_escape(tool_call_id)
        for key in await _scan(redis, pattern, limit):
            session, _, call = key[len(head) :].partition(":")
            if call == tool_call_id and session not in sessions:
                sessions.append(session)
    return sessions[:limit]


class CallRow(NamedTuple):
    """A call's state without its bodies (the Control View is small: no evidence)."""

    session: str
    tool_call_id: str
    tool: str
    status: str  # PROJECTING, READY, ERROR ('' when the call is unknown)
    evidence: str
    submitted_ms: int | None
    finished_ms: int | None
    duplicate_of: str
    control: bytes | None  # only when asked for (`call_controls` reads a page's)
    entry_id: str  # the invocation stream entry of its submit: the submission order

    @property
    def order(self) -> tuple[int, int, int, str]:
        """Sort key: submission time, then the submit's stream entry id."""
        ms, seq = _id_key(self.entry_id)
        return (self.submitted_ms or 0, ms, seq, self.tool_call_id)


async def call_rows(
    redis: Redis, keys: Keys, session: str, tool_call_ids: Sequence[str]
) -> list[CallRow]:
    """The state of each call (HMGET of its call and result hashes), in the order given."""
    rows: list[CallRow] = []
    for start in range(0, len(tool_call_ids), _CHUNK):
        chunk = tool_call_ids[start : start + _CHUNK]
        pipe = redis.pipeline(transaction=False)
        for call_id in chunk:
            pipe.hmget(keys.call(session, call_id), list(_CALL_FIELDS))
            pipe.hmget(keys.result(session, call_id), list(_RESULT_FIELDS))
        replies = await execute(pipe)
        for i, call_id in enumerate(chunk):
            st, t0, tool, dup, eid = replies[2 * i]
            final_st, ev, t1 = replies[2 * i + 1]
            rows.append(
                CallRow(
                    session=session,
                    tool_call_id=call_id,
                    tool=_text(tool),
                    status=_text(final_st or st),
                    evidence=_text(ev),
                    submitted_ms=_int(t0),
                    finished_ms=_int(t1),
                    duplicate_of=_text(dup),
                    control=None,
                    entry_id=_text(eid),
                )
            )
    return rows


async def call_controls(redis: Redis, keys: Keys, rows: Sequence[CallRow]) -> list[CallRow]:
    """`rows` with their Control Views read (one page of a listing: a 10,000-call session's
    listing reads no bodies, only the page shown does)."""
    pipe = redis.pipeline(transaction=False)
    for row in rows:
        pipe.hmget(keys.result(row.session, row.tool_call_id), [CONTROL, CONTROL_ENTRY])
    replies = await execute(pipe) if rows else []
    # A worker's finish keeps the view once, on the control stream (`cid` names its entry);
    # an imported record holds it in the hash (`cv`).
    named = [(n, cid) for n, (cv, cid) in enumerate(replies) if cv is None and cid]
    if named:
        pipe = redis.pipeline(transaction=False)
        for n, cid in named:
            pipe.xrevrange(keys.control(rows[n].session), cid, cid, count=1)
        found = await execute(pipe)
        for (n, _cid), entries in zip(named, found, strict=True):
            if entries:
                replies[n] = [view_data(entries[0][1]), None]
    return [row._replace(control=cv) for row, (cv, _cid) in zip(rows, replies, strict=True)]


async def call_record(
    redis: Redis, keys: Keys, session: str, tool_call_id: str
) -> dict[str, bytes]:
    """One call's merged record (`pipeline.record.read_records`), {} when unknown."""
    return (await read_records(redis, keys, [(session, tool_call_id)]))[0]


async def view_page(
    redis: Redis, stream: str, *, after: str = "-", count: int
) -> list[tuple[str, ViewEntry]]:
    """Up to `count` entries of a view stream after the entry id `after` (exclusive)."""
    low = after if after == "-" else "(" + after
    reply = await call_redis(redis.xrange(stream, min=low, max="+", count=count))
    return [(_text(eid), _view_entry(fields)) for eid, fields in reply]


def _view_entry(fields: Mapping[Any, Any]) -> ViewEntry:
    # `pipeline.record.view_entry` decodes the call id strictly: a damaged entry (non-UTF-8)
    # must not break a page that only shows it.
    text = {_text(k): v for k, v in fields.items()}
    data, scope = text.get(ENTRY_DATA), text.get(ENTRY_SCOPE_KEY)
    return ViewEntry(_text(text.get(ENTRY_CALL)), data, scope or b"")


async def lifecycle_window(
    redis: Redis, part: Partition, *, limit: int, batch: int = 2000
) -> AsyncIterator[list[tuple[str, LifecycleEntry]]]:
    """A partition's lifecycle entries newest first, in batches, `limit` at most."""
    high = "+"
    seen = 0
    while seen < limit:
        count = min(batch, limit - seen)
        reply = await call_redis(redis.xrevrange(part.lifecycle, max=high, min="-", count=count))
        if not reply:
            return
        rows = [(_text(eid), _lifecycle(fields)) for eid, fields in reply]
        seen += len(rows)
        yield rows
        if len(reply) < count:
            return
        high = "(" + rows[-1][0]


_LIFECYCLE_BYTES: Final = tuple(
    name.encode()
    for name in (ENTRY_SESSION, ENTRY_CALL, ENTRY_TOOL, ENTRY_STATUS, ENTRY_EVIDENCE, ENTRY_AT,
                 ENTRY_STREAM_ID)
)  # fmt: skip


def _lifecycle(fields: Mapping[Any, Any]) -> LifecycleEntry:
    # `lifecycle_entry` with one lookup a field: a window pass decodes 20,000 of them a page.
    if not fields or not isinstance(next(iter(fields)), bytes):
        return lifecycle_entry(fields)
    get = fields.get
    return LifecycleEntry(
        *(None if (v := get(name)) is None else v.decode("utf-8", "replace")
          for name in _LIFECYCLE_BYTES)
    )  # fmt: skip


async def latest_lifecycle_ids(redis: Redis, keys: Keys) -> list[str]:
    """The newest lifecycle entry id of each partition ('0-0' for an empty one): where a
    tail that starts now begins."""
    ids: list[str] = []
    for part in keys.parts:
        reply = await call_redis(redis.xrevrange(part.lifecycle, max="+", min="-", count=1))
        ids.append(_text(reply[0][0]) if reply else "0-0")
    return ids


async def lifecycle_after(
    redis: Redis, parts: Sequence[Partition], cursors: Sequence[str], *, count: int,
    block_ms: int | None,
) -> list[tuple[int, str, LifecycleEntry]]:  # fmt: skip
    """Lifecycle entries after each partition's cursor: (position in `parts`, entry id,
    entry), `count` per partition at most. One partition may block up to `block_ms`; several
    are read one by one without blocking (their streams may live on different cluster
    slots, which one XREAD cannot name together)."""
    out: list[tuple[int, str, LifecycleEntry]] = []
    block = block_ms if len(parts) == 1 else None
    for index, (part, cursor) in enumerate(zip(parts, cursors, strict=True)):
        reply = await call_redis(redis.xread({part.lifecycle: cursor}, count=count, block=block))
        for _name, entries in reply or []:
            out.extend((index, _text(eid), lifecycle_entry(fields)) for eid, fields in entries)
    return out


class DeadLetter(NamedTuple):
    """One dead letter: its entry id, the invocation entry, why, and whose call it was."""

    partition: int
    entry_id: str
    invocation_entry: str
    reason: str
    session: str
    tool_call_id: str
    data: str  # the envelope as dead-lettered by a worker (cut for display), or ''


def _dead_letter(index: int, eid: Any, fields: Mapping[Any, Any]) -> DeadLetter:
    text = {_text(k): v for k, v in fields.items()}
    data = text.get(ENTRY_DATA) or b""
    session, call = _text(text.get(ENTRY_SESSION)), _text(text.get(ENTRY_CALL))
    if not session and data:
        identity = peek_identity(data)
        if identity is not None:
            session, call = identity.session_id, identity.tool_call_id
    return DeadLetter(
        partition=index,
        entry_id=_text(eid),
        invocation_entry=_text(text.get(ENTRY_STREAM_ID)),
        reason=_text(text.get(ENTRY_REASON)),
        session=session,
        tool_call_id=call,
        data=_text(data[:_DEAD_DATA_SHOWN]),
    )


async def dead_letters(redis: Redis, keys: Keys, *, count: int) -> list[DeadLetter]:
    """The newest `count` dead letters of each partition, newest first overall."""
    letters: list[DeadLetter] = []
    for part in keys.parts:
        reply = await call_redis(redis.xrevrange(part.dead, max="+", min="-", count=count))
        letters.extend(_dead_letter(part.index, eid, fields) for eid, fields in reply)
    letters.sort(key=lambda d: _id_key(d.entry_id), reverse=True)
    return letters[:count]


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return (digits(ms) or 0, digits(seq) or 0)
