"""The heartbeat of a worker: from its start until its last work is finished, every third of
the heartbeat TTL it records a beat in each partition it reads (`pipeline.heartbeat`), so
`status` and the metrics show it live while it waits on a quiet queue, and dead once it stops
beating. A clean stop removes the beat.

It also says a Redis outage in the log once each way, for the whole worker: when a beat first
fails to reach Redis, and when one reaches it again (with how long it was away); the other
loops retry meanwhile without saying it again (the janitor at DEBUG).
"""

from __future__ import annotations

import logging
import time

import anyio

from pipeline.heartbeat import beat, forget, heartbeat_ttl_s
from pipeline.redis_io import PipelineError, RedisUnavailable
from workers.runtime.state import WorkerState

__all__ = ["heartbeat_loop"]

log = logging.getLogger("aci.worker")
_AWAY = (
    "redis unavailable: this worker waits and retries (reads, admission, takeovers, finishes "
    "and beats); said again when it answers"
)


async def heartbeat_loop(state: WorkerState, done: anyio.Event) -> None:
    """Beat until `done`, then remove this worker's beats (bounded, shielded)."""
    ttl = heartbeat_ttl_s(state.settings)
    away_since: float | None = None  # when a beat first failed to reach Redis
    while not done.is_set():
        try:
            live = await beat(state.redis, state.parts, state.consumer, ttl)
        except RedisUnavailable:
            if away_since is None:
                away_since = time.monotonic()
                log.warning(_AWAY)
        except PipelineError as exc:
            log.error("heartbeat: redis refused (%s)", exc)
        else:
            if away_since is not None:
                log.warning("redis answers again after %.1f s", time.monotonic() - away_since)
                away_since = None
            if state.metrics is not None:
                state.metrics.beat(live)
        with anyio.move_on_after(ttl / 3):
            await done.wait()
    with anyio.CancelScope(shield=True), anyio.move_on_after(2):
        try:
            await forget(state.redis, state.parts, state.consumer)
        except PipelineError:
            pass  # it ages out: dead after the TTL
