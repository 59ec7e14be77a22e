"""CPU per call in each process of the pipeline, and Redis's commands per call.

    PYTHONPATH=<tree> .venv/bin/python bench/cpu_bench.py [--mode seq|paced|tput] [--n 3000]
        [--reps 3] [--commands]

Runs against the tree on PYTHONPATH (it uses only `app.bench` and the public client API, so it
measures any tree from 5dde69d on the same way): a private embedded Redis, one worker process
with the instant source, and this process as the client. Per repetition, over `--n` calls:
- `seq`: one `client.call` at a time (every call pays every round trip and wake-up alone);
- `paced`: `app.bench.bench_latency` at 1,000/s (`--n` / 1,000 s);
- `tput`: `app.bench.bench_pipeline` (16 submitters, batches: the throughput figure).
It prints one JSON line per repetition: CPU µs per call of the client (`time.process_time`),
the worker and redis-server (`/proc/<pid>/stat` utime + stime), p50/p99 ms (or calls/s), the
client's collections per generation (`gc.get_stats`), and Redis's commands per call (`INFO
commandstats`, commands inside scripts included; `--commands`: per command, calls and µs).
On a machine shared with other work CPU per call is steadier than wall figures, but it too
grows with contention (cache misses, more wake-ups per call): compare trees in alternating
runs.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
import uuid
from typing import Any

import anyio

from app.bench import _bench_workers, bench_latency, bench_pipeline
from pipeline.client import EvidenceClient, ToolCall
from pipeline.embedded import embedded_redis
from pipeline.redis_io import open_redis
from pipeline.settings import Settings

_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime


def _workers_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                worker = b"worker" in cmdline.read()
        except OSError:
            continue
        if parent == pid and worker:
            found.append(int(entry))
    return found


async def _commands(redis: Any) -> dict[str, tuple[int, int]]:
    info = await redis.info("commandstats")
    return {k.removeprefix("cmdstat_"): (v["calls"], v["usec"]) for k, v in info.items()}


async def _run(client: EvidenceClient, mode: str, n: int, rep: int) -> dict[str, Any]:
    if mode == "paced":
        p50, p99 = await bench_latency(client, 1000, n / 1000, "lookup_knowledge")
        return {"p50_ms": round(p50, 3), "p99_ms": round(p99, 3)}
    if mode == "tput":
        return {"per_s": round(await bench_pipeline(client, n, "lookup_knowledge"))}
    latencies = []
    for i in range(n):
        call = ToolCall(
            tool="lookup_knowledge", tool_call_id=f"s{i}", arguments={"query": f"q {i}"}
        )
        started = time.perf_counter()
        await client.call(f"seq{rep}", call, timeout=30)
        latencies.append((time.perf_counter() - started) * 1000)
    latencies.sort()
    return {"p50_ms": round(latencies[n // 2], 3), "p99_ms": round(latencies[int(n * 0.99)], 3)}


async def main(args: argparse.Namespace) -> None:
    async with embedded_redis() as url, open_redis(url, max_connections=64) as redis:
        redis_pid = int((await redis.info("server"))["process_id"])
        prefix = f"cpu{uuid.uuid4().hex[:6]}"
        with _bench_workers(url, prefix, 1, instant=True):
            async with EvidenceClient(redis, Settings(redis_url=url, prefix=prefix)) as client:
                await anyio.sleep(1.5)
                workers = _workers_of(os.getpid())
                await bench_pipeline(client, 2048, "lookup_knowledge")  # warm-up
                for rep in range(args.reps):
                    gc_before = [s["collections"] for s in gc.get_stats()]
                    client0, redis0 = time.process_time(), _cpu_s(redis_pid)
                    worker0 = sum(_cpu_s(p) for p in workers)
                    commands0 = await _commands(redis)
                    row = await _run(client, args.mode, args.n, rep)
                    client1, redis1 = time.process_time(), _cpu_s(redis_pid)
                    worker1 = sum(_cpu_s(p) for p in workers)
                    commands1 = await _commands(redis)
                    per = {
                        name: (round((calls - commands0.get(name, (0, 0))[0]) / args.n, 3),
                               round((usec - commands0.get(name, (0, 0))[1]) / args.n, 1))
                        for name, (calls, usec) in commands1.items() if name != "info"
                    }  # fmt: skip
                    per = {name: v for name, v in per.items() if v[0] > 0}
                    row = {
                        "client_us": round((client1 - client0) / args.n * 1e6, 1),
                        "worker_us": round((worker1 - worker0) / args.n * 1e6, 1),
                        "redis_us": round((redis1 - redis0) / args.n * 1e6, 1),
                        **row,
                        "gc": [
                            s["collections"] - b
                            for s, b in zip(gc.get_stats(), gc_before, strict=True)
                        ],
                        "commands_per_call": round(sum(v[0] for v in per.values()), 2),
                        **({"commands": per} if args.commands else {}),
                    }
                    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["seq", "paced", "tput"], default="seq")
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--commands", action="store_true")
    anyio.run(main, parser.parse_args())
