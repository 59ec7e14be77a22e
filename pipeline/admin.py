"""Operator operations on a deployment's keys as a whole: a session's lifecycle timeline as
recorded, and dropping every key of a prefix (the demo's and the benchmark's own prefixes)."""

from __future__ import annotations

from typing import Any

from pipeline.keys import Keys
from pipeline.record import ENTRY_SESSION, lifecycle_entry
from pipeline.redis_io import Redis, call_redis

__all__ = ["delete_prefix", "scan_keys", "session_timeline"]

_DELETE_BATCH = 1000


async def session_timeline(redis: Redis, keys: Keys, session_id: str) -> list[dict[str, Any]]:
    """The lifecycle entries of one session, oldest first, each as its fields (text), without
    the session field (its partition's lifecycle stream holds other sessions' entries too)."""
    rows = []
    stream = keys.for_session(session_id).lifecycle
    for _eid, fields in await call_redis(redis.xrange(stream, "-", "+")):
        if lifecycle_entry(fields).session != session_id:
            continue
        rows.append(
            {k.decode(): v.decode() for k, v in fields.items() if k.decode() != ENTRY_SESSION}
        )
    return rows


async def scan_keys(redis: Redis, pattern: str) -> list[Any]:
    """Every key matching `pattern` (SCAN), through `call_redis`: a user without SCAN (the
    submitter) is a RedisProtocolError("NOPERM"), one line, not a driver traceback."""
    return await call_redis(_scan(redis, pattern))


async def _scan(redis: Redis, pattern: str) -> list[Any]:
    return [k async for k in redis.scan_iter(match=pattern, count=1000)]


async def delete_prefix(redis: Redis, keys: Keys) -> int:
    """Delete every key of the deployment `keys` names: one scan per partition tag (a prefix
    has no `:` nor braces, so no other deployment's key matches). The number deleted."""
    deleted = 0
    for part in keys.parts:
        found = await scan_keys(redis, f"{part.tag}:*")
        for start in range(0, len(found), _DELETE_BATCH):
            deleted += await call_redis(redis.delete(*found[start : start + _DELETE_BATCH]))
    return deleted
