"""No-op round trips through peer task queues, for `aci-evidence bench pipeline`.

Each peer gets the same job: the producer enqueues `total` no-op jobs carrying a small payload,
the peer's own worker (in this process) executes them and bumps an in-process counter, and the
clock stops when the last one has run. Figures are jobs/s. Every peer runs under its own unique
key names, deletes every key it created, and gives up after `TIMEOUT_S`.

Needs the optional `bench` extra (dramatiq, taskiq-redis); a peer that is not installed is
reported as such.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import redis
import redis.asyncio as aioredis

__all__ = ["bench_peers"]

TIMEOUT_S = 60.0
NOT_INSTALLED = "not installed (pip install -e '.[bench]')"
PAYLOAD: dict[str, str] = {"query": "pool exhausted"}
TIMEOUTS: dict[str, Any] = {"socket_timeout": 10, "socket_connect_timeout": 10}
SENDER_THREADS = 4  # dramatiq: more producer threads only fight the workers for the GIL
SENDER_TASKS = 16  # taskiq: concurrent kiq() coroutines, as in the raw and pipeline benches


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (i < total % parts) for i in range(parts)]


def _failure(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"failed: {type(exc).__name__}"


def _dramatiq(total: int, url: str, deadline: float) -> int:
    """Jobs/s through dramatiq's RedisBroker and a threaded Worker (runs in a worker thread)."""
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker

    namespace = f"peerbench-{uuid.uuid4().hex[:10]}-dramatiq"
    pool = redis.ConnectionPool.from_url(url, **TIMEOUTS)
    broker = RedisBroker(connection_pool=pool, namespace=namespace)  # type: ignore[no-untyped-call, unused-ignore]
    lock, done = threading.Lock(), threading.Event()
    count = 0

    def noop(payload: dict[str, str]) -> None:
        nonlocal count
        with lock:
            count += 1
            if count >= total:
                done.set()

    actor = dramatiq.actor(broker=broker, actor_name="noop", queue_name="bench")(noop)
    worker = dramatiq.Worker(broker, worker_threads=8, worker_timeout=100)
    worker.queue_prefetch = 64
    try:
        worker.start()

        def produce(n: int) -> None:
            for _ in range(n):
                if done.is_set() or time.monotonic() > deadline:
                    return
                actor.send(PAYLOAD)

        start = time.perf_counter()
        with ThreadPoolExecutor(SENDER_THREADS) as producers:
            for future in [producers.submit(produce, n) for n in _split(total, SENDER_THREADS)]:
                future.result()
        if not done.wait(max(0.0, deadline - time.monotonic())):
            raise TimeoutError(f"dramatiq ran {count}/{total} jobs")
        return round(total / (time.perf_counter() - start))
    finally:
        worker.stop(timeout=5000)
        broker.close()
        with contextlib.suppress(redis.RedisError):  # keep the original failure, if any
            client = redis.Redis(connection_pool=pool)
            keys = list(client.scan_iter(match=f"{namespace}:*", count=1000))
            if keys:
                client.delete(*keys)
        pool.disconnect()


async def _taskiq_redis(total: int, url: str) -> int:
    """Jobs/s through taskiq-redis's RedisStreamBroker and a taskiq Receiver (asyncio only)."""
    from taskiq.receiver import Receiver
    from taskiq_redis import RedisStreamBroker

    tag = uuid.uuid4().hex[:10]
    stream, group = f"peerbench:{tag}:taskiq", f"peerbench-{tag}"
    broker = RedisStreamBroker(
        url,
        queue_name=stream,
        consumer_group_name=group,
        xread_block=100,
        xread_count=100,
        **TIMEOUTS,
    )
    done, finish = asyncio.Event(), asyncio.Event()
    count = 0

    async def noop(payload: dict[str, str]) -> None:
        nonlocal count
        count += 1
        if count >= total:
            done.set()

    task = broker.task(task_name=f"peerbench_noop_{tag}")(noop)
    receiver = Receiver(broker, max_async_tasks=200, max_prefetch=100, run_startup=False)
    try:
        await broker.startup()

        async def produce(n: int) -> None:
            for _ in range(n):
                await task.kiq(PAYLOAD)

        async with anyio.create_task_group() as tg:
            tg.start_soon(receiver.listen, finish)
            try:
                start = time.perf_counter()
                with anyio.fail_after(TIMEOUT_S):
                    async with anyio.create_task_group() as producers:
                        for n in _split(total, SENDER_TASKS):
                            producers.start_soon(produce, n)
                    await done.wait()
                elapsed = time.perf_counter() - start
            finally:
                finish.set()
                tg.cancel_scope.deadline = anyio.current_time() + 5
        return round(total / elapsed)
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(10):
            with contextlib.suppress(Exception):  # keep the original failure, if any
                await broker.shutdown()
            with contextlib.suppress(Exception):
                async with aioredis.Redis.from_url(url, **TIMEOUTS) as client:
                    await client.delete(stream, f"autoclaim:{group}:{stream}")


async def bench_peers(total: int, url: str) -> dict[str, Any]:
    """Jobs/s of a no-op round trip through each installed peer, on the Redis at `url`."""
    out: dict[str, Any] = {}
    try:
        import dramatiq  # noqa: F401
    except ImportError:
        out["peer_dramatiq"] = NOT_INSTALLED
    else:
        deadline = time.monotonic() + TIMEOUT_S
        try:
            with anyio.fail_after(TIMEOUT_S + 15):  # + worker stop and cleanup
                out["peer_dramatiq"] = await anyio.to_thread.run_sync(
                    _dramatiq, total, url, deadline, abandon_on_cancel=True
                )
        except Exception as exc:
            out["peer_dramatiq"] = _failure(exc)
    try:
        import taskiq_redis  # noqa: F401
    except ImportError:
        out["peer_taskiq_redis"] = NOT_INSTALLED
    else:
        try:
            with anyio.fail_after(TIMEOUT_S + 20):
                out["peer_taskiq_redis"] = await _taskiq_redis(total, url)
        except Exception as exc:
            out["peer_taskiq_redis"] = _failure(exc)
    return out
