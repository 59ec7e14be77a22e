"""MCP cancellation and progress for queued calls (issue 32), with the official `mcp` SDK
client: a client that cancels a `tools/call` (the SDK sends `notifications/cancelled` on stdio
and 2025-11-25 HTTP, closes the response stream on 2026-07-28 HTTP) cancels the queued call,
which ends ERROR/CANCELLED; a request with `_meta.progressToken` hears strictly increasing
`notifications/progress` through queued → admitted → running (attempt 1) → final."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from hosts import mcp_server
from hosts.mcp_server import TOOL_CALL_ID_META_KEY, ServeOptions
from pipeline.cancel import Stage
from pipeline.client import EvidenceClient
from pipeline.settings import Settings
from tests.conftest import REDIS_URL
from tests.hosts.test_mcp_http import serving
from tests.pipeline.helpers import running_worker
from tests.pipeline.sources import InstantSource

pytest.importorskip("mcp")
pytestmark = pytest.mark.redis
REPO = Path(__file__).resolve().parents[2]


class SlowSource(InstantSource):
    """Takes `delay` seconds; counts the calls it was stopped in."""

    def __init__(self, delay: float = 20.0) -> None:
        super().__init__(delay)
        self.stopped = 0

    async def fetch(self, request: Any) -> Any:
        try:
            return await super().fetch(request)
        except anyio.get_cancelled_exc_class():
            self.stopped += 1
            raise


def _settings(prefix: str) -> Settings:
    return Settings(prefix=prefix, deadline_s=30.0, visibility_timeout_s=40.0)


async def _cancelled_once(evidence: EvidenceClient, session: str, tool_call_id: str) -> None:
    final = await evidence.wait(session, [tool_call_id], timeout=10)
    assert json.loads(bytes(final[tool_call_id].model))["error"]["code"] == "CANCELLED"


async def _call_then_cancel(
    client: Any, evidence: EvidenceClient, session: str, tool_call_id: str
) -> None:
    # Cancels the scope around `call_tool` once the call is running on the worker.
    async with anyio.create_task_group() as group:
        group.start_soon(
            lambda: client.call_tool(
                "lookup_knowledge", {"query": "pool"}, meta={TOOL_CALL_ID_META_KEY: tool_call_id}
            )
        )
        with anyio.fail_after(20):
            async for step in evidence.follow(session, tool_call_id):
                if step.stage is Stage.RUNNING:
                    break
        group.cancel_scope.cancel()


async def test_progress_notifications_increase_and_a_cancel_ends_the_call(
    redis: Any, prefix: str
) -> None:
    from mcp import Client

    settings = _settings(prefix)
    source = SlowSource(delay=1.0)
    heard: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, message))

    async with (
        EvidenceClient(redis, settings) as evidence,
        running_worker(redis, settings, {"lookup_knowledge": source}),
    ):
        server = mcp_server.build_server(mcp_server.queue_runner(evidence, 20.0), session="m1")
        async with Client(server) as client:
            found = await client.call_tool(
                "lookup_knowledge", {"query": "pool"}, progress_callback=on_progress,
                meta={TOOL_CALL_ID_META_KEY: "p1", "progressToken": "tok-1"},
            )  # fmt: skip
            assert found.structured_content["evidence_status"] == "EVIDENCE_FOUND"
            # No token: nothing reported (today's behaviour).
            before = len(heard)
            await client.call_tool(
                "lookup_knowledge", {"query": "pool"}, progress_callback=on_progress,
                meta={TOOL_CALL_ID_META_KEY: "p2"},
            )  # fmt: skip
            assert len(heard) == before
            source.delay = 20.0
            await _call_then_cancel(client, evidence, "m1", "p3")
        await _cancelled_once(evidence, "m1", "p3")
    values = [p for p, _m in heard]
    assert values == sorted(set(values)) and len(values) >= 2  # strictly increasing
    messages = [m for _p, m in heard]
    assert "running (attempt 1)" in messages and messages[-1] == "final"
    assert source.stopped == 1


async def test_stdio_notifications_cancelled_cancels_the_queued_call(
    redis: Any, prefix: str
) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    settings = _settings(prefix)
    source = SlowSource()
    env = dict(os.environ, ACI_REDIS_URL=REDIS_URL, ACI_PREFIX=prefix, PYTHONPATH=str(REPO))
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "app.cli", "mcp", "--session", "stdio-1", "--timeout", "30"],
        cwd=str(REPO),
        env=env,
    )
    async with (
        EvidenceClient(redis, settings) as evidence,
        running_worker(redis, settings, {"lookup_knowledge": source}),
    ):
        for mode in ("legacy", "2026-07-28"):
            async with Client(params, read_timeout_seconds=60, mode=mode) as client:
                await _call_then_cancel(client, evidence, "stdio-1", f"s-{mode}")
                await _cancelled_once(evidence, "stdio-1", f"s-{mode}")
    assert source.stopped == 2


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_http_cancel_cancels_the_queued_call(redis: Any, prefix: str, mode: str) -> None:
    from mcp import Client

    settings = _settings(prefix)
    source = SlowSource()
    async with (
        EvidenceClient(redis, settings) as evidence,
        running_worker(redis, settings, {"lookup_knowledge": source}),
    ):
        server = mcp_server.build_server(
            mcp_server.queue_runner(evidence, 30.0), session="h1", http=True
        )
        app = mcp_server.http_app(server, ServeOptions(http_port=1))
        async with serving(app) as url, Client(url, mode=mode) as client:
            await _call_then_cancel(client, evidence, "h1", f"h-{mode}")
            await _cancelled_once(evidence, "h1", f"h-{mode}")
    assert source.stopped == 1


async def test_local_calls_report_running_then_final_when_asked() -> None:
    """`--local` (no queue): a token hears running (attempt 1) then final; none without."""
    from mcp import Client

    heard: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, message))

    sources = {"lookup_knowledge": InstantSource(delay=0.2)}
    server = mcp_server.build_server(mcp_server.local_runner(sources, Settings()), session="l1")
    async with Client(server) as client:
        found = await client.call_tool(
            "lookup_knowledge", {"query": "pool"}, progress_callback=on_progress,
            meta={TOOL_CALL_ID_META_KEY: "l1", "progressToken": "tok-l"},
        )  # fmt: skip
        assert found.structured_content["evidence_status"] == "EVIDENCE_FOUND"
        assert heard == [(3.0, "running (attempt 1)"), (1000.0, "final")]
        await client.call_tool(
            "lookup_knowledge", {"query": "pool"}, progress_callback=on_progress,
            meta={TOOL_CALL_ID_META_KEY: "l2"},
        )  # fmt: skip
    assert len(heard) == 2
