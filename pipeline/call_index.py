"""A session's call index (`{tag}:calls:<session>`): which calls a session holds, without a
SCAN of the whole keyspace.

Written by the trusted side only, in the step that creates the call record (`admit.lua`: a
record never exists without its entry; a submitter cannot write it). Read by the console,
`replay` and `export` (`session_call_ids`). Its members leave only when their call record is
gone, never by age (an in-flight call's record has no expiry, so neither has its index entry):
admission drops a session's two oldest gone members once a batch, and the janitor runs
`prune_calls.lua` on each session leaving the sessions index (`prune_sessions`), which also
gives the index the lifetime of its longest-living record.

Calls recorded before the index existed: a partition whose `calls_ready` marker is missing
(set by admission on the partition's first admission ever, or by `reindex`) is listed from the
index *and* by SCAN, as before the index; `reindex` (an administrator's URL, once every worker
runs this version) backfills the index from the call records and sets the marker.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import Any, Final

from pipeline.keys import Keys, Partition
from pipeline.redis_io import Redis, RedisProtocolError, call_redis, execute
from pipeline.scripts import BACKFILL_CALLS_LUA, PRUNE_CALLS_LUA

__all__ = ["indexed_call_ids", "prune_sessions", "reindex"]

_PRUNE_BATCH: Final = 500  # sessions pruned per janitor pass and partition
_BACKFILL_BATCH: Final = 500
_SCAN_COUNT: Final = 5000
_PRUNE_SHA: Final = hashlib.sha1(PRUNE_CALLS_LUA.encode()).hexdigest()


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


async def indexed_call_ids(
    redis: Redis, keys: Keys, session: str, limit: int
) -> tuple[list[str], bool]:
    """The newest `limit` ids of the session's call index, and whether the index is complete
    (its partition's `calls_ready` marker): when it is not, calls recorded before the index
    existed are found by key name too (`pipeline.inspect.session_call_ids`)."""
    part = keys.for_session(session)
    pipe = redis.pipeline(transaction=False)
    pipe.exists(part.calls_ready)
    pipe.zrange(part.calls(session), -limit, -1)
    ready, ids = await execute(pipe)
    return [_text(i) for i in ids], bool(ready)


def _prune_args(
    part: Partition, session: str, cutoff_ms: int, leave: bool
) -> tuple[list[str], list[Any]]:
    keys = [part.calls(session), part.sessions if leave else ""]
    return keys, [part.call(session, ""), session, cutoff_ms]


async def prune_sessions(redis: Redis, part: Partition, cutoff_ms: int) -> int:
    """The janitor's pass over one partition: each session whose last admission is not newer
    than `cutoff_ms` leaves the sessions index, and its call index keeps only members whose
    call record lives, expiring with the longest-living one (at most `_PRUNE_BATCH` sessions a
    pass; the next pass takes the rest). Returns how many sessions it handled."""
    names = await call_redis(
        redis.zrangebyscore(part.sessions, "-inf", cutoff_ms, start=0, num=_PRUNE_BATCH)
    )
    if not names:
        return 0
    for attempt in (1, 2):
        pipe = redis.pipeline(transaction=False)
        for name in names:
            ks, args = _prune_args(part, _text(name), cutoff_ms, leave=True)
            pipe.evalsha(_PRUNE_SHA, len(ks), *ks, *args)
        try:
            await execute(pipe)
            break
        except RedisProtocolError as exc:  # a restarted Redis lost its scripts: load, again
            if str(exc) != "NOSCRIPT" or attempt == 2:
                raise
            await call_redis(redis.script_load(PRUNE_CALLS_LUA))
    return len(names)


async def _backfill(redis: Redis, keys: Keys, found: Sequence[str], head: str) -> set[str]:
    """Index one batch of call record names (of one partition); the sessions touched."""
    call_keys: list[str] = []
    ids: list[str] = []
    sessions: set[str] = set()
    for key in found:
        session, sep, call_id = key[len(head) :].partition(":")  # session ids hold no ':'
        if not sep:
            continue
        call_keys += [key, keys.calls(session)]
        ids.append(call_id)
        sessions.add(session)
    if ids:
        await call_redis(redis.eval(BACKFILL_CALLS_LUA, len(call_keys), *call_keys, *ids))
    return sessions


async def reindex(redis: Redis, keys: Keys) -> dict[str, int]:
    """Backfill every partition's call indexes from the call records (SCAN: an administrator's
    URL), give each touched index its records' lifetime, and mark the partitions complete.
    Run it once every worker runs a version that writes the index; running it again is
    harmless. Returns {"calls": records seen, "sessions": sessions touched}."""
    seen, touched = 0, 0
    for part in keys.parts:
        # Through call_redis: the SCAN's driver errors (Redis down, refused) are the typed
        # errors, one line at the CLI; before, a Redis down was a traceback.
        calls, sessions = await call_redis(_reindex_part(redis, keys, part))
        seen, touched = seen + calls, touched + sessions
    return {"calls": seen, "sessions": touched}


async def _reindex_part(redis: Redis, keys: Keys, part: Partition) -> tuple[int, int]:
    seen = 0
    head = part.call("", "")[:-2]  # `{tag}:call:`
    pattern = "".join("\\" + c if c in "*?[]\\" else c for c in head) + ":*"
    head += ":"
    batch: list[str] = []
    sessions: set[str] = set()
    async for key in redis.scan_iter(match=pattern, count=_SCAN_COUNT):
        batch.append(_text(key))
        if len(batch) >= _BACKFILL_BATCH:
            sessions |= await _backfill(redis, keys, batch, head)
            seen, batch = seen + len(batch), []
    sessions |= await _backfill(redis, keys, batch, head)
    seen += len(batch)
    now = int(time.time() * 1000)
    for session in sessions:
        ks, args = _prune_args(part, session, 0, leave=False)
        await call_redis(redis.eval(PRUNE_CALLS_LUA, len(ks), *ks, *args))
    await call_redis(redis.set(part.calls_ready, now))
    return seen, len(sessions)
