"""The heartbeat of a worker: from its start until its last work is finished, every third of
the heartbeat TTL it records a beat in each partition it reads (`pipeline.heartbeat`), so
`status` and the metrics show it live while it waits on a quiet queue, and dead once it stops
beating. A clean stop removes the beat.
"""

from __future__ import annotations

import logging

import anyio

from pipeline.heartbeat import beat, forget, heartbeat_ttl_s
from pipeline.redis_io import PipelineError, RedisUnavailable
from workers.runtime.state import WorkerState

__all__ = ["heartbeat_loop"]

log = logging.getLogger("aci.worker")


async def heartbeat_loop(state: WorkerState, done: anyio.Event) -> None:
    """Beat until `done`, then remove this worker's beats (bounded, shielded)."""
    ttl = heartbeat_ttl_s(state.settings)
    while not done.is_set():
        try:
            live = await beat(state.redis, state.parts, state.consumer, ttl)
        except RedisUnavailable:
            log.warning("heartbeat: redis unavailable")
        except PipelineError as exc:
            log.error("heartbeat: redis refused (%s)", exc)
        else:
            if state.metrics is not None:
                state.metrics.beat(live)
        with anyio.move_on_after(ttl / 3):
            await done.wait()
    with anyio.CancelScope(shield=True), anyio.move_on_after(2):
        try:
            await forget(state.redis, state.parts, state.consumer)
        except PipelineError:
            pass  # it ages out: dead after the TTL
