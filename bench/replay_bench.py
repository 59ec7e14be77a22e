"""Replay throughput: re-projection of 10,000 recorded invocations (goal >= 5,000/s).

    .venv/bin/python bench/replay_bench.py [--total 10000] [--redis redis://127.0.0.1:6379/0]
                                           [--partitions 1]

Records a mixed session (knowledge, logs, MySQL) with a real in-process worker on Redis, then
times `reproject` over the recordings loaded from Redis (load and re-project reported apart).
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from typing import Any

import anyio

from app.replay import Reporter
from pipeline.client import EvidenceClient, ToolCall
from pipeline.redis_io import open_redis
from pipeline.settings import Settings
from workers.replay import Selection, load_redis
from workers.replay_diff import reproject
from workers.runtime import run_worker
from workers.sources.instant import InstantSource

SESSION = "bench"


def workload(total: int) -> list[ToolCall]:
    calls: list[ToolCall] = []
    for i in range(total):
        match i % 3:
            case 0:
                tool, arguments = "lookup_knowledge", {"query": f"pool exhausted {i}"}
            case 1:
                tool, arguments = "query_logs", {"topic": "APPLICATION", "query": f"timeout {i}"}
            case _:
                tool = "query_mysql"
                arguments = {
                    "data_source": "orders",
                    "sql": "SELECT id FROM t WHERE id = ?",
                    "params": [i],
                }
        calls.append(ToolCall(tool=tool, tool_call_id=f"b{i}", arguments=arguments))
    return calls


async def record(redis: Any, settings: Settings, total: int) -> None:
    calls = workload(total)
    sources = dict.fromkeys(("lookup_knowledge", "query_logs", "query_mysql"), InstantSource())
    stop = anyio.Event()
    async with EvidenceClient(redis, settings) as client, anyio.create_task_group() as tg:
        tg.start_soon(lambda: run_worker(redis, settings, sources, concurrency=64, stop=stop))
        for start in range(0, total, 1000):
            await client.submit_many(SESSION, calls[start : start + 1000])
        done = await client.wait(SESSION, [c.tool_call_id for c in calls], 300)
        assert len(done) == total, f"only {len(done)} of {total} finished"
        stop.set()


async def main(total: int, url: str, partitions: int = 1) -> dict[str, Any]:
    settings = Settings(prefix=f"bench{uuid.uuid4().hex[:8]}", redis_url=url, partitions=partitions)
    async with open_redis(url) as redis:
        try:
            await record(redis, settings, total)
            started = time.perf_counter()
            records = await load_redis(redis, settings, Selection(session=SESSION))
            loaded = time.perf_counter()
            reporter = Reporter(as_json=True, mode="reproject", progress_from=10**9)
            for rec in records:
                reporter.add(reproject(rec, settings))
            projected = time.perf_counter()
        finally:
            for part in settings.keys().parts:
                keys = [k async for k in redis.scan_iter(match=f"{part.tag}:*")]
                for start in range(0, len(keys), 1000):
                    await redis.delete(*keys[start : start + 1000])
    summary = reporter.summary()
    return {
        "bench": "replay_reproject",
        "invocations": len(records),
        "identical": summary["identical"],
        "load_s": round(loaded - started, 3),
        "reproject_s": round(projected - loaded, 3),
        "reproject_per_s": round(len(records) / (projected - loaded)),
        "end_to_end_per_s": round(len(records) / (projected - started)),
        "goal_per_s": 5000,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--total", type=int, default=10_000)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--partitions", type=int, default=1)
    args = parser.parse_args()
    print(json.dumps(anyio.run(main, args.total, args.redis, args.partitions)))
