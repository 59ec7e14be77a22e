"""`aci-evidence bench pipeline --cluster`: the pipeline on a local Redis Cluster of 1 and of
3 shards (masters without replicas, `pipeline.local_cluster`), `ACI_PARTITIONS=16`, instant sources,
worker processes on this machine.

Per shard count: invocations/s end to end (16 submitters, one session each, batches of 32
awaited), and from every master's INFO before and after the measured run: Redis CPU
(`used_cpu_user + used_cpu_sys`: the capacity figure) per invocation, per shard and in all,
the commands taking the most time (`INFO commandstats` usec per invocation; EVALSHA's time
includes the commands its script runs, which are also listed on their own), and the growth of
`used_memory` per invocation. These are the inputs of the capacity model in docs/pipeline.md.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

import anyio

from app.fleet import worker_processes
from pipeline.client import EvidenceClient, ToolCall
from pipeline.redis_io import open_redis
from pipeline.settings import Settings

__all__ = ["bench_cluster"]

SUBMITTERS = 16
BATCH = 32
PARTITIONS = 16


async def _node_stats(port: int) -> dict[str, float]:
    async with open_redis(f"redis://127.0.0.1:{port}/0") as node:
        commands = await node.info("commandstats")
        cpu = await node.info("cpu")
        memory = await node.info("memory")
    # A script's own commands are counted in commandstats beside EVALSHA (whose time includes
    # them): the sum of usec double-counts, so the figures name commands one by one.
    return {
        **{f"us:{name.removeprefix('cmdstat_')}": float(v["usec"]) for name, v in commands.items()},
        "calls": float(sum(v["calls"] for v in commands.values())),
        "cpu_s": float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]),
        "memory": float(memory["used_memory"]),
    }


async def _load(client: EvidenceClient, total: int, tag: str) -> int:
    rounds = max(1, total // SUBMITTERS // BATCH)
    finished = 0

    async def submitter(k: int) -> None:
        nonlocal finished
        session = f"cb-{tag}-{k}"
        for r in range(rounds):
            calls = [
                ToolCall(tool="lookup_knowledge", tool_call_id=f"c{r}_{i}",
                         arguments={"query": f"connection pool exhausted {k}"})
                for i in range(BATCH)
            ]  # fmt: skip
            results = await client.call_many(session, calls, timeout=120)
            finished += sum(1 for x in results if x is not None)

    async with anyio.create_task_group() as tg:
        for k in range(SUBMITTERS):
            tg.start_soon(submitter, k)
    return finished


async def _one(shards: int, total: int, workers: int) -> dict[str, Any]:
    from pipeline.local_cluster import local_cluster

    with local_cluster(shards, 0) as cluster:
        masters = cluster.master_ports()
        env = dict(os.environ, ACI_REDIS_URL=cluster.url, ACI_PREFIX="bench",
                   ACI_PARTITIONS=str(PARTITIONS), ACI_INSTANT_SOURCES="1")  # fmt: skip
        settings = Settings.from_env(env)
        async with (
            open_redis(cluster.url, max_connections=256) as redis,
            EvidenceClient(redis, settings) as client,
        ):
            with worker_processes(env, workers, concurrency=256, quiet=True):
                await anyio.sleep(1.5)  # the workers start
                await _load(client, SUBMITTERS * BATCH, "warm")
                before = [await _node_stats(p) for p in masters]
                started = time.perf_counter()
                done = await _load(client, total, "run")
                elapsed = time.perf_counter() - started
                after = [await _node_stats(p) for p in masters]
    delta = [{k: a[k] - b.get(k, 0.0) for k in a} for a, b in zip(after, before, strict=True)]
    per_shard_cpu = [round(d["cpu_s"] * 1e6 / done, 1) for d in delta]
    command_us: dict[str, float] = {}
    for d in delta:
        for key, value in d.items():
            if key.startswith("us:"):
                command_us[key[3:]] = command_us.get(key[3:], 0.0) + value
    top = sorted(command_us.items(), key=lambda kv: -kv[1])[:6]
    return {
        "shards": shards,
        "invocations": done,
        "per_s": round(done / elapsed),
        "redis_cpu_us_per_inv": round(sum(d["cpu_s"] for d in delta) * 1e6 / done, 1),
        "redis_command_us_per_inv": {name: round(us / done, 1) for name, us in top},
        "redis_cpu_us_per_inv_by_shard": per_shard_cpu,
        "redis_calls_per_inv": round(sum(d["calls"] for d in delta) / done, 1),
        "bytes_per_inv": round(sum(d["memory"] for d in delta) / done),
    }


async def bench_cluster(total: int = 20_000, workers: int = 2) -> dict[str, Any]:
    """Figures for 1 and 3 shards (see the module docstring)."""
    figures: dict[str, Any] = {"cores": os.cpu_count(), "workers": workers,
                               "partitions": PARTITIONS, "run": uuid.uuid4().hex[:6]}  # fmt: skip
    for shards in (1, 3):
        figures[f"shards_{shards}"] = await _one(shards, total, workers)
    one, three = figures["shards_1"]["per_s"], figures["shards_3"]["per_s"]
    figures["speedup_3_over_1"] = round(three / one, 2) if one else None
    return figures
