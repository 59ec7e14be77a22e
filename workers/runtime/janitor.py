"""The janitor of a worker: every quarter of the visibility timeout, `XAUTOCLAIM` takes over
entries other workers left idle past it (a crash, a lost connection), each started as work
with its delivery count; every 30 s the streams are trimmed by the retention policy, never
past an unfinished entry (`pipeline.trim`).

An entry delivered more than `max_attempts` times is not run again: the work finishes it as
ERROR/GAVE_UP. Partitions are visited in turn, so one failing spares the others; a lost group
is created again.
"""

from __future__ import annotations

import logging
import time

import anyio
from anyio.abc import TaskGroup

from pipeline.consumer import claim_idle, delivery_counts, is_group_lost, recreate_group
from pipeline.keys import Partition
from pipeline.redis_io import RedisProtocolError, RedisUnavailable
from pipeline.trim import trim_streams
from workers.logging_setup import invocation_context
from workers.runtime.state import WorkerState
from workers.runtime.work import process

__all__ = ["janitor_loop"]

log = logging.getLogger("aci.worker")


async def janitor_loop(state: WorkerState, stop: anyio.Event, work: TaskGroup) -> None:
    """Take over and trim until `stop`, starting taken-over entries in `work`."""
    interval = max(0.2, state.settings.visibility_timeout_s / 4)
    last_trim = 0.0
    while not stop.is_set():
        with anyio.move_on_after(interval):
            await stop.wait()
        if stop.is_set():
            return
        trim = time.monotonic() - last_trim > 30
        for part in state.parts:  # each partition in turn: one failing spares the others
            if stop.is_set():
                return
            try:
                await _take_over(state, part, stop, work)
                if trim:
                    await trim_streams(state.redis, part, state.settings)
            except RedisUnavailable:  # the heartbeat says the outage, once each way
                log.debug("janitor: redis unavailable (partition %d)", part.index)
            except RedisProtocolError as exc:
                if is_group_lost(exc):
                    await recreate_group(state.redis, part)
                else:
                    log.error("janitor: redis refused (%s)", exc)
        if trim:
            last_trim = time.monotonic()


async def _take_over(
    state: WorkerState, part: Partition, stop: anyio.Event, work: TaskGroup
) -> None:
    min_idle = int(state.settings.visibility_timeout_s * 1000)
    start = "0-0"
    while not stop.is_set():
        start, claimed = await claim_idle(
            state.redis, part, state.consumer, min_idle, start, count=64
        )
        if claimed:
            counts = await delivery_counts(state.redis, part, [eid for eid, _ in claimed])
            for eid, fields in claimed:
                await state.slots.take(1)
                with invocation_context(entry_id=eid):
                    log.warning("took over %s (delivery %d)", eid, counts.get(eid, 2))
                if state.metrics is not None:
                    state.metrics.takeovers.inc()
                work.start_soon(process, state, part, eid, fields, counts.get(eid, 2))
        if start == "0-0":
            return
