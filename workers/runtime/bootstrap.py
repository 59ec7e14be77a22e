"""The bootstrap of a worker process, in one place for every way of starting one
(`aci-evidence worker`, `python -m chaos.worker`): open the sources and Redis, freeze what is
loaded out of the collector's way, run the worker until SIGTERM or SIGINT, then drain and close.

A signal sets the worker's `stop`: no new reads, in-flight work finishes (or is left pending
for takeover), nothing is lost; the sources and the connections are closed after that.
"""

from __future__ import annotations

import gc
import logging
import signal
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import anyio

from pipeline.redis_io import open_redis
from pipeline.settings import Settings
from workers.runtime.worker import run_worker
from workers.sources import Source, open_sources, wrap_sources

if TYPE_CHECKING:
    from workers.metrics import WorkerMetrics

__all__ = ["serve_worker"]

log = logging.getLogger("aci.worker")


async def serve_worker(
    settings: Settings,
    redis_url: str,
    *,
    concurrency: int = 16,
    metrics: WorkerMetrics | None = None,
    partitions: Sequence[int] | None = None,
    warm: bool = True,
    wrap: Callable[[Source], Source] | None = None,
) -> None:
    """Serve one worker on `redis_url` until SIGTERM or SIGINT, then drain and close.
    `warm`: warm the sources up before the first read (`open_sources`); `wrap`: put every
    source behind a wrapper (`wrap_sources`, the fault-injection hook). The other arguments
    are `run_worker`'s."""
    stop = anyio.Event()
    async with (
        open_sources(warm=warm) as opened,
        open_redis(redis_url, cluster=settings.redis_cluster) as redis,
    ):
        sources = opened if wrap is None else wrap_sources(opened, wrap)
        # What is loaded by now (modules, indexes, templates) lives as long as the worker:
        # keep it out of the collector's full passes, which otherwise pause the loop.
        gc.collect()
        gc.freeze()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_stop_on_signal, stop)
            await run_worker(
                redis,
                settings,
                sources,
                concurrency=concurrency,
                stop=stop,
                metrics=metrics,
                partitions=partitions,
            )
            tg.cancel_scope.cancel()


async def _stop_on_signal(stop: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            log.info("stopping: draining in-flight work")
            stop.set()
            return
