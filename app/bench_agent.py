"""The agent-shaped figure of `aci-evidence bench pipeline`: calls after a pause.

An agent calls its tools once per LLM turn, so between calls the pipeline sits idle for
seconds: what the agent feels is the latency of one call, or of a burst of parallel calls,
that arrives after such a pause, not the throughput of a busy queue. Per round, after
`pause` seconds of nothing each:
- **raw**: the bare redis-py round trip of one entry, as `bench_raw` does it (XADD →
  a consumer blocked in XREADGROUP → XADD of the reply and XACK → a reader blocked in XREAD):
  the local limit of one hop and back after the same pause;
- **one**: one call through the public client API (`EvidenceClient.call`), submit to its
  final Model Observation;
- **burst**: 8 parallel calls (`call` each, as an MCP host or an agent runtime issues
  them), until the last one is final.

Reported as p50 and p90 in ms of each, over `rounds` rounds. Only the public client API
and redis-py are used, so the same module measures older trees (`bench/agent_bench.py`).
"""

from __future__ import annotations

import math
import statistics
import time
import uuid
from typing import Any, Final

import anyio

from pipeline.client import EvidenceClient, ToolCall

__all__ = ["BURST", "bench_agent", "percentiles"]

BURST: Final = 8


def percentiles(samples: list[float]) -> tuple[float, float]:
    """(p50, p90) of `samples` in the same unit, rounded to 0.01; nan when empty."""
    if not samples:
        return float("nan"), float("nan")
    ordered = sorted(samples)
    p90 = ordered[max(0, math.ceil(len(ordered) * 0.9) - 1)]
    return round(statistics.median(ordered), 2), round(p90, 2)


class _RawHop:
    """A consumer blocked in XREADGROUP and a reader blocked in XREAD, as in `bench_raw`."""

    def __init__(self, redis: Any, block_ms: int) -> None:
        tag = uuid.uuid4().hex[:8]
        self.redis, self.block_ms = redis, block_ms
        self.requests, self.replies = f"bench:{tag}:agent-req", f"bench:{tag}:agent-rep"
        self.seen = anyio.Event()
        self.cursor = "0-0"

    async def consumer(self, stop: anyio.Event) -> None:
        redis = self.redis
        while not stop.is_set():
            reply = await redis.xreadgroup(
                "g", "c", {self.requests: ">"}, count=16, block=self.block_ms
            )
            for _s, entries in reply or []:
                async with redis.pipeline(transaction=False) as pipe:
                    for _eid, fields in entries:
                        pipe.xadd(self.replies, {"n": fields[b"n"], "q": fields[b"q"]})
                    pipe.xack(self.requests, "g", *[eid for eid, _ in entries])
                    await pipe.execute()

    async def reader(self, stop: anyio.Event) -> None:
        while not stop.is_set():
            reply = await self.redis.xread({self.replies: self.cursor}, block=self.block_ms)
            for _s, entries in reply or []:
                self.cursor = entries[-1][0]
                self.seen.set()

    async def once(self) -> float:
        self.seen = anyio.Event()
        t0 = time.perf_counter()
        await self.redis.xadd(self.requests, {"n": "1", "q": b'{"query":"pool exhausted"}'})
        await self.seen.wait()
        return (time.perf_counter() - t0) * 1000


async def bench_agent(
    client: EvidenceClient, redis: Any, *, rounds: int = 10, pause: float = 3.0
) -> dict[str, Any]:
    """The agent-shaped figures (module docstring): `agent_{one,burst,raw}_{p50,p90}_ms`
    and `agent_pause_s`. Takes about `rounds * 3 * pause` seconds."""
    session = f"agent-{uuid.uuid4().hex[:8]}"
    raw = _RawHop(redis, block_ms=int(pause * 1000) + 5000)
    await redis.xgroup_create(raw.requests, "g", id="0", mkstream=True)
    one: list[float] = []
    burst: list[float] = []
    hop: list[float] = []
    n = 0

    def call(i: int) -> ToolCall:
        arguments = {"query": f"connection pool exhausted {i}"}
        return ToolCall(tool="lookup_knowledge", tool_call_id=f"a{i}", arguments=arguments)

    async def one_call(c: ToolCall) -> None:
        await client.call(session, c, timeout=30)

    async def timed(calls: list[ToolCall]) -> float:
        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for c in calls:
                tg.start_soon(one_call, c)
        return (time.perf_counter() - t0) * 1000

    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(raw.consumer, stop)
        tg.start_soon(raw.reader, stop)
        await timed([call(n)])  # warm: the session's listener, the worker's first call
        n += 1
        await raw.once()
        for _ in range(rounds):
            await anyio.sleep(pause)
            hop.append(await raw.once())
            await anyio.sleep(pause)
            one.append(await timed([call(n)]))
            n += 1
            await anyio.sleep(pause)
            burst.append(await timed([call(n + i) for i in range(BURST)]))
            n += BURST
        stop.set()
        # Wake both blocked reads so they see `stop`.
        await redis.xadd(raw.requests, {"n": "0", "q": b""})
    await redis.delete(raw.requests, raw.replies)
    figures: dict[str, Any] = {"agent_pause_s": pause}
    for name, samples in (("one", one), ("burst", burst), ("raw", hop)):
        p50, p90 = percentiles(samples)
        figures[f"agent_{name}_p50_ms"] = p50
        figures[f"agent_{name}_p90_ms"] = p90
    return figures
