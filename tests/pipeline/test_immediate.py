"""Calls that need no I/O (an `ImmediateSource`, an unknown tool, arguments that do not
decode) run inline, a read batch at a time, beside calls whose sources do I/O: the same
books, the same errors, the same log context."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest

from contracts import LifecycleStatus
from pipeline.client import EvidenceClient, ToolCall
from pipeline.keys import GROUP, Keys
from pipeline.settings import Settings
from tests.logging_capture import root_restored
from tests.pipeline.helpers import assert_exactly_once, books, loads, running_worker
from tests.pipeline.sources import EmptyLogSource, ImmediateKnowledge
from workers.logging_setup import configure_logging
from workers.stage import is_immediate

pytestmark = pytest.mark.redis

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
QUERIES = {"found": "pool exhausted", "none": "nothing", "fail": "fail", "bug": "bug",
           "garbage": "garbage"}  # fmt: skip
EXPECTED = {  # kind: (lifecycle, evidence status, error code)
    "found": ("READY", "EVIDENCE_FOUND", None),
    "none": ("READY", "NO_EVIDENCE", None),
    "fail": ("ERROR", "ERROR", "UNAVAILABLE"),
    "bug": ("ERROR", "ERROR", "EXECUTION"),
    "garbage": ("ERROR", "ERROR", "PROJECTION"),
    "logs": ("READY", "NO_EVIDENCE", None),
    "unknown": ("ERROR", "ERROR", "UNKNOWN_TOOL"),
    "schema": ("ERROR", "ERROR", "SCHEMA"),
}


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    with root_restored() as buffer:
        configure_logging("INFO", json_lines=True, stream=buffer)
        yield buffer


def call_of(kind: str, i: int) -> ToolCall:
    call_id = f"{kind}_{i}"
    if kind in QUERIES:
        query = QUERIES[kind] if kind != "found" else f"pool exhausted {i}"
        return ToolCall(tool="lookup_knowledge", tool_call_id=call_id, arguments={"query": query})
    if kind == "logs":
        args = {"topic": "APPLICATION", "query": "timeout", "lookback_minutes": 30}
        return ToolCall(tool="query_logs", tool_call_id=call_id, arguments=args)
    if kind == "unknown":
        return ToolCall(tool="no_such_tool", tool_call_id=call_id, arguments="{}")
    return ToolCall(tool="lookup_knowledge", tool_call_id=call_id, arguments="{nope")


def test_which_calls_are_immediate() -> None:
    sources: dict[str, Any] = {"lookup_knowledge": ImmediateKnowledge(),
                               "query_logs": EmptyLogSource()}  # fmt: skip
    assert is_immediate("lookup_knowledge", sources)
    assert not is_immediate("query_logs", sources)
    assert is_immediate("query_mysql", sources)  # no source: an ERROR at once


async def test_inline_and_awaited_calls_share_the_books(
    redis: Any, prefix: str, log_lines: io.StringIO
) -> None:
    settings = Settings(prefix=prefix, visibility_timeout_s=5.0, deadline_s=2.0)
    knowledge = ImmediateKnowledge()
    sources: dict[str, Any] = {"lookup_knowledge": knowledge, "query_logs": EmptyLogSource()}
    calls = [call_of(kind, i) for i in range(40) for kind in EXPECTED]
    async with EvidenceClient(redis, settings) as client:
        # Four slots for 320 calls: every slot must come back once its outcome is written.
        async with running_worker(redis, settings, sources, concurrency=4):
            results = await client.call_many("imm", calls, timeout=30)
            traced = ToolCall(tool="lookup_knowledge", tool_call_id="traced",
                              arguments={"query": "pool"})  # fmt: skip
            await client.submit_many("imm", [traced], traceparent=TRACEPARENT)
            [traced_result] = (await client.wait("imm", ["traced"], timeout=10)).values()
    # A call with a traceparent runs in a task of its own (under its span), the rest inline.
    assert knowledge.awaited == 1
    assert loads(traced_result.model)["evidence_status"] == "EVIDENCE_FOUND"
    for call, result in zip(calls, results, strict=True):
        assert result is not None, call.tool_call_id
        kind = call.tool_call_id.rsplit("_", 1)[0]
        lifecycle, evidence, code = EXPECTED[kind]
        model, control = loads(result.model), loads(result.control)
        assert result.lifecycle is LifecycleStatus(lifecycle)
        assert model["evidence_status"] == evidence, call.tool_call_id
        assert (model.get("error") or {}).get("code") == code
        assert control["timings"]["total_ms"] >= control["timings"]["queue_ms"] >= 0
    ids = [c.tool_call_id for c in calls] + ["traced"]
    assert_exactly_once(await books(redis, prefix, "imm"), ids)
    assert (await redis.xpending(Keys(prefix).invocations, GROUP))["pending"] == 0

    lines = [json.loads(line) for line in log_lines.getvalue().splitlines()]
    finished = [line for line in lines if line["msg"].startswith("finished")]
    assert len(finished) == len(ids)
    for line in finished:
        assert {"session", "tool", "tool_call_id", "entry_id"} <= set(line), line
        # An ERROR's line names its code (`finished ERROR/UNAVAILABLE`), not ERROR/ERROR.
        kind = (
            "found" if line["tool_call_id"] == "traced" else line["tool_call_id"].rsplit("_", 1)[0]
        )
        lifecycle, evidence, code = EXPECTED[kind]
        assert line["msg"].startswith(f"finished {lifecycle}/{code or evidence} "), line
    assert [line["tool_call_id"] for line in finished if line.get("trace_id")] == ["traced"]
    bugs = [
        line for line in lines if line["msg"] == "source for lookup_knowledge failed: RuntimeError"
    ]
    assert len(bugs) == 40 and all(line["tool_call_id"].startswith("bug_") for line in bugs)
    assert not any("a bug in the source" in line["msg"] for line in lines)


async def test_a_finish_refused_for_one_call_does_not_fail_its_batch(
    redis: Any, prefix: str, log_lines: io.StringIO
) -> None:
    settings = Settings(prefix=prefix, visibility_timeout_s=5.0, deadline_s=2.0)
    await redis.set(Keys(prefix).model("broken"), "not a stream")  # its finish is refused
    sources: dict[str, Any] = {"lookup_knowledge": ImmediateKnowledge()}
    async with EvidenceClient(redis, settings) as client:
        await client.submit_many("broken", [call_of("found", 0)])
        calls = [call_of("found", i) for i in range(1, 30)]
        await client.submit_many("fine", calls)
        async with running_worker(redis, settings, sources):
            found = await client.wait("fine", [c.tool_call_id for c in calls], timeout=20)
    assert len(found) == len(calls)
    lines = [json.loads(line) for line in log_lines.getvalue().splitlines()]
    refused = [line["msg"] for line in lines if line["msg"].startswith("finish refused")]
    assert refused and all("WRONGTYPE" in msg and "1 left for takeover" in msg for msg in refused)
    finished = [line for line in lines if line["msg"].startswith("finished")]
    assert sorted(line["tool_call_id"] for line in finished) == sorted(found)
