"""A test-only fixture mode of the MCP server for the official conformance suite
(`@modelcontextprotocol/conformance`, tests/conformance): the suite's fixture tools, each
carried as a real `lookup_knowledge` call through the same machinery as every call (the
queue runner, the Redis request stream, a worker, `hosts.mcp_tasks`, `hosts.mcp_progress`).

- `greet` (name) → a call answered at once (a synchronous result);
- `slow_compute` (seconds, label) → a call whose source takes `seconds` (a task; cancellable);
- `failing_job` → a call whose source fails after 1.5 s (ERROR: a task `completed` with
  `isError`); declared `taskSupport: "required"` (without the extension: `-32021`);
- `test_tool_with_progress` → a call whose source takes 1.2 s (progress: queued → admitted →
  running → final).

`protocol_error_job`, `confirm_delete` and `multi_input` are not served: no evidence call ends
in a JSON-RPC fault or ever needs input (see docs/adapters.md).
"""

from __future__ import annotations

from typing import Any

import anyio

from contracts import ErrorCode
from hosts import mcp_server
from hosts.mcp_server import ServeOptions
from hosts.mcp_tasks import TaskHandles, enable_tasks
from pipeline.client import CallResult, EvidenceClient, ToolCall
from pipeline.settings import Settings
from tests.pipeline.sources import answer
from workers.sources import SourceError

__all__ = ["FIXTURE_TOOLS", "FixtureSource", "fixture_app"]

_OBJECT = {"type": "object", "additionalProperties": True}
FIXTURE_TOOLS: dict[str, dict[str, Any]] = {
    "greet": {"type": "object", "properties": {"name": {"type": "string"}}},
    "slow_compute": {
        "type": "object",
        "properties": {"seconds": {"type": "number"}, "label": {"type": "string"}},
    },
    "failing_job": _OBJECT,
    "test_tool_with_progress": _OBJECT,
}
REQUIRED: frozenset[str] = frozenset({"failing_job"})


class FixtureSource:
    """`lookup_knowledge`'s source in fixture mode: `sleep:S` answers after S seconds,
    `fail:S` fails after S seconds, anything else answers at once."""

    def __init__(self) -> None:
        self.stopped = 0

    async def fetch(self, request: Any) -> Any:
        query = str(getattr(request, "query", ""))
        verb, _, seconds = query.partition(":")
        if verb in ("sleep", "fail"):
            try:
                await anyio.sleep(float(seconds))
            except anyio.get_cancelled_exc_class():
                self.stopped += 1
                raise
        if verb == "fail":
            raise SourceError(ErrorCode.EXECUTION, "the fixture job failed")
        return answer(query)

    async def aclose(self) -> None:
        return None


def _as_evidence(call: ToolCall) -> ToolCall:
    args = call.arguments if isinstance(call.arguments, dict) else {}
    if call.tool == "greet":
        query = f"greet {args.get('name', '')}"
    elif call.tool == "slow_compute":
        query = f"sleep:{float(args.get('seconds', 1))}"
    elif call.tool == "failing_job":
        query = "fail:1.5"
    elif call.tool == "test_tool_with_progress":
        query = "sleep:1.2"
    else:
        return call
    return ToolCall(
        tool="lookup_knowledge", tool_call_id=call.tool_call_id, arguments={"query": query}
    )


def fixture_app(evidence: EvidenceClient, settings: Settings, key: bytes) -> Any:
    """The Streamable HTTP app of the fixture mode (tasks on, per-request sessions)."""
    import mcp.types as types

    inner = mcp_server.queue_runner(evidence, 30.0)

    async def run(call: ToolCall, session_id: str) -> CallResult | None:
        return await inner(_as_evidence(call), session_id)

    server = mcp_server.build_server(run, http=True)
    listed = mcp_server.list_tools_result()["tools"] + [
        {"name": name, "description": f"conformance fixture {name}", "inputSchema": schema,
         "execution": {"taskSupport": "required" if name in REQUIRED else "optional"}}
        for name, schema in FIXTURE_TOOLS.items()
    ]  # fmt: skip
    tools = types.ListToolsResult.model_validate({"tools": listed})

    async def on_list_tools(ctx: Any, params: Any) -> Any:
        return tools.model_copy(deep=True)

    plain = server.get_request_handler("tools/list")
    server.add_request_handler("tools/list", plain.params_type, on_list_tools)
    ttl_ms = settings.retention_s * 1000
    enable_tasks(server, evidence, TaskHandles(key), ttl_ms=ttl_ms, required=REQUIRED)
    return mcp_server.http_app(server, ServeOptions(http_port=1))
