"""Retention: bound every stream by the operator policy (age and length) without ever removing
an invocation that has not finished.

The invocations stream is trimmed with `MINID` to the oldest of: the retention cut-off, the
oldest pending (delivered, unacknowledged) entry, and the first entry the group has not read
yet. Output streams (lifecycle, per-session views) are finished by definition; they are capped
by `MAXLEN ~` when written and expire `retention_s` after their last write.
"""

from __future__ import annotations

import time

from pipeline.call_index import prune_sessions
from pipeline.keys import GROUP, Keys, Partition
from pipeline.redis_io import Redis, call_redis, execute

__all__ = ["safe_trim_id", "trim_streams"]


def _parse(entry_id: bytes | str) -> tuple[int, int]:
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def safe_trim_id(
    cutoff_ms: int, oldest_pending: bytes | str | None, last_delivered: bytes | str | None
) -> str:
    """The highest stream id that may be trimmed below without losing unfinished work."""
    bound = (cutoff_ms, 0)
    if oldest_pending is not None:
        bound = min(bound, _parse(oldest_pending))
    if last_delivered is not None:
        ms, seq = _parse(last_delivered)
        bound = min(bound, (ms, seq + 1))
    return f"{bound[0]}-{bound[1]}"


async def trim_streams(redis: Redis, keys: Keys | Partition, settings: object) -> None:
    """Apply the retention policy once to one partition (called periodically by the worker's
    janitor, for each partition it reads)."""
    retention_s = int(getattr(settings, "retention_s", 86_400))
    cutoff_ms = int(time.time() * 1000) - retention_s * 1000
    groups = await call_redis(redis.xinfo_groups(keys.invocations))
    group = next((g for g in groups if g["name"] in (GROUP, GROUP.encode())), None)
    if group is None:
        return
    summary = await call_redis(redis.xpending(keys.invocations, GROUP))
    oldest = summary["min"] if summary and summary["pending"] else None
    minid = safe_trim_id(cutoff_ms, oldest, group["last-delivered-id"])
    pipe = redis.pipeline(transaction=False)
    pipe.xtrim(keys.invocations, minid=minid, approximate=True)
    pipe.xtrim(keys.lifecycle, minid=f"{cutoff_ms}-0", approximate=True)
    pipe.xtrim(keys.dead, minid=f"{cutoff_ms}-0", approximate=True)
    await execute(pipe)
    # Sessions past the retention leave the sessions index, their call indexes trimmed to
    # the calls that still live (never an in-flight one), in the same step (pipeline.call_index).
    part = keys if isinstance(keys, Partition) else keys.parts[0]
    await prune_sessions(redis, part, cutoff_ms)
