"""The worker process: an admission loop, a consumer group reader, a takeover janitor and a
batched finisher, each a loop of its own module, composed in one anyio task group.

- admit (`admission`): requests submitters appended become call records and invocations
  (validated, idempotent, conflicts refused), in batches, never waiting for a slot;
- read (`reader`): `XREADGROUP … BLOCK` for as many entries as there are free slots
  (`--concurrency`, `slots`);
- work (`work`): each entry runs the stages (`workers.stage`) in its own task;
- finish (`finisher`): outcomes are finished in batches — one finish script per partition of a
  batch, each call in it atomic and idempotent (state, result, raw record, both views and the
  ack, once);
- heartbeat (`heartbeat`): a beat per partition every few seconds, so `status` shows an idle
  worker live (`pipeline.heartbeat`);
- janitor (`janitor`): `XAUTOCLAIM` takes over entries idle past the visibility timeout; an
  entry delivered more than `max_attempts` times finishes as ERROR/GAVE_UP; streams are trimmed
  by the retention policy, never past an unfinished entry.

`stop` (set on SIGTERM/SIGINT by `workers.runtime.bootstrap`): no new reads, in-flight work
finishes (or is left pending for takeover), nothing is lost.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import anyio

from pipeline.batcher import CommandBatcher
from pipeline.consumer import wait_for_groups
from pipeline.redis_io import Redis
from pipeline.settings import Settings
from workers.runtime.admission import admission_loop
from workers.runtime.finisher import finish_loop
from workers.runtime.heartbeat import heartbeat_loop
from workers.runtime.janitor import janitor_loop
from workers.runtime.reader import read_loop
from workers.runtime.state import WorkerState
from workers.sources import Source, describe_sources

if TYPE_CHECKING:
    from workers.metrics import WorkerMetrics

__all__ = ["consumer_name", "run_worker"]

log = logging.getLogger("aci.worker")
# Shown at the default log level (`workers.logging_setup`): what started, and with what.
announce = logging.getLogger("aci.announce")


def consumer_name() -> str:
    """A consumer name unique to this process: host, pid and a random suffix."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


async def run_worker(
    redis: Redis,
    settings: Settings,
    sources: Mapping[str, Source],
    *,
    concurrency: int = 16,
    consumer: str | None = None,
    stop: anyio.Event | None = None,
    metrics: WorkerMetrics | None = None,
    partitions: Sequence[int] | None = None,
) -> None:
    """Run one worker until `stop` is set; returns after in-flight work is finished.
    `metrics` (optional) counts what this worker does (see `workers.metrics`); `partitions`
    (optional) the partition indexes it reads (default: every partition)."""
    stop = stop or anyio.Event()
    if partitions is not None and (
        not partitions or not all(0 <= i < settings.partitions for i in partitions)
    ):
        raise ValueError(f"partitions are 0 to {settings.partitions - 1}, at least one")
    state = WorkerState(
        redis,
        settings,
        sources,
        concurrency=concurrency,
        consumer=consumer or consumer_name(),
        metrics=metrics,
        partitions=partitions,
    )
    await wait_for_groups(redis, state.parts, stop)
    if stop.is_set():  # stopped while Redis did not answer yet: it never started
        announce.info("worker %s stopped before Redis answered", state.consumer)
        return
    announce.info(
        "worker %s started: partitions %s of %d, concurrency %d, sources %s",
        state.consumer,
        ",".join(str(p.index) for p in state.parts),
        settings.partitions,
        concurrency,
        describe_sources(sources),
    )
    beating = anyio.Event()
    async with anyio.create_task_group() as outer:
        state.marks = marks = CommandBatcher(redis, outer)  # issue 32: taken marks, polls
        outer.start_soon(heartbeat_loop, state, beating)
        outer.start_soon(finish_loop, state)
        # Work (read or taken over) runs in `work`: once the readers and the janitor have
        # stopped and every task in it is done, nothing more is queued for the finisher.
        async with anyio.create_task_group() as work:
            work.start_soon(admission_loop, state, stop)
            work.start_soon(janitor_loop, state, stop, work)
            await read_loop(state, stop, work)
        state.finishing.close()
        beating.set()
    await marks.aclose()
    announce.info("worker %s stopped", state.consumer)
