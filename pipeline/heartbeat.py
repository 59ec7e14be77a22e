"""Worker heartbeats: how `status`, the metrics and `call` know a worker is alive.

XINFO's consumer `idle` is no liveness signal: on Redis 7.0 it resets only when an entry is
delivered, so a healthy worker blocked in `XREADGROUP` on a quiet queue looks idle for ever.
Each worker therefore beats on its own: every third of `heartbeat_ttl_s` it writes its
consumer name with the time (epoch ms) into each of its partitions' `heartbeats` sorted set
(`pipeline.keys`). A consumer is *live* while its last beat is younger than the TTL, *dead*
after that; beats older than `_FORGET_TTLS` TTLs are trimmed (by any beating worker), and the
set itself expires when no worker beats any more. A worker that stops cleanly removes its beat.

Plain sorted-set commands (ZADD, ZREMRANGEBYSCORE, ZCOUNT, ZRANGE): the same on every Redis
version, no per-field expiry needed. The worker role writes the set; the auditor (status)
and the submitter (`call` asks whether anyone reads its partition) only read it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Final

from pipeline.keys import Partition
from pipeline.redis_io import Redis, call_redis, execute
from pipeline.settings import Settings

__all__ = ["beat", "beats", "configs", "forget", "heartbeat_ttl_s", "live_count"]

_FORGET_TTLS: Final = 20  # a dead worker stays listed (as dead) for 20 TTLs, then is trimmed


def heartbeat_ttl_s(settings: Settings) -> float:
    """How long a beat keeps a worker live: half the visibility timeout, at most 15 s (a
    worker beats every third of it, so two lost beats in a row still leave it live)."""
    return min(15.0, settings.visibility_timeout_s / 2)


def _now_ms() -> int:
    return int(time.time() * 1000)


async def beat(
    redis: Redis,
    parts: Sequence[Partition],
    consumer: str,
    ttl_s: float,
    deployment: Mapping[str, str] | None = None,
    also: Partition | None = None,
    config: str = "",
) -> int:
    """Record a beat of `consumer` in each partition (and, given, the `deployment` settings
    a client that admits its own calls must share: `pipeline.admit_here`, written under
    `also` too: the prefix's own tag, which a client of another `ACI_PARTITIONS` reads);
    returns the number of live workers over those partitions (each counted once per
    partition it reads, at most once overall). `config`, a digest of the worker's sources'
    configuration, is beaten beside it into `configs` (`status` compares live workers')."""
    now = _now_ms()
    ttl_ms = int(ttl_s * 1000)
    pipe = redis.pipeline(transaction=False)
    for part in parts:
        pipe.zadd(part.heartbeats, {consumer: now})
        pipe.zremrangebyscore(part.heartbeats, "-inf", now - _FORGET_TTLS * ttl_ms)
        pipe.pexpire(part.heartbeats, _FORGET_TTLS * ttl_ms)
        pipe.zcount(part.heartbeats, now - ttl_ms, "+inf")
    for part in parts if config else ():
        pipe.zadd(part.configs, {f"{consumer} {config}": now})
        pipe.zremrangebyscore(part.configs, "-inf", now - _FORGET_TTLS * ttl_ms)
        pipe.pexpire(part.configs, _FORGET_TTLS * ttl_ms)
    written = [*parts, *(() if also is None or also.tag in {p.tag for p in parts} else (also,))]
    for part in written if deployment else ():
        pipe.hset(part.deployment, mapping=dict(deployment or {}))
        pipe.pexpire(part.deployment, _FORGET_TTLS * ttl_ms)
    replies = await execute(pipe)
    return max((int(n) for n in replies[3 : 4 * len(parts) : 4]), default=0)


async def forget(redis: Redis, parts: Sequence[Partition], consumer: str, config: str = "") -> None:
    """Remove the beats of a worker that stops cleanly."""
    pipe = redis.pipeline(transaction=False)
    for part in parts:
        pipe.zrem(part.heartbeats, consumer)
        if config:
            pipe.zrem(part.configs, f"{consumer} {config}")
    await execute(pipe)


async def configs(redis: Redis, part: Partition) -> dict[str, str]:
    """The configuration digest each worker beat last in one partition: consumer → digest."""
    pairs = await call_redis(redis.zrange(part.configs, 0, -1, withscores=True))
    latest: dict[str, tuple[int, str]] = {}
    for member, score in pairs:
        text = member.decode(errors="replace") if isinstance(member, bytes) else str(member)
        name, _, digest = text.rpartition(" ")
        if name and int(score) >= latest.get(name, (-1, ""))[0]:
            latest[name] = (int(score), digest)
    return {name: digest for name, (_, digest) in latest.items()}


async def beats(redis: Redis, part: Partition) -> dict[str, int]:
    """Every worker's last beat in one partition: consumer name → epoch ms."""
    pairs = await call_redis(redis.zrange(part.heartbeats, 0, -1, withscores=True))
    return {
        (name.decode() if isinstance(name, bytes) else str(name)): int(score)
        for name, score in pairs
    }


async def live_count(redis: Redis, part: Partition, ttl_s: float) -> int:
    """How many workers beat in this partition within the TTL."""
    count: int = await call_redis(
        redis.zcount(part.heartbeats, _now_ms() - int(ttl_s * 1000), "+inf")
    )
    return count
