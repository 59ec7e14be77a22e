"""A worker process for tests that kill or signal it: `python -m tests.pipeline.slow_worker
URL PREFIX DELAY_S [VISIBILITY_S]`. Its knowledge source sleeps DELAY_S per call."""

from __future__ import annotations

import signal
import sys

import anyio

from pipeline.redis_io import open_redis
from pipeline.settings import Settings
from tests.pipeline.sources import InstantSource
from workers.runtime import run_worker


async def main(url: str, prefix: str, delay: float, visibility: float) -> None:
    settings = Settings(prefix=prefix, visibility_timeout_s=visibility, deadline_s=visibility / 2)
    stop = anyio.Event()

    async def on_signal() -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                stop.set()
                return

    async with open_redis(url) as redis, anyio.create_task_group() as tg:
        tg.start_soon(on_signal)
        print("ready", flush=True)
        await run_worker(
            redis, settings, {"lookup_knowledge": InstantSource(delay)}, concurrency=8, stop=stop
        )
        tg.cancel_scope.cancel()


if __name__ == "__main__":
    visibility = float(sys.argv[4]) if len(sys.argv) > 4 else 2.0
    anyio.run(main, sys.argv[1], sys.argv[2], float(sys.argv[3]), visibility)
