"""The load driver: a deterministic mix of calls across the three tools, each with the outcome
it must have, submitted at a steady rate (or as one burst) through `EvidenceClient`.

A submission that fails because Redis is away is retried with the same tool call id (submit is
idempotent per session and id), so every planned call is eventually submitted exactly once.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from typing import Any, Final

import anyio
import msgspec

from chaos.hostile import EXPECTED, HOSTILE, KINDS
from chaos.worker import HANG
from pipeline.client import EvidenceClient, ToolCall
from pipeline.keys import GROUP, Keys
from pipeline.record import STATUS
from pipeline.redis_io import PipelineError, execute

__all__ = ["Expect", "LoadStats", "Planned", "plan_calls", "submit_all", "wait_final"]


class Expect:
    """What a planned call must end as."""

    FOUND: Final = "found"  # EVIDENCE_FOUND (or ERROR when its source was down); never NO_EVIDENCE
    NONE: Final = "none"  # NO_EVIDENCE (or ERROR when its source was down)
    TIMEOUT: Final = "TIMEOUT"  # ERROR/TIMEOUT: the source hangs
    PROJECTION: Final = "PROJECTION"  # ERROR/PROJECTION: the source answers garbage


class Planned(msgspec.Struct, frozen=True, kw_only=True):
    """One call of the plan."""

    session: str
    call: ToolCall
    expect: str


_KNOWLEDGE_FOUND: Final = (
    "connection pool exhausted",
    "disk full on database host",
    "payment callback timeout",
    "refund stuck in processing",
    "high CPU on order service",
)
_LOGS_FOUND: Final = (("APPLICATION", "timeout"), ("DATABASE_SLOW_QUERY", ""), ("APPLICATION", ""))


def _template(i: int, rng: random.Random) -> tuple[str, dict[str, Any], str]:
    kind = i % 7
    if kind in (0, 1):
        return "lookup_knowledge", {"query": rng.choice(_KNOWLEDGE_FOUND)}, Expect.FOUND
    if kind == 2:
        return "lookup_knowledge", {"query": "qwzx vlorp"}, Expect.NONE
    if kind == 3:
        topic, query = rng.choice(_LOGS_FOUND)
        return "query_logs", {"topic": topic, "query": query, "lookback_minutes": 60}, Expect.FOUND
    if kind == 4:
        return "query_logs", {"topic": "SYSTEM_EVENTS", "query": "qwzxvlorp"}, Expect.NONE
    if kind == 5:
        args: dict[str, Any] = {
            "data_source": "shop",
            "sql": "SELECT id, status FROM orders WHERE id = ?",
        }
        return "query_mysql", {**args, "params": [100001 + rng.randrange(200)]}, Expect.FOUND
    none = {"data_source": "shop", "sql": "SELECT id FROM orders WHERE id = ?", "params": [-1]}
    return "query_mysql", none, Expect.NONE


def _hostile(n: int) -> tuple[str, dict[str, Any], str]:
    # The n-th hostile answer (a RAG call): each an ERROR of its expected code.
    kind = KINDS[n % len(KINDS)]
    expect = EXPECTED[kind]
    return (
        "lookup_knowledge",
        {"query": f"hostile:{kind} pool"},
        (Expect.FOUND if expect == "EVIDENCE_FOUND" else expect),
    )


def _faulted(tool: str, marker: str) -> tuple[dict[str, Any], str]:
    expect = Expect.TIMEOUT if marker == HANG else Expect.PROJECTION
    if tool == "lookup_knowledge":
        return {"query": f"{marker} pool"}, expect
    if tool == "query_logs":
        return {"topic": "APPLICATION", "query": marker}, expect
    return {"data_source": "shop", "sql": f"SELECT '{marker}' AS m"}, expect


def plan_calls(
    total: int, *, sessions: int = 8, fault: str = "", fault_every: int = 10, seed: int = 7
) -> list[Planned]:
    """`total` calls spread over `sessions`; every `fault_every`-th carries the `fault` marker
    (for `hostile`, it becomes a knowledge call whose upstream answers with a hostile body)."""
    rng = random.Random(seed)
    out: list[Planned] = []
    for i in range(total):
        tool, args, expect = _template(i, rng)
        if fault == HOSTILE and i % fault_every == fault_every - 1:
            tool, args, expect = _hostile(i // fault_every)
        elif fault and i % fault_every == fault_every - 1:
            args, expect = _faulted(tool, fault)
        call = ToolCall(tool=tool, tool_call_id=f"call_{i:06d}", arguments=json.dumps(args))
        out.append(Planned(session=f"chaos-s{i % sessions}", call=call, expect=expect))
    return out


class LoadStats(msgspec.Struct, kw_only=True):
    """Submission figures."""

    submitted: int = 0
    retries: int = 0
    latencies_ms: list[float] = msgspec.field(default_factory=list)
    seconds: float = 0.0

    def percentile(self, q: float) -> float:
        """Submit latency percentile in ms (per submit_many batch)."""
        if not self.latencies_ms:
            return 0.0
        ordered = sorted(self.latencies_ms)
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


async def _submit_batch(client: EvidenceClient, batch: Sequence[Planned], stats: LoadStats) -> None:
    calls = [p.call for p in batch]
    backoff = 0.05
    while True:
        started = time.perf_counter()
        try:
            await client.submit_many(batch[0].session, calls)
        except PipelineError:
            stats.retries += 1
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)
            continue
        stats.latencies_ms.append((time.perf_counter() - started) * 1000)
        stats.submitted += len(calls)
        return


async def submit_all(
    client: EvidenceClient,
    plan: Sequence[Planned],
    *,
    rate: float | None,
    batch: int = 10,
    submitters: int = 4,
    stats: LoadStats | None = None,
) -> LoadStats:
    """Submit the plan in per-session batches at `rate` calls/s (None: as fast as possible);
    `stats` (if given) is updated as it goes, so fault injectors can follow the progress."""
    stats = stats if stats is not None else LoadStats()
    by_session: dict[str, list[Planned]] = {}
    for p in plan:
        by_session.setdefault(p.session, []).append(p)
    batches = [
        calls[i : i + batch] for calls in by_session.values() for i in range(0, len(calls), batch)
    ]
    batches.sort(key=lambda b: b[0].call.tool_call_id)
    started = time.perf_counter()
    send, receive = anyio.create_memory_object_stream[list[Planned]](submitters)

    async def submitter(inbox: Any) -> None:
        async with inbox:
            async for item in inbox:
                await _submit_batch(client, item, stats)

    async with anyio.create_task_group() as tg:
        for _ in range(submitters):
            tg.start_soon(submitter, receive.clone())
        receive.close()
        async with send:
            for n, item in enumerate(batches):
                if rate:
                    due = started + n * batch / rate
                    await anyio.sleep(max(0.0, due - time.perf_counter()))
                await send.send(item)
    stats.seconds = time.perf_counter() - started
    return stats


async def wait_final(
    redis: Any, client: EvidenceClient, plan: Sequence[Planned], limit: float
) -> int:
    """Poll the state hashes until every call is final or `limit` s pass; returns how many are
    not final. Polls rather than waits on streams, so a Redis outage only delays it."""
    pending = list(plan)
    deadline = time.monotonic() + limit
    while pending and time.monotonic() < deadline:
        try:
            pipe = redis.pipeline(transaction=False)
            for p in pending:
                pipe.hget(client.keys.result(p.session, p.call.tool_call_id), STATUS)
            states = await execute(pipe)
        except PipelineError:
            await anyio.sleep(0.5)
            continue
        pending = [p for p, st in zip(pending, states, strict=True) if st is None]
        if pending:
            await anyio.sleep(0.25)
    return len(pending)


async def wait_acked(redis: Any, keys: Keys, limit: float) -> int:
    """Poll the invocation streams' pending lists until every entry is acked or `limit` s
    pass; returns how many are still pending. A call can be final while its entry is still
    pending: cancelled (`cancel.lua`) while a worker that was then SIGKILLed held it, the
    entry is acked by the live worker that takes it over after the visibility timeout
    (`mark.lua` refuses to run a final call). What is pending after `limit` was never acked."""
    deadline = time.monotonic() + limit
    while True:
        try:
            pipe = redis.pipeline(transaction=False)
            for part in keys.parts:
                pipe.xpending(part.invocations, GROUP)
            left = sum(int(p["pending"]) for p in await execute(pipe))
        except PipelineError:
            left = -1
        if left == 0 or time.monotonic() >= deadline:
            return max(left, 0)
        await anyio.sleep(0.25)
