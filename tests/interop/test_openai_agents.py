"""The OpenAI Agents SDK's MCP client (openai-agents, pinned by `make interop`) against
`aci-evidence mcp` over stdio and Streamable HTTP, with its default settings except where
docs/adapters.md says otherwise: list, each tool through the SDK's own invocation path (the
model's call id through `tool_meta_resolver`), an ERROR result, 20 parallel calls, and the
default 5 s client timeout meeting a call that cannot be final (queue mode, no worker)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

pytest.importorskip("agents")

from agents.mcp import MCPServerStdio, MCPServerStreamableHttp
from agents.mcp.util import MCPUtil
from agents.run_context import RunContextWrapper
from agents.tool_context import ToolContext

from tests.interop.servers import (
    flood,
    fresh_prefix,
    http_server,
    queue_env,
    server_env,
    stdio_command,
)

FOUND = ("lookup_knowledge", {"query": "connection pool exhausted"})
EMPTY = ("query_logs", {"topic": "APPLICATION", "query": "no-such-term-xyz"})
REFUSED = ("query_mysql", {"data_source": "nope", "sql": "SELECT 1"})
META_KEY = "dev.aci-evidence/tool_call_id"


def call_id_meta(ctx: Any) -> dict[str, Any] | None:
    """docs/adapters.md: the model's call id into `_meta`."""
    run = ctx.run_context
    return {META_KEY: run.tool_call_id} if isinstance(run, ToolContext) else None


def make_server(
    transport: str, url: str | None = None, env: dict[str, str] | None = None, timeout: float = 5
) -> Any:
    """`timeout`: the SDK's `client_session_timeout_seconds` (its default 5; in-process
    (`--local`) calls have no pending answer, so a loaded machine needs more there)."""
    if transport == "http":
        return MCPServerStreamableHttp(
            params={"url": url}, tool_meta_resolver=call_id_meta,
            client_session_timeout_seconds=timeout,
        )  # fmt: skip
    command, args = stdio_command(*([] if env else ["--local"]))
    params = {"command": command, "args": args, "env": server_env(**(env or {}))}
    return MCPServerStdio(
        params=params, tool_meta_resolver=call_id_meta,  # type: ignore[arg-type]
        client_session_timeout_seconds=timeout,
    )  # fmt: skip


async def invoke(
    server: Any, tools: list[Any], name: str, args: dict[str, Any], call_id: str
) -> Any:
    """One call the way an agent run makes it (`MCPUtil.invoke_mcp_tool`, a ToolContext)."""
    [tool] = [t for t in tools if t.name == name]
    text = json.dumps(args)
    context = ToolContext(context=None, tool_name=name, tool_call_id=call_id, tool_arguments=text)
    return await MCPUtil.invoke_mcp_tool(server, tool, context, text)


def observation(output: Any) -> dict[str, Any]:
    """The model's text of a tool output (one text item, or a list of them)."""
    if isinstance(output, list):
        [output] = output
    text = output["text"] if isinstance(output, dict) else output
    decoded: dict[str, Any] = json.loads(text)
    return decoded


def run(transport: str, body: Any) -> None:
    if transport == "http":
        with http_server("--local") as url:
            asyncio.run(body(make_server("http", url, timeout=60)))
    else:
        asyncio.run(body(make_server("stdio", timeout=60)))


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_list_each_tool_an_error_and_a_burst(transport: str) -> None:
    async def body(server: Any) -> None:
        async with server:
            tools = await server.list_tools(RunContextWrapper(context=None))
            assert [t.name for t in tools] == ["lookup_knowledge", "query_logs", "query_mysql"]
            found = observation(await invoke(server, tools, *FOUND, "call_a"))
            empty = observation(await invoke(server, tools, *EMPTY, "call_b"))
            refused = observation(await invoke(server, tools, *REFUSED, "call_c"))
            burst = await asyncio.gather(
                *(invoke(server, tools, *FOUND, f"call_p{i}") for i in range(20))
            )
        assert found["evidence_status"] == "EVIDENCE_FOUND" and found["tool_call_id"] == "call_a"
        assert empty["evidence_status"] == "NO_EVIDENCE"
        # An ERROR result reaches the model as the observation, not as a failed run.
        assert refused["evidence_status"] == "ERROR" and refused["tool_call_id"] == "call_c"
        assert [observation(o)["tool_call_id"] for o in burst] == [f"call_p{i}" for i in range(20)]

    run(transport, body)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_default_five_second_client_timeout_gets_a_pending_answer(transport: str) -> None:
    # Before: the server's pending answer came at 30 s, the SDK gave up at 5 s and the model
    # read "An error occurred while running the tool. Please try again."
    prefix = fresh_prefix()

    async def body(server: Any) -> None:
        assert server.client_session_timeout_seconds == 5  # the SDK's default, kept
        async with server:
            tools = await server.list_tools(RunContextWrapper(context=None))
            started = time.monotonic()
            pending = observation(await invoke(server, tools, *FOUND, "call_slow"))
            assert time.monotonic() - started < 5.0
        assert pending["pending"] is True and pending["tool_call_id"] == "call_slow", pending

    if transport == "http":
        with http_server(env=queue_env(prefix)) as url:
            asyncio.run(body(make_server("http", url)))
    else:
        asyncio.run(body(make_server("stdio", env=queue_env(prefix))))


def test_eviction_pressure_never_closes_a_held_session() -> None:
    # The Agents SDK on mcp 1.30 failed every call after its session was closed for room
    # ("Session terminated"): 100 new sessions of the same address must not close it.
    async def body(server: Any) -> None:
        async with server:
            tools = await server.list_tools(RunContextWrapper(context=None))
            await invoke(server, tools, *FOUND, "call_before")
            await flood(server.params["url"], 100)
            after = observation(await invoke(server, tools, *FOUND, "call_after"))
        assert (
            after["evidence_status"] == "EVIDENCE_FOUND" and after["tool_call_id"] == "call_after"
        )

    with http_server("--local") as url:
        asyncio.run(body(make_server("http", url, timeout=60)))
