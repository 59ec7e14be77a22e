"""Benchmark of the web console's heavy pages on the local Redis: a 10,000-call session's
timeline (first and last page), its sessions list and search, its re-projection page, and a
64 KB Model Observation's invocation page. Prints the median server time and page size.

Run: .venv/bin/python bench/console_bench.py   (its own key prefix, removed afterwards)
     .venv/bin/python bench/console_bench.py --scale [--sizes 10000,1000000]: a session's page
     and `replay --session` beside millions of retained invocations, from the call index and
     by the SCAN fallback, and admission's cost with the index (bench/call_index_bench.py, on
     a private redis-server)
"""

from __future__ import annotations

import functools
import statistics
import time
import uuid
from typing import Any

import anyio
import httpx

from app.console import create_app
from contracts import Bounds, Request
from pipeline.admin import delete_prefix
from pipeline.client import EvidenceClient, ToolCall
from pipeline.redis_io import open_redis
from pipeline.settings import Settings
from workers.runtime import run_worker
from workers.sources.instant import InstantSource

URL = "redis://127.0.0.1:6379/0"
CALLS = 10_000
FILLER = 200_000


class _Large:
    async def fetch(self, request: Request) -> Any:
        hits = [
            {"documentId": f"d{i}", "source": "s.md", "title": "t", "breadcrumb": "b",
             "content": ("large observation " * 50)[:700]}
            for i in range(120)
        ]  # fmt: skip
        return {"contextPack": {"relevanceLevel": "high", "hits": hits}}

    async def aclose(self) -> None:
        return None


async def _record(redis: Any, settings: Settings) -> None:
    instant: Any = InstantSource()
    sources = {"lookup_knowledge": instant, "query_logs": instant, "query_mysql": instant}
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(run_worker, redis, settings, sources, stop=stop))
        async with EvidenceClient(redis, settings) as client:
            for start in range(0, CALLS, 2000):
                calls = [
                    ToolCall(tool="lookup_knowledge", tool_call_id=f"b{i}",
                             arguments={"query": f"q {i}"})
                    for i in range(start, start + 2000)
                ]  # fmt: skip
                await client.call_many("bench-10k", calls, timeout=120)
        stop.set()
    large = {"lookup_knowledge": _Large()}
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(run_worker, redis, settings, large, stop=stop))  # type: ignore[arg-type]
        async with EvidenceClient(redis, settings) as client:
            call = ToolCall(tool="lookup_knowledge", tool_call_id="big", arguments={"query": "x"})
            await client.call_many("bench-large", [call], timeout=30)
        stop.set()


async def _time(http: httpx.AsyncClient, path: str, n: int = 5) -> tuple[float, float, int]:
    """Median wall and CPU ms of a page (the CPU time of this process, console and client:
    steadier than the wall time on a loaded machine), and its size."""
    samples, cpu, size = [], [], 0
    for _ in range(n):
        started, cpu_started = time.perf_counter(), time.process_time()
        response = await http.get(path)
        samples.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
        response.raise_for_status()
        size = len(response.content)
    return statistics.median(samples) * 1000, statistics.median(cpu) * 1000, size


async def _filler(redis: Any, settings: Settings, n: int) -> None:
    """`n` keys of no session under the bench's prefix (deleted with it)."""
    tag = settings.keys().tag
    for start in range(0, n, 5000):
        pipe = redis.pipeline(transaction=False)
        for i in range(start, min(n, start + 5000)):
            pipe.set(f"{tag}:filler:{i}", b"x", ex=600)
        await pipe.execute()


async def main() -> None:
    bounds = Bounds(rag_max_evidence=100, observation_max_bytes=80_000)
    settings = Settings(prefix=f"b{uuid.uuid4().hex[:10]}", redis_url=URL, bounds=bounds)
    async with open_redis(URL) as redis:
        try:
            started = time.perf_counter()
            await _record(redis, settings)
            print(f"recorded {CALLS} calls + one 64 KB observation in "
                  f"{time.perf_counter() - started:.1f} s")  # fmt: skip
            app = create_app(settings, redis=redis)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:
                for label, path in (
                    ("sessions list", "/"),
                    ("search a call id", "/?q=b9999"),
                    ("search a part of an id", "/?q=zz-none"),
                    ("search observation text", "/?text=d119"),
                    ("timeline fragment (live)", "/fragments/timeline?id=bench-10k"),
                    ("fleet", "/fleet"),
                    ("timeline page 1 of 50", "/session?id=bench-10k"),
                    ("timeline page 50 of 50", "/session?id=bench-10k&page=50"),
                    ("re-projection page (100 calls)", "/replay?session=bench-10k"),
                    ("compare two sessions", "/replay?a=bench-10k&b=bench-large"),
                    ("64 KB observation", "/call?session=bench-large&id=big"),
                ):
                    ms, cpu_ms, size = await _time(http, path)
                    print(f"{label:32} {ms:8.1f} ms  {cpu_ms:8.1f} ms CPU  {size / 1024:8.1f} KiB")
                # A session's calls are listed by SCAN: its cost grows with the whole keyspace.
                await _filler(redis, settings, FILLER)
                for label, path in (
                    (f"timeline, {FILLER // 1000}k other keys", "/session?id=bench-large"),
                    (f"search an id, {FILLER // 1000}k other keys", "/?q=nothing-such"),
                ):
                    ms, cpu_ms, size = await _time(http, path)
                    print(f"{label:32} {ms:8.1f} ms  {cpu_ms:8.1f} ms CPU  {size / 1024:8.1f} KiB")
        finally:
            await delete_prefix(redis, settings.keys())


if __name__ == "__main__":
    import sys

    if "--scale" in sys.argv:
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).parent))
        import call_index_bench

        sizes = sys.argv[sys.argv.index("--sizes") + 1] if "--sizes" in sys.argv else None
        call_index_bench.main([int(n) for n in (sizes or "10000,1000000").split(",")], 10)
    else:
        anyio.run(main)
