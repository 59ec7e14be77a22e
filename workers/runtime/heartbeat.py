"""The heartbeat of a worker: from its start until its last work is finished, every third of
the heartbeat TTL it records a beat in each partition it reads (`pipeline.heartbeat`), so
`status` and the metrics show it live while it waits on a quiet queue, and dead once it stops
beating. A clean stop removes the beat.

It also says a Redis outage in the log once each way, for the whole worker: when a beat first
fails to reach Redis, and when one reaches it again (with how long it was away); the other
loops retry meanwhile without saying it again (the janitor at DEBUG). A beat Redis refuses
(OOM on a full Redis) is said the same way, once per refusal code and once when accepted.
"""

from __future__ import annotations

import logging
import time

import anyio

from pipeline.admit_here import shared_settings
from pipeline.heartbeat import beat, forget, heartbeat_ttl_s
from pipeline.keys import Keys
from pipeline.redis_io import PipelineError, RedisUnavailable
from workers.runtime.state import WorkerState
from workers.sources.identity import configuration_digest

__all__ = ["heartbeat_loop"]

log = logging.getLogger("aci.worker")
_AWAY = (
    "redis unavailable: this worker waits and retries (reads, admission, takeovers, finishes "
    "and beats); said again when it answers"
)
_REFUSED = "status shows this worker dead until a beat is accepted"
_ACCEPTED = "heartbeat: redis accepts beats again"


async def heartbeat_loop(state: WorkerState, done: anyio.Event) -> None:
    """Beat until `done`, then remove this worker's beats (bounded, shielded)."""
    ttl = heartbeat_ttl_s(state.settings)
    shared = shared_settings(state.settings)  # what a client admitting its own calls checks
    base = Keys(state.settings.prefix).parts[0]  # ... under the prefix's own tag too
    config = configuration_digest(state.sources)  # status compares the live workers'
    trouble: str | None = None  # said last: "unavailable", or the code Redis refused a beat with
    since = 0.0
    while not done.is_set():
        try:
            live = await beat(
                state.redis, state.parts, state.consumer, ttl, shared, base, config=config
            )
        except PipelineError as exc:
            now = "unavailable" if isinstance(exc, RedisUnavailable) else str(exc)
            if now != trouble:
                trouble, since = now, time.monotonic()
                if isinstance(exc, RedisUnavailable):
                    log.warning(_AWAY)
                else:  # e.g. OOM: a full Redis refuses the beat's ZADD
                    log.error("heartbeat: redis refused (%s): %s", now, _REFUSED)
        else:
            if trouble is not None:
                what = "redis answers again" if trouble == "unavailable" else _ACCEPTED
                log.warning("%s after %.1f s", what, time.monotonic() - since)
                trouble = None
            if state.metrics is not None:
                state.metrics.beat(live)
        with anyio.move_on_after(ttl / 3):
            await done.wait()
    with anyio.CancelScope(shield=True), anyio.move_on_after(2):
        try:
            await forget(state.redis, state.parts, state.consumer, config)
        except PipelineError:
            pass  # it ages out: dead after the TTL
