"""CPU per invocation and admission lag: what trusted admission costs, measured so that a loaded
machine (other jobs on the same cores) changes the figures little.

    .venv/bin/python bench/admission_bench.py --total 20000 [--json]

One private Redis on a unix socket, one worker process with the instant sources, this process
as the client: 16 sessions submit `call_many` batches of 32 until `--total` are READY. Printed:
wall-clock invocations/s (load-sensitive), and CPU per invocation of the client (getrusage),
the worker (/proc) and Redis (`INFO cpu`), which depend far less on what else runs. With
trusted admission (`pipeline.admission`) it also prints the admission lag: per call, the time
from the client's envelope (`submitted_at_ms`) to its PROJECTING lifecycle entry (`at`, written
by admission), p50/p99/max, under this load. `--commands` adds Redis's own account per
invocation: each command's calls and microseconds (`INFO commandstats`).

It uses only `EvidenceClient.call_many` and `Settings`, so the same script measures an older
commit (run it with that commit's tree first on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import time
import uuid
from typing import Any

import anyio

from app.fleet import worker_processes
from pipeline.client import EvidenceClient, ToolCall
from pipeline.embedded import embedded_redis
from pipeline.redis_io import open_redis
from pipeline.settings import Settings

SESSIONS = 16
BATCH = 32


def _proc_cpu_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _redis_cpu_s(redis: Any) -> float:
    info = await redis.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


async def _lag_ms(redis: Any, settings: Settings, sessions: list[str]) -> list[float]:
    keys = settings.keys()
    out: list[float] = []
    for session in sessions:
        lifecycle = keys.for_session(session).lifecycle
        for _eid, fields in await redis.xrange(lifecycle, "-", "+"):
            if fields.get(b"status") != b"PROJECTING" or fields.get(b"session") != session.encode():
                continue
            call = keys.call(session, fields[b"id"].decode())
            envelope = await redis.hget(call, "inv")
            if envelope:
                sent = json.loads(envelope)["submitted_at_ms"]
                out.append(float(int(fields[b"at"]) - sent))
        break  # one session's calls are a fair sample
    return out


async def _commandstats(redis: Any) -> dict[str, tuple[int, float]]:
    # Per command: calls and microseconds of Redis CPU (a script's own commands are counted
    # both under EVALSHA and under themselves).
    info = await redis.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): (int(v["calls"]), float(v["usec"]))
        for name, v in info.items()
        if name.startswith("cmdstat_")
    }


async def run(total: int, commands: bool = False) -> dict[str, Any]:
    async with embedded_redis() as url:
        prefix = f"adm{uuid.uuid4().hex[:6]}"
        settings = Settings(prefix=prefix, redis_url=url)
        env = dict(os.environ, ACI_REDIS_URL=url, ACI_PREFIX=prefix, ACI_INSTANT_SOURCES="1")
        sessions = [f"s{k}" for k in range(SESSIONS)]
        rounds = max(1, total // (SESSIONS * BATCH))
        async with open_redis(url) as redis, EvidenceClient(redis, settings) as client:
            with worker_processes(env, 1, concurrency=256, quiet=True) as procs:
                warm = [
                    ToolCall(tool="lookup_knowledge", tool_call_id="w", arguments={"query": "q"})
                ]
                with anyio.fail_after(60):
                    while (await client.call_many("warm", warm, timeout=5))[0] is None:
                        pass
                worker = procs[0].pid
                if commands:
                    await redis.config_resetstat()
                cpu0 = (_self_cpu_s(), _proc_cpu_s(worker), await _redis_cpu_s(redis))
                started = time.perf_counter()

                async def one(k: int) -> None:
                    for r in range(rounds):
                        calls = [
                            ToolCall(tool="lookup_knowledge", tool_call_id=f"c{r}_{i}",
                                     arguments={"query": f"connection pool exhausted {k}"})
                            for i in range(BATCH)
                        ]  # fmt: skip
                        results = await client.call_many(sessions[k], calls, timeout=120)
                        assert all(x is not None for x in results)

                async with anyio.create_task_group() as tg:
                    for k in range(SESSIONS):
                        tg.start_soon(one, k)
                wall = time.perf_counter() - started
                cpu1 = (_self_cpu_s(), _proc_cpu_s(worker), await _redis_cpu_s(redis))
                stats = await _commandstats(redis) if commands else {}
            done = rounds * SESSIONS * BATCH
            lag = await _lag_ms(redis, settings, sessions)
    per = [(b - a) / done * 1e6 for a, b in zip(cpu0, cpu1, strict=True)]
    report: dict[str, Any] = {
        "invocations": done,
        "per_s": round(done / wall),
        "client_us": round(per[0], 1),
        "worker_us": round(per[1], 1),
        "redis_us": round(per[2], 1),
        "total_us": round(sum(per), 1),
    }
    if stats:
        report["redis_commands"] = {
            name: {"per_call": round(calls / done, 2), "us": round(usec / done, 2)}
            for name, (calls, usec) in sorted(stats.items(), key=lambda kv: -kv[1][1])
        }
    if lag:
        lag.sort()
        report["admission_lag_ms"] = {
            "p50": statistics.median(lag),
            "p99": lag[int(len(lag) * 0.99) - 1],
            "max": lag[-1],
            "n": len(lag),
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", type=int, default=20_000)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--commands", action="store_true",
        help="also Redis's commands per invocation: calls and microseconds (INFO commandstats)",
    )  # fmt: skip
    args = parser.parse_args()
    report = anyio.run(run, args.total, args.commands)
    print(json.dumps(report) if args.json else "\n".join(f"{k}: {v}" for k, v in report.items()))


if __name__ == "__main__":
    main()
