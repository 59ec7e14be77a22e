"""MCP tasks (`io.modelcontextprotocol/tasks`, 2026-07-28 Streamable HTTP) over the queue
(issue 32): advertised in `server/discover`; a call not final within the short wait becomes a
task only once admitted; `tasks/get` from a second server instance inlines the result;
`tasks/cancel` ends a running call CANCELLED; `tasks/update`, forged or unknown ids and
requests without the extension are refused."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from hosts import mcp_server
from hosts.mcp_server import TOOL_CALL_ID_META_KEY, ServeOptions
from hosts.mcp_tasks import TASKS_EXTENSION, TaskHandles, enable_tasks
from pipeline.client import EvidenceClient
from pipeline.settings import Settings
from tests.hosts.test_mcp_http import ACCEPT, serving, sse_result
from tests.pipeline.helpers import running_worker
from tests.pipeline.sources import InstantSource, answer

pytest.importorskip("mcp")
pytestmark = pytest.mark.redis
MODERN = "2026-07-28"
WITH_TASKS = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
}
WITHOUT = {**WITH_TASKS, "io.modelcontextprotocol/clientCapabilities": {}}


class SlowSource(InstantSource):
    def __init__(self) -> None:
        super().__init__(delay=20.0)
        self.stopped = 0

    async def fetch(self, request: Any) -> Any:
        if "quick" in getattr(request, "query", ""):
            return answer(request.query)
        try:
            return await super().fetch(request)
        except anyio.get_cancelled_exc_class():
            self.stopped += 1
            raise


async def rpc(
    http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any], meta: Any = None
) -> dict[str, Any]:
    headers = {"mcp-protocol-version": MODERN, "mcp-method": method}
    name = params.get("name") or params.get("taskId")
    if name:
        headers["mcp-name"] = str(name)
    body = {"jsonrpc": "2.0", "id": 1, "method": method,
            "params": {**params, "_meta": WITH_TASKS if meta is None else meta}}  # fmt: skip
    response = await http.post(url, json=body, headers=headers)
    out: dict[str, Any] = sse_result(response)
    return out


async def settled(http: httpx.AsyncClient, url: str, task_id: str) -> dict[str, Any]:
    """`tasks/get` until the task is no longer working (10 s at most)."""
    for _ in range(50):
        got = await rpc(http, url, "tasks/get", {"taskId": task_id})
        if got["result"]["status"] != "working":
            return got
        await anyio.sleep(0.2)
    raise AssertionError("the task is still working")


def _server(evidence: EvidenceClient, key: bytes, settings: Settings) -> Any:
    server = mcp_server.build_server(mcp_server.queue_runner(evidence, 30.0), http=True)
    enable_tasks(server, evidence, TaskHandles(key), ttl_ms=settings.retention_s * 1000)
    return mcp_server.http_app(server, ServeOptions(http_port=1))


async def test_tasks_over_two_server_instances(redis: Any, prefix: str) -> None:
    settings = Settings(prefix=prefix, deadline_s=30.0, visibility_timeout_s=40.0)
    source = SlowSource()
    key = b"shared by both instances"
    async with (
        EvidenceClient(redis, settings) as first,
        EvidenceClient(redis, settings) as second,
        running_worker(redis, settings, {"lookup_knowledge": source}),
        serving(_server(first, key, settings)) as url_a,
        serving(_server(second, key, settings)) as url_b,
        httpx.AsyncClient(headers=ACCEPT, timeout=30) as http,
    ):
        found = await rpc(http, url_a, "server/discover", {})
        assert TASKS_EXTENSION in found["result"]["capabilities"]["extensions"]

        def call(query: str, tool_call_id: str) -> dict[str, Any]:
            return {"name": "lookup_knowledge", "arguments": {"query": query},
                    "_meta": {**WITH_TASKS, TOOL_CALL_ID_META_KEY: tool_call_id}}  # fmt: skip

        # Final within the short wait: the result itself, no task.
        quick = await rpc(
            http, url_a, "tools/call", call("quick", "t0"), call("quick", "t0")["_meta"]
        )
        assert quick["result"]["resultType"] == "complete"
        assert quick["result"]["structuredContent"]["evidence_status"] == "EVIDENCE_FOUND"
        # Without the extension: today's pending answer after the server's wait (not a task).
        # A slow call with it: a task, once admitted.
        slow = await rpc(http, url_a, "tools/call", call("slow", "t1"), call("slow", "t1")["_meta"])
        created = slow["result"]
        assert created["resultType"] == "task" and created["status"] == "working"
        assert isinstance(created["ttlMs"], int) and isinstance(created["pollIntervalMs"], int)
        task_id = created["taskId"]
        assert task_id != "1" and len(task_id) > 40  # never the request id; signed
        # The other instance answers tasks/get at once (the state is in Redis).
        got = await rpc(http, url_b, "tasks/get", {"taskId": task_id})
        assert got["result"]["status"] == "working", got
        assert got["result"]["statusMessage"].startswith("running")
        # tasks/cancel: an empty ack; the call ends CANCELLED and its source is stopped.
        ack = await rpc(http, url_b, "tasks/cancel", {"taskId": task_id})
        assert "error" not in ack
        done = await settled(http, url_a, task_id)
        assert done["result"]["status"] == "cancelled"
        # The task is cancelled once the mark is set; the worker running it hears the mark
        # at its next poll (every 0.2 s) and stops the source: within a second, not at once.
        for _ in range(50):  # 1 s at most
            if source.stopped:
                break
            await anyio.sleep(0.02)
        assert source.stopped == 1
        # tasks/cancel of a terminal task: still an empty ack.
        assert "error" not in await rpc(http, url_a, "tasks/cancel", {"taskId": task_id})
        # Refusals: tasks/update, a forged id, an id signed by another key, no extension.
        update = await rpc(http, url_a, "tasks/update", {"taskId": task_id, "inputResponses": {}})
        assert update["error"]["code"] == -32602
        forged = task_id[:-4] + ("AAAA" if not task_id.endswith("AAAA") else "BBBB")
        assert (await rpc(http, url_a, "tasks/get", {"taskId": forged}))["error"]["code"] == -32602
        other = TaskHandles(b"another key").encode(*TaskHandles(key).decode(task_id))  # type: ignore[misc]
        assert (await rpc(http, url_a, "tasks/get", {"taskId": other}))["error"]["code"] == -32602
        gated = await rpc(http, url_a, "tasks/get", {"taskId": task_id}, WITHOUT)
        assert gated["error"]["code"] == -32021
        assert (await rpc(http, url_a, "tasks/list", {}))["error"]["code"] == -32601


async def test_a_completed_task_inlines_its_result(redis: Any, prefix: str) -> None:
    settings = Settings(prefix=prefix, deadline_s=30.0, visibility_timeout_s=40.0)
    source = InstantSource(delay=2.5)  # slower than the short wait
    async with (
        EvidenceClient(redis, settings) as evidence,
        running_worker(redis, settings, {"lookup_knowledge": source}),
        serving(_server(evidence, b"k", settings)) as url,
        httpx.AsyncClient(headers=ACCEPT, timeout=30) as http,
    ):
        meta = {**WITH_TASKS, TOOL_CALL_ID_META_KEY: "t2"}
        params = {"name": "lookup_knowledge", "arguments": {"query": "pool"}, "_meta": meta}
        created = (await rpc(http, url, "tools/call", params, meta))["result"]
        assert created["resultType"] == "task"
        working = (await rpc(http, url, "tasks/get", {"taskId": created["taskId"]}))["result"]
        got = await settled(http, url, created["taskId"])
        await anyio.sleep(0.01)
        again = (await rpc(http, url, "tasks/get", {"taskId": created["taskId"]}))["result"]
    result = got["result"]
    # One task, one creation time: the CreateTaskResult said the answer's time and every
    # tasks/get the call's submission, a second earlier. lastUpdatedAt is when its state last
    # changed (it was each poll's own time): a finished task's no longer moves.
    assert working["createdAt"] == created["createdAt"] == result["createdAt"], (created, working)
    assert created["createdAt"] <= created["lastUpdatedAt"] <= working["lastUpdatedAt"]
    assert working["lastUpdatedAt"] < result["lastUpdatedAt"] == again["lastUpdatedAt"]
    assert result["status"] == "completed" and result["resultType"] == "complete"
    assert result["result"]["isError"] is False
    assert result["result"]["structuredContent"]["tool_call_id"] == "t2"
    assert result["result"]["structuredContent"]["evidence_status"] == "EVIDENCE_FOUND"


def test_task_ids_are_never_signed_with_the_bearer_token(monkeypatch: pytest.MonkeyPatch) -> None:
    # Review: without ACI_MCP_TASK_KEY the handles were keyed by the HTTP bearer token, which
    # every client holds: any client could sign a task id for any (session, call) it named.
    import inspect

    # The server built its handles with `from_env(options.token)`: nothing can pass it now.
    assert not inspect.signature(TaskHandles.from_env).parameters
    monkeypatch.delenv("ACI_MCP_TASK_KEY", raising=False)
    monkeypatch.setenv("ACI_MCP_TOKEN", "the bearer token")
    served = TaskHandles.from_env()
    forged = TaskHandles(b"the bearer token").encode("mcp-victim", "7")
    assert served.decode(forged) is None
    assert served.decode(served.encode("mcp-victim", "7")) == ("mcp-victim", "7")
    monkeypatch.setenv("ACI_MCP_TASK_KEY", "deployment key")
    shared = TaskHandles(b"deployment key").encode("s", "1")
    assert TaskHandles.from_env().decode(shared) == ("s", "1")
