"""`aci-evidence bench pipeline`: the pipeline's throughput and latency beside the local limit.

In one run on one Redis:
1. raw: the bare redis-py stream round trip (XADD → XREADGROUP → XADD reply → XACK), batched,
   16 concurrent submitters — the local limit;
2. pipeline: submit → READY model observation seen by the client, with the instant source and
   with the real sources, 1 and 2 worker processes: invocations/s, and p50/p99 latency at a
   paced 1,000/s for `latency_seconds` (`p99_ms` is the instant source with 1 worker; `_2w`,
   `_real` and `_real_2w` name the others), with the share of CPU time the host stole from
   this virtual machine meanwhile (`steal_pct` and the same suffixes; Linux only);
   and one worker process alone draining a backlog (`drain_1w_per_s`);
3. the agent's pattern (`app.bench_agent`, with the instant source and 1 worker): one call,
   and a burst of 8 parallel calls, after a pause of `agent_pause` seconds, p50/p90, beside
   the raw redis-py round trip of one entry after the same pause (`agent_*_ms`);
4. peers (with the optional `bench` extra installed): the same no-op round trip through
   dramatiq and taskiq-redis.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any, Final

import anyio

from app.bench_agent import bench_agent
from app.fleet import worker_processes
from pipeline.admin import delete_prefix
from pipeline.client import EvidenceClient, ToolCall
from pipeline.embedded import embedded_redis
from pipeline.redis_io import open_redis
from pipeline.settings import Settings

__all__ = ["run_bench"]

SUBMITTERS = 16
BATCH = 32


async def bench_raw(redis: Any, total: int) -> float:
    """Invocations/s of the bare stream round trip."""
    tag = uuid.uuid4().hex[:8]
    requests, replies, group = f"bench:{tag}:req", f"bench:{tag}:rep", "g"
    await redis.xgroup_create(requests, group, id="0", mkstream=True)
    rounds = max(1, total // (SUBMITTERS * BATCH))
    total = rounds * SUBMITTERS * BATCH
    done = anyio.Event()
    seen = 0

    async def consumer() -> None:
        while not done.is_set():
            reply = await redis.xreadgroup(group, "c", {requests: ">"}, count=512, block=100)
            for _s, entries in reply or []:
                async with redis.pipeline(transaction=False) as pipe:
                    for _eid, fields in entries:
                        pipe.xadd(replies, {"id": fields[b"id"], "d": fields[b"d"]})
                    pipe.xack(requests, group, *[eid for eid, _ in entries])
                    await pipe.execute()

    async def reply_reader() -> None:
        nonlocal seen
        cursor = "0-0"
        while seen < total:
            reply = await redis.xread({replies: cursor}, count=1024, block=100)
            for _s, entries in reply or []:
                cursor = entries[-1][0]
                seen += len(entries)
        done.set()

    async def submitter() -> None:
        payload = b'{"query":"pool exhausted"}'
        for _ in range(rounds):
            async with redis.pipeline(transaction=False) as pipe:
                for i in range(BATCH):
                    pipe.xadd(requests, {"id": str(i), "d": payload})
                await pipe.execute()

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(consumer)
        tg.start_soon(reply_reader)
        for _ in range(SUBMITTERS):
            tg.start_soon(submitter)
    elapsed = time.perf_counter() - start
    await redis.delete(requests, replies)
    return seen / elapsed


@contextlib.contextmanager
def _bench_workers(url: str, prefix: str, count: int, instant: bool) -> Iterator[None]:
    env = dict(os.environ, ACI_REDIS_URL=url, ACI_PREFIX=prefix)
    if instant:
        env["ACI_INSTANT_SOURCES"] = "1"
    with worker_processes(env, count, concurrency=256):
        yield


def _arguments(tool: str, n: int) -> dict[str, Any]:
    arguments: dict[str, dict[str, Any]] = {
        "lookup_knowledge": {"query": f"connection pool exhausted {n}"},
        "query_logs": {"topic": "APPLICATION", "query": "timeout", "lookback_minutes": 30},
        "query_mysql": {"data_source": "shop", "sql": "SELECT 1"},
    }
    return arguments[tool]


def _calls(round_no: int, submitter: int, tool: str) -> list[ToolCall]:
    args = _arguments(tool, submitter)
    return [
        ToolCall(tool=tool, tool_call_id=f"b{submitter}_{round_no}_{i}", arguments=args)
        for i in range(BATCH)
    ]


async def bench_pipeline(client: EvidenceClient, total: int, tool: str) -> float:
    """Invocations/s end to end: 16 submitters, each submitting a batch and awaiting it."""
    session = f"bench-{uuid.uuid4().hex[:8]}"
    finished = 0

    rounds = max(1, total // SUBMITTERS // BATCH)  # a small total still measures something

    async def submitter(k: int) -> None:
        nonlocal finished
        for r in range(rounds):
            results = await client.call_many(session, _calls(r, k, tool), timeout=60)
            finished += sum(1 for x in results if x is not None)

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for k in range(SUBMITTERS):
            tg.start_soon(submitter, k)
    return finished / (time.perf_counter() - start)


async def bench_drain(client: EvidenceClient, url: str, total: int) -> float:
    """Invocations/s of one worker process alone on a backlog (submitted before it starts)."""
    session = f"drain-{uuid.uuid4().hex[:8]}"
    calls = [
        ToolCall(tool="lookup_knowledge", tool_call_id=f"d{i}", arguments={"query": f"pool {i}"})
        for i in range(total)
    ]
    for i in range(0, total, 256):
        await client.submit_many(session, calls[i : i + 256])
    model = client.keys.model(session)
    with _bench_workers(url, client.settings.prefix, 1, instant=True):
        started: float | None = None
        first = 0
        while True:
            seen = await client.redis.xlen(model)
            if started is None and seen:
                started, first = time.perf_counter(), seen
            if seen >= total:
                break
            await anyio.sleep(0.01)
    assert started is not None
    return (total - first) / (time.perf_counter() - started)


def _cpu_ticks() -> tuple[int, int] | None:
    """(all, stolen) CPU ticks of this machine since boot, from /proc/stat (None elsewhere).
    Stolen ticks are time a virtual CPU was ready to run but the host ran something else."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(x) for x in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal [guest guest_nice, already in user/nice]
    return sum(fields[:8]), (fields[7] if len(fields) > 7 else 0)


def steal_pct(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """Share of the machine's CPU time (idle included) stolen by the host between two
    `_cpu_ticks()`."""
    if before is None or after is None or after[0] <= before[0]:
        return None
    return round(100 * (after[1] - before[1]) / (after[0] - before[0]), 1)


async def bench_latency(
    client: EvidenceClient, rate: float, seconds: float, tool: str = "lookup_knowledge"
) -> tuple[float, float]:
    """p50/p99 ms from submit to the final model observation, at a paced offered rate."""
    session = f"lat-{uuid.uuid4().hex[:8]}"
    latencies: list[float] = []

    async def one(i: int) -> None:
        call = ToolCall(tool=tool, tool_call_id=f"l{i}", arguments=_arguments(tool, i))
        t0 = time.perf_counter()
        await client.call(session, call, timeout=30)
        # A call still pending after 30 s counts as 30 s: the tail is not flattered by it.
        latencies.append((time.perf_counter() - t0) * 1000)

    count = int(rate * seconds)
    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(count):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await anyio.sleep(delay)
            tg.start_soon(one, i)
    latencies.sort()
    if not latencies:
        return float("nan"), float("nan")
    return statistics.median(latencies), latencies[math.ceil(len(latencies) * 0.99) - 1]


_LATENCY_SUFFIX: Final = {"instant_1w": "", "instant_2w": "_2w", "real_1w": "_real",
                          "real_2w": "_real_2w"}  # fmt: skip


@contextlib.asynccontextmanager
async def _redis_url() -> AsyncIterator[str]:
    url = os.environ.get("ACI_REDIS_URL")
    if url:
        yield url
        return
    async with embedded_redis() as embedded:
        yield embedded


async def run_bench(
    total: int = 20_000,
    as_json: bool = False,
    peers: bool = True,
    agent_rounds: int = 10,
    agent_pause: float = 3.0,
    latency_seconds: float = 3.0,
) -> int:
    """Run every measurement and print a table (or one JSON object). `agent_rounds` of the
    agent's pattern (0: none), each after `agent_pause` s of quiet, three times; each latency
    figure from `latency_seconds` of calls paced at 1,000/s."""
    figures: dict[str, Any] = {}
    async with _redis_url() as url, open_redis(url, max_connections=256) as redis:
        figures["raw_per_s"] = round(await bench_raw(redis, total))
        for workers, instant, name in [(1, True, "instant_1w"), (2, True, "instant_2w"),
                                       (1, False, "real_1w"), (2, False, "real_2w")]:  # fmt: skip
            prefix = f"bench{uuid.uuid4().hex[:6]}"
            settings = Settings(redis_url=url, prefix=prefix)
            with _bench_workers(url, prefix, workers, instant):
                async with EvidenceClient(redis, settings) as client:
                    await anyio.sleep(1.0)  # workers start
                    n = total if instant else total // 4
                    tool = "lookup_knowledge" if instant else "query_logs"
                    figures[f"{name}_per_s"] = round(await bench_pipeline(client, n, tool))
                    # Latency at a paced 1,000/s, named p50{suffix}_ms and p99{suffix}_ms.
                    suffix = _LATENCY_SUFFIX[name]
                    before = _cpu_ticks()
                    p50, p99 = await bench_latency(client, 1000, latency_seconds, tool)
                    figures[f"p50{suffix}_ms"] = round(p50, 2)
                    figures[f"p99{suffix}_ms"] = round(p99, 2)
                    # A virtual machine whose host is busy shows it here: p99 then measures
                    # the host, not the pipeline.
                    stolen = steal_pct(before, _cpu_ticks())
                    if stolen is not None:
                        figures[f"steal{suffix}_pct"] = stolen
                    if name == "instant_1w" and agent_rounds > 0:
                        figures.update(
                            await bench_agent(client, redis, rounds=agent_rounds, pause=agent_pause)
                        )
            if name == "instant_1w":
                async with EvidenceClient(redis, settings) as client:
                    figures["drain_1w_per_s"] = round(await bench_drain(client, url, total))
            await delete_prefix(redis, settings.keys())
        if peers:
            from app.bench_peers import bench_peers

            figures.update(await bench_peers(min(total, 5000), url))
    figures["pipeline_per_s"] = figures["instant_1w_per_s"]
    figures["ratio_to_raw"] = round(figures["pipeline_per_s"] / figures["raw_per_s"], 3)
    if peers:
        fastest = max(
            (v for k, v in figures.items() if k.startswith("peer_") and isinstance(v, int)),
            default=0,
        )
        if fastest:
            figures["ratio_to_fastest_peer"] = round(figures["pipeline_per_s"] / fastest, 2)
    if as_json:
        print(json.dumps(figures))
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title="aci-evidence bench pipeline")
        table.add_column("figure")
        table.add_column("value", justify="right")
        for key, value in figures.items():
            table.add_row(key, str(value))
        Console().print(table)
    return 0
