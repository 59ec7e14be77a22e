"""Where an agent's call goes, and A/B figures against another tree.

    PYTHONPATH=<tree> .venv/bin/python bench/agent_bench.py [--rounds 5] [--pause 3]
        [--breakdown] [--throughput] [--json] [--via-admission]

Runs against the tree on PYTHONPATH (the A/B runs put an older commit's worktree there): a
private Redis (`ACI_REDIS_URL`, else an embedded one), one worker process with the instant
source, and
- the agent-shaped figures of `app/bench_agent.py` (always loaded from THIS file's tree, which
  only uses the public client API, so it measures any tree the same way);
- `--breakdown`: one call after each pause watched through Redis `MONITOR`: per round, when
  each command of the call reached Redis (the submit, admission's takes and admit, the
  finish, the listener's read), relative to the client's start, and the medians;
- `--throughput`: the tree's own `bench raw`, instant throughput with one worker and p50/p99
  at a paced 1,000/s for 3 s (`app.bench` of the tree, as `bench pipeline` runs them).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import anyio

from app.bench import _bench_workers, bench_latency, bench_pipeline, bench_raw
from pipeline.client import EvidenceClient, ToolCall
from pipeline.embedded import embedded_redis
from pipeline.redis_io import open_redis
from pipeline.settings import Settings

_HERE = Path(__file__).resolve().parents[1]


def _bench_agent_module() -> Any:
    spec = importlib.util.spec_from_file_location("_bench_agent", _HERE / "app/bench_agent.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _label(command: str) -> str | None:
    """A short name for a top-level command of one call, or None for the rest."""
    words = command.split(" ")
    name = words[0].upper()
    if name == "XADD" and len(words) > 1 and words[1].endswith(":requests"):
        return "submit"
    if name in ("EVALSHA", "EVAL") and len(words) > 3:
        keys = words[3 : 3 + int(words[2])]
        if keys[0].endswith(":requests"):
            return "take" if len(keys) == 2 else "admit"
        if any(":res:" in k or ":model:" in k for k in keys) or len(keys) > 6:
            return "finish"
        return "submit"  # before admission: one submit script
    if name == "XREAD" and any(":model:" in w for w in words):
        return "listen"
    if name == "XREADGROUP" and any(w.endswith(":invocations") for w in words):
        return "read"
    return None


async def breakdown(client: EvidenceClient, redis: Any, rounds: int, pause: float) -> None:
    """Print when each command of one call after `pause` reached Redis (module docstring)."""
    session = f"bd-{uuid.uuid4().hex[:6]}"
    events: list[tuple[float, str]] = []
    rows: list[dict[str, float]] = []

    async def watch(stop: anyio.Event) -> None:
        async with redis.monitor() as monitor:
            async for info in monitor.listen():
                if info.get("client_address") == "lua":
                    continue
                label = _label(info["command"])
                if label:
                    events.append((info["time"], label))
                if stop.is_set():
                    return

    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(watch, stop)
        await anyio.sleep(0.5)
        for r in range(rounds + 1):
            await anyio.sleep(pause)
            events.clear()
            t0 = time.time()
            call = ToolCall(
                tool="lookup_knowledge",
                tool_call_id=f"bd{r}",
                arguments={"query": f"pool exhausted {r}"},
            )
            await client.call(session, call, timeout=30)
            t1 = time.time()
            await anyio.sleep(0.05)
            row: dict[str, float] = {"end": (t1 - t0) * 1000}
            submit = next((t for t, name in events if name == "submit" and t >= t0), None)
            for t, name in events:
                if t < t0 or t > t1 or name in row:
                    continue
                if name == "take" and submit is not None:
                    # The take that found the request: the last one before the admit.
                    admit = next((u for u, n in events if n == "admit" and u >= t0), t1)
                    takes = [u for u, n in events if n == "take" and submit <= u <= admit]
                    if takes:
                        row["take"] = (takes[-1] - t0) * 1000
                        row["takes"] = len(takes)
                    continue
                row[name] = (t - t0) * 1000
            if r:  # the first round warms up
                rows.append(row)
                print(" ".join(f"{k}={v:.2f}" for k, v in row.items()), flush=True)
        stop.set()
        await redis.ping()
    names = ["submit", "take", "admit", "read", "finish", "listen", "end", "takes"]
    medians = {
        n: round(statistics.median(r[n] for r in rows if n in r), 2)
        for n in names
        if any(n in r for r in rows)
    }
    print("median ms after the client's start:", json.dumps(medians))


async def throughput(client: EvidenceClient, redis: Any, total: int) -> dict[str, Any]:
    figures: dict[str, Any] = {"raw_per_s": round(await bench_raw(redis, total))}
    figures["instant_1w_per_s"] = round(await bench_pipeline(client, total, "lookup_knowledge"))
    p50, p99 = await bench_latency(client, 1000, 3, "lookup_knowledge")
    figures["p50_ms"], figures["p99_ms"] = round(p50, 2), round(p99, 2)
    figures["ratio_to_raw"] = round(figures["instant_1w_per_s"] / figures["raw_per_s"], 3)
    return figures


async def main(args: argparse.Namespace) -> None:
    url = os.environ.get("ACI_REDIS_URL")
    async with embedded_redis() if url is None else _given(url) as url:
        async with open_redis(url, max_connections=64) as redis:
            prefix = f"ab{uuid.uuid4().hex[:6]}"
            # `--via-admission`: the client as a submitter's (requests, the workers' admission),
            # though it runs as Redis's default user (`pipeline.admit_here`).
            extra: dict[str, Any] = {"admit_here": "0"} if args.via_admission else {}
            settings = Settings(redis_url=url, prefix=prefix, **extra)
            figures: dict[str, Any] = {"tree": os.environ.get("PYTHONPATH", "")}
            if args.via_admission:
                figures["via_admission"] = True
            with _bench_workers(url, prefix, 1, instant=True):
                async with EvidenceClient(redis, settings) as client:
                    await anyio.sleep(1.0)
                    if args.throughput:
                        figures.update(await throughput(client, redis, args.total))
                    if args.breakdown:
                        await breakdown(client, redis, args.rounds, args.pause)
                    if args.rounds and not args.breakdown:
                        module = _bench_agent_module()
                        figures.update(
                            await module.bench_agent(
                                client, redis, rounds=args.rounds, pause=args.pause
                            )
                        )
    print(json.dumps(figures) if args.json else figures, flush=True)


class _given:
    def __init__(self, url: str) -> None:
        self.url = url

    async def __aenter__(self) -> str:
        return self.url

    async def __aexit__(self, *exc: object) -> None:
        return None


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pause", type=float, default=3.0)
    parser.add_argument("--total", type=int, default=20000)
    parser.add_argument("--breakdown", action="store_true")
    parser.add_argument("--throughput", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--via-admission", action="store_true",
        help="submit as a submitter does (ACI_ADMIT_HERE=0): trees that have admit_here only",
    )  # fmt: skip
    anyio.run(main, parser.parse_args())
    sys.exit(0)
