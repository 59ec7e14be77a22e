"""The session call index at scale (issue 35), on a private redis-server (never the shared one):
a 50-call session's console page and `replay --session` listing beside N other retained
invocations, read from the index (`{tag}:calls-ready` set) and by the SCAN fallback (a
partition recorded before the index, until `aci-evidence reindex`); and admission's cost with
the index against the script without it (alternating A/B rounds, same Redis, same requests).

The other invocations are written directly (a call record, a result hash and a raw answer
each: what one retained invocation leaves), not through the pipeline: only their number
matters to a listing. The 50-call session goes through the real pipeline.

Run: .venv/bin/python bench/call_index_bench.py [--sizes 10000,1000000] [--ab-rounds 10]
(part of `bench/console_bench.py --scale`)
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import socket
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx

from app.console import create_app
from pipeline.client import EvidenceClient, ToolCall
from pipeline.redis_io import open_redis
from pipeline.settings import Settings
from workers.replay import Selection, load_redis
from workers.runtime import run_worker
from workers.runtime.admission import admit_round
from workers.runtime.state import WorkerState
from workers.sources.instant import InstantSource

SESSION = "bench-50"
_ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_port(port: int, limit: float = 10.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"no redis-server on port {port}")


def _old_admit() -> str:
    """admit.lua before the index (git: the revert of the first index, 3147817), reading
    today's 8 arguments per call (the cancel flag came later; the old script ignores it)."""
    out = subprocess.run(
        ["git", "show", "3147817:pipeline/lua/admit.lua"],
        cwd=_ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout.replace("7 + 7 * c", "7 + 8 * c").replace("7 + 7 * n", "7 + 8 * n")


async def _fill(redis: Any, settings: Settings, start: int, n: int) -> None:
    """`n` retained invocations of other sessions (100 calls each): call, result, raw."""
    keys = settings.keys()
    now = int(time.time() * 1000)
    for base in range(start, start + n, 2000):
        pipe = redis.pipeline(transaction=False)
        for i in range(base, min(start + n, base + 2000)):
            session, call = f"other-{i // 100}", f"c{i}"
            pipe.hset(keys.call(session, call), mapping={"st": "PROJECTING", "t0": now,
                      "tool": "lookup_knowledge", "eid": f"{now}-{i}", "sk": "x"})  # fmt: skip
            pipe.hset(keys.result(session, call), mapping={"st": "READY", "ev": "NO_EVIDENCE",
                      "t1": now, "sk": "x"})  # fmt: skip
            pipe.set(keys.raw(session, call), b"{}")
        await pipe.execute()


async def _record_session(redis: Any, settings: Settings) -> None:
    instant: Any = InstantSource()
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        sources = {"lookup_knowledge": instant}
        tg.start_soon(functools.partial(run_worker, redis, settings, sources, stop=stop))
        async with EvidenceClient(redis, settings) as client:
            calls = [
                ToolCall(tool="lookup_knowledge", tool_call_id=f"s{i}", arguments={"query": str(i)})
                for i in range(50)
            ]
            await client.call_many(SESSION, calls, timeout=120)
        stop.set()


async def _median_ms(run: Any, n: int = 5) -> float:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        await run()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


async def _listings(redis: Any, settings: Settings, label: str) -> None:
    app = create_app(settings, redis=redis)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:

        async def page() -> None:
            (await http.get(f"/session?id={SESSION}")).raise_for_status()

        async def replay() -> None:
            found = await load_redis(redis, settings, Selection(session=SESSION))
            assert len(found) == 50, len(found)

        ready = settings.keys().parts[0].calls_ready
        for mode in ("index", "SCAN fallback"):
            if mode == "SCAN fallback":
                await redis.delete(ready)
            else:
                await redis.set(ready, 1)
            page_ms, replay_ms = await _median_ms(page), await _median_ms(replay)
            print(
                f"{label:>10} other invocations  {mode:13}  session page {page_ms:8.1f} ms"
                f"   replay --session listing+read {replay_ms:8.1f} ms"
            )
        await redis.set(ready, 1)


async def _admission_ab(redis: Any, settings: Settings, rounds: int, batch: int) -> None:
    """Alternating rounds: `batch` requests of new calls (10 sessions) admitted by the script
    with the index (B) and without it (A); median ms per round and the ratio B/A."""
    state = WorkerState(redis, settings, {}, concurrency=1, consumer="bench-admission")
    from pipeline.lane import Lane

    lane = Lane(redis)
    old = _old_admit()
    shas = {"A": hashlib.sha1(old.encode()).hexdigest(), "B": state.scripts.admit_sha}
    await redis.script_load(old)
    await state.scripts.load()
    times: dict[str, list[float]] = {"A": [], "B": []}
    try:
        async with EvidenceClient(redis, settings) as client:
            for r in range(rounds):
                for variant in ("A", "B") if r % 2 == 0 else ("B", "A"):
                    tag = f"{variant}{r}"
                    calls = [
                        ToolCall(tool="lookup_knowledge", tool_call_id=f"{tag}-{i}",
                                 arguments={"query": f"q {tag} {i}"})
                        for i in range(batch)
                    ]  # fmt: skip
                    for s in range(10):
                        await client.submit_many(f"ab-{tag}-{s}", calls[s::10])
                    state.scripts.admit_sha = shas[variant]
                    started, handled = time.perf_counter(), 0
                    while handled < batch:
                        handled += await admit_round(state, lane, state.parts)
                    times[variant].append((time.perf_counter() - started) * 1000)
    finally:
        state.scripts.admit_sha = shas["B"]
        await lane.aclose()
    a, b = statistics.median(times["A"]), statistics.median(times["B"])
    print(
        f"admission of {batch} new calls (10 sessions), {rounds} alternating rounds each: "
        f"without index {a:.1f} ms, with index {b:.1f} ms, ratio {b / a:.3f}"
    )


async def measure(url: str, sizes: list[int], rounds: int) -> None:
    """Every figure, on the Redis at `url` (a private one: it is filled with millions of keys)."""
    settings = Settings(prefix=f"b{uuid.uuid4().hex[:8]}", redis_url=url)
    async with open_redis(url) as redis:
        await _record_session(redis, settings)
        await _admission_ab(redis, settings, rounds, 500)
        filled = 0
        for size in sizes:
            started = time.perf_counter()
            await _fill(redis, settings, filled, size - filled)
            filled = size
            took = time.perf_counter() - started
            info = await redis.info("memory")
            print(f"filled to {size} other invocations ({await redis.dbsize()} keys, "
                  f"{info['used_memory_human']}) in {took:.0f} s")  # fmt: skip
            await _listings(redis, settings, f"{size:,}")


def main(sizes: list[int], rounds: int) -> None:
    """Start a private redis-server, measure, stop it."""
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="aci-index-bench-") as folder:
        proc = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", folder],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            _wait_port(port)
            anyio.run(measure, f"redis://127.0.0.1:{port}/0", sizes, rounds)
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,1000000")
    parser.add_argument("--ab-rounds", type=int, default=10)
    args = parser.parse_args()
    main([int(s) for s in args.sizes.split(",")], args.ab_rounds)
