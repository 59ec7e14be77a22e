"""Redis memory per invocation, per tool, with the real sources (mock logs, the runbook index,
the demo `shop` database on the local MariaDB).

    .venv/bin/python bench/memory_bench.py [--calls 300] [--redis redis://127.0.0.1:6379/0]

For each tool, `--calls` invocations with varied arguments in a prefix of their own, run by an
in-process worker; then `MEMORY USAGE key SAMPLES 0` of every key of the prefix, summed and
divided by the calls: per-call keys (`call`, `res`, `raw`) and every stream's share (the
invocations stream, lifecycle, model and control views, fingerprints, the sessions index).
Prints one JSON line: bytes per invocation per tool, in total and by key kind.
"""

from __future__ import annotations

import argparse
import json
import uuid
from collections import Counter
from typing import Any

import anyio

from pipeline.client import EvidenceClient, ToolCall
from pipeline.redis_io import open_redis
from pipeline.settings import Settings
from workers.runtime import run_worker
from workers.sources import open_sources

TOOLS = ("lookup_knowledge", "query_logs", "query_mysql")
_KNOWLEDGE = (
    "connection pool exhausted", "disk full on database host", "payment callback timeout",
    "refund stuck in processing", "high CPU on order service", "slow query on orders",
)  # fmt: skip
_LOGS = (("APPLICATION", "timeout"), ("APPLICATION", "error"), ("DATABASE_SLOW_QUERY", ""),
         ("SYSTEM_EVENTS", "restart"), ("APPLICATION", ""))  # fmt: skip
_SQL = ("SELECT id, status, total_amount, currency FROM orders WHERE id > ? ORDER BY id",
        "SELECT id, user_id, status, created_at FROM orders WHERE id = ?")  # fmt: skip


def arguments(tool: str, i: int) -> dict[str, Any]:
    """Varied, realistic arguments (the fingerprints differ: no duplicates)."""
    if tool == "lookup_knowledge":
        return {"query": f"{_KNOWLEDGE[i % len(_KNOWLEDGE)]} {i}"}
    if tool == "query_logs":
        topic, query = _LOGS[i % len(_LOGS)]
        return {"topic": topic, "query": query, "lookback_minutes": 30 + i}
    return {"data_source": "shop", "sql": _SQL[i % 2], "params": [100001 + i % 200]}


def kind_of(key: str) -> str:
    """`call`, `res`, `raw`, `model`, ... of a key name `{tag}:kind[:...]`."""
    return key.split("}:", 1)[1].split(":", 1)[0]


async def measure(redis: Any, url: str, tool: str, calls: int, sources: Any) -> dict[str, Any]:
    """Record `calls` invocations of `tool` in a fresh prefix; bytes per invocation."""
    settings = Settings(prefix=f"mem{uuid.uuid4().hex[:8]}", redis_url=url)
    session = f"mem-{tool}"
    batch = [ToolCall(tool=tool, tool_call_id=f"m{i}", arguments=arguments(tool, i))
             for i in range(calls)]  # fmt: skip
    stop = anyio.Event()
    async with EvidenceClient(redis, settings) as client, anyio.create_task_group() as tg:
        tg.start_soon(lambda: run_worker(redis, settings, sources, concurrency=32, stop=stop))
        for start in range(0, calls, 100):
            await client.call_many(session, batch[start : start + 100], timeout=120)
        stop.set()
    by_kind: Counter[str] = Counter()
    keys = [k async for k in redis.scan_iter(match=f"{{{settings.prefix}}}:*", count=1000)]
    for key in keys:
        name = key.decode()
        by_kind[kind_of(name)] += int(await redis.memory_usage(name, samples=0) or 0)
    await redis.delete(*keys)
    total = sum(by_kind.values())
    return {
        "bytes_per_invocation": round(total / calls),
        "by_kind": {k: round(v / calls) for k, v in sorted(by_kind.items())},
    }


async def main(calls: int, url: str) -> dict[str, Any]:
    from workers.sources.mysql.shop import ensure_demo_shop

    env = {"ACI_MYSQL_SHOP_URL": await ensure_demo_shop()}
    out: dict[str, Any] = {"bench": "memory_per_invocation", "calls_per_tool": calls}
    async with open_redis(url) as redis, open_sources(env, warm=True) as sources:
        for tool in TOOLS:
            out[tool] = await measure(redis, url, tool, calls, sources)
    out["mixed_bytes_per_invocation"] = round(
        sum(out[t]["bytes_per_invocation"] for t in TOOLS) / len(TOOLS)
    )
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    print(json.dumps(anyio.run(main, args.calls, args.redis)))
