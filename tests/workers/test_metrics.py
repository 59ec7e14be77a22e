"""Worker metrics (exact counts for a known workload), structured logs and trace context."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from pipeline.client import EvidenceClient, ToolCall
from pipeline.keys import GROUP, Keys
from pipeline.redis_io import ensure_group
from pipeline.settings import Settings
from tests.logging_capture import root_restored
from tests.pipeline.helpers import admit
from tests.pipeline.sources import FailingSource, HangingSource, InstantSource
from workers.logging_setup import configure_logging, parse_traceparent, span
from workers.metrics import WorkerMetrics, serve_metrics
from workers.runtime import run_worker

pytestmark = pytest.mark.redis

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
SECRET = "s3cr3t-pass"


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    with root_restored() as buffer:
        configure_logging("INFO", json_lines=True, stream=buffer)
        yield buffer


def call(tool: str, i: int, **arguments: Any) -> ToolCall:
    return ToolCall(tool=tool, tool_call_id=f"{tool}-{i}", arguments=arguments)


async def run_workload(redis: Any, settings: Settings, metrics: WorkerMetrics) -> None:
    keys = Keys(settings.prefix)
    sources = {
        "lookup_knowledge": InstantSource(),
        "query_logs": HangingSource(),
        "query_mysql": FailingSource(),
    }
    workload = [call("lookup_knowledge", i, query=f"pool {i}") for i in range(4)]
    workload += [
        call("lookup_knowledge", 4, query="nothing"),
        call("lookup_knowledge", 5, query=" "),  # SCHEMA error: no source involved
        call("query_logs", 0, topic="APPLICATION", query="timeout"),  # deadline missed
        call("query_mysql", 0, data_source="orders", sql="SELECT 1"),  # source unavailable
    ]
    stop = anyio.Event()
    async with EvidenceClient(redis, settings) as client:
        # One invocation read by a consumer that dies: taken over, then given up.
        await ensure_group(redis, keys)
        await client.submit_many("m1", [call("lookup_knowledge", 9, query="lost")])
        await admit(redis, settings)  # a worker's admission makes it an invocation
        await redis.xreadgroup(GROUP, "ghost", {keys.invocations: ">"}, count=1)
        await redis.xadd(keys.invocations, {"d": b"not an envelope"})  # dead-lettered
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                lambda: run_worker(
                    redis, settings, sources, concurrency=8, stop=stop, metrics=metrics
                )
            )
            await client.submit_many("m1", workload, traceparent=TRACEPARENT)
            ids = [c.tool_call_id for c in workload] + ["lookup_knowledge-9"]
            done = await client.wait("m1", ids, 15)
            assert set(done) == set(ids)
            stop.set()


async def test_metrics_reflect_a_known_workload_exactly(
    redis: Any, prefix: str, log_lines: io.StringIO
) -> None:
    settings = Settings(prefix=prefix, visibility_timeout_s=0.8, deadline_s=0.3, max_attempts=1)
    metrics = WorkerMetrics()
    with serve_metrics(metrics, 0, addr="127.0.0.1") as port:
        await run_workload(redis, settings, metrics)
        text = (await anyio.to_thread.run_sync(httpx.get, f"http://127.0.0.1:{port}/metrics")).text
    v = metrics.value
    inv = "aci_invocations_total"
    assert v(inv, tool="lookup_knowledge", lifecycle="READY", evidence_status="EVIDENCE_FOUND") == 4
    assert v(inv, tool="lookup_knowledge", lifecycle="READY", evidence_status="NO_EVIDENCE") == 1
    assert v(inv, tool="lookup_knowledge", lifecycle="ERROR", evidence_status="ERROR") == 2
    assert v(inv, tool="query_logs", lifecycle="ERROR", evidence_status="ERROR") == 1
    assert v(inv, tool="query_mysql", lifecycle="ERROR", evidence_status="ERROR") == 1
    assert v("aci_timeouts_total", tool="query_logs") == 1
    assert v("aci_source_errors_total", tool="query_mysql", code="UNAVAILABLE") == 1
    assert v("aci_takeovers_total") == 1
    assert v("aci_give_ups_total", tool="lookup_knowledge") == 1
    assert v("aci_dead_letters_total") == 1
    for stage in ("queue_wait", "execute", "project", "finish"):
        assert v("aci_stage_seconds_count", stage=stage) == 9
    assert v("aci_stage_seconds_sum", stage="execute") >= 0.3  # the missed deadline
    assert (
        'aci_invocations_total{evidence_status="NO_EVIDENCE",lifecycle="READY",tool="lookup_knowledge"} 1.0'
        in text
    )
    # A second worker's registry is its own.
    assert WorkerMetrics().value("aci_takeovers_total") == 0

    lines = [json.loads(line) for line in log_lines.getvalue().splitlines()]
    finished = [line for line in lines if line["msg"].startswith("finished")]
    assert len(finished) == 9
    for line in finished:
        assert {"session", "tool", "tool_call_id", "entry_id"} <= set(line), line
    traced = [line for line in finished if line.get("trace_id")]
    assert len(traced) == 8 and all(t["trace_id"] == TRACEPARENT[3:35] for t in traced)
    assert any(line["msg"].startswith("took over") and "entry_id" in line for line in lines)
    assert not any("Connection pool exhausted" in line["msg"] for line in lines)  # no bodies


def test_log_lines_mask_credentials_in_urls() -> None:
    with root_restored() as buffer:
        configure_logging("INFO", json_lines=True, stream=buffer)
        logging.getLogger("aci.test").warning("cannot reach redis://user:%s@db:6379/0", SECRET)
        configure_logging("INFO", stream=buffer)
        logging.getLogger("aci.test").warning("cannot reach mysql://root:%s@db/x", SECRET)
        # urllib3's retry warning (clickhouse-connect over HTTP) named the server as keywords.
        logging.getLogger("urllib3.connectionpool").warning(
            "Retrying after connection broken by 'NewConnectionError(\"HTTPConnection("
            "host='ch.internal', port=8124): Failed to establish a new connection\")'"
        )
    out = buffer.getvalue()
    assert SECRET not in out and "redis://user:***@db:6379/0" in out and "root:***@db" in out
    assert "ch.internal" not in out and "8124" not in out and "host=<address>" in out


def test_traceparent_parsing_and_spans() -> None:
    parsed = parse_traceparent(TRACEPARENT)
    assert parsed is not None and parsed.trace_id == TRACEPARENT[3:35]
    for bad in (
        "",
        "00-xyz",
        "ff-" + TRACEPARENT[3:],
        TRACEPARENT.replace("4bf9", "0000")[:3] + "0" * 32 + TRACEPARENT[35:],
        42,
    ):
        assert parse_traceparent(bad) is None, bad
    trace = pytest.importorskip("opentelemetry.trace")
    with span("aci.invocation", parsed, tool="query_logs"), span("aci.stages", None):
        context = trace.get_current_span().get_span_context()
        assert f"{context.trace_id:032x}" == parsed.trace_id
