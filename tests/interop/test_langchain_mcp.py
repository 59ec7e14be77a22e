"""langchain-mcp-adapters (pinned by `make interop`) with LangGraph's ToolNode against
`aci-evidence mcp`, over stdio and Streamable HTTP: list, each tool, an ERROR result, a burst
of parallel calls, eviction pressure, and the default-timeout case through the queue."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("langchain_mcp_adapters")

from langchain_core.messages import AIMessage
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from tests.interop.servers import (
    flood,
    fresh_prefix,
    http_server,
    queue_env,
    server_env,
    stdio_command,
    worker,
)

FOUND = ("lookup_knowledge", {"query": "connection pool exhausted"})
EMPTY = ("query_logs", {"topic": "APPLICATION", "query": "no-such-term-xyz"})
REFUSED = ("query_mysql", {"data_source": "nope", "sql": "SELECT 1"})


def connection(transport: str, url: str | None = None, env: dict[str, str] | None = None) -> Any:
    if transport == "http":
        return {"transport": "streamable_http", "url": url}
    command, args = stdio_command(*([] if env else ["--local"]))
    return {
        "transport": "stdio",
        "command": command,
        "args": args,
        "env": server_env(**(env or {})),
    }


def graph(tools: list[Any]) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    return builder.compile()


async def turn(tools: list[Any], calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """One assistant turn of `calls` through a stock ToolNode; its ToolMessages."""
    message = AIMessage(
        content="",
        tool_calls=[
            {"name": n, "args": a, "id": f"call_{i}", "type": "tool_call"}
            for i, (n, a) in enumerate(calls)
        ],
    )
    out = await graph(tools).ainvoke({"messages": [message]})
    return list(out["messages"][1:])


def observation(message: Any) -> dict[str, Any]:
    content = message.content
    if isinstance(content, list):
        content = next(
            b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    decoded: dict[str, Any] = json.loads(content)
    return decoded


def with_server(transport: str, body: Callable[[Any], Any]) -> None:
    if transport == "http":
        with http_server("--local") as url:
            asyncio.run(body(connection("http", url)))
    else:
        asyncio.run(body(connection("stdio")))


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_list_each_tool_and_an_error_in_a_held_session(transport: str) -> None:
    async def body(conn: Any) -> None:
        client = MultiServerMCPClient({"aci": conn})
        async with client.session("aci") as session:
            tools = await load_mcp_tools(session)
            assert [t.name for t in tools] == ["lookup_knowledge", "query_logs", "query_mysql"]
            found, empty, refused = await turn(tools, [FOUND, EMPTY, REFUSED])
        assert observation(found)["evidence_status"] == "EVIDENCE_FOUND"
        assert observation(empty)["evidence_status"] == "NO_EVIDENCE"
        # An ERROR result is a ToolMessage the model reads, not an exception ending the run.
        assert refused.status == "error" and "ERROR" in str(refused.content)
        assert [m.tool_call_id for m in (found, empty, refused)] == ["call_0", "call_1", "call_2"]

    with_server(transport, body)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_burst_of_twenty_parallel_calls_in_a_held_session(transport: str) -> None:
    async def body(conn: Any) -> None:
        client = MultiServerMCPClient({"aci": conn})
        async with client.session("aci") as session:
            messages = await turn(await load_mcp_tools(session), [FOUND] * 20)
        assert [observation(m)["evidence_status"] for m in messages] == ["EVIDENCE_FOUND"] * 20

    with_server(transport, body)


def test_the_default_session_per_call_twenty_parallel_and_forty_five_in_a_row() -> None:
    # get_tools() opens one MCP session per call: one ToolNode turn of 20 ended with 429, and
    # 45 calls in a row lost 7 to "Too many new sessions" before the session policy.
    async def body(conn: Any) -> None:
        tools = await MultiServerMCPClient({"aci": conn}).get_tools()
        parallel = await turn(tools, [FOUND] * 20)
        in_a_row = [(await turn(tools, [FOUND]))[0] for _ in range(45)]
        for message in parallel + in_a_row:
            assert observation(message)["evidence_status"] == "EVIDENCE_FOUND", message

    with_server("http", body)


def test_eviction_pressure_never_closes_a_held_session() -> None:
    # A held session (its GET stream open) was closed for room by the same address's 17th
    # session, and every later call failed with "Session terminated" (mcp 1.x).
    async def body(conn: Any) -> None:
        client = MultiServerMCPClient({"aci": conn})
        async with client.session("aci") as session:
            tools = await load_mcp_tools(session)
            assert observation((await turn(tools, [FOUND]))[0])["evidence_status"]
            await flood(conn["url"], 100)
            after = await turn(tools, [FOUND])
        assert observation(after[0])["evidence_status"] == "EVIDENCE_FOUND"

    with_server("http", body)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_default_timeout_case_in_queue_mode(transport: str) -> None:
    # No worker yet: the call cannot be final. The server answers pending within its 4 s
    # (before the hosts' 5 s), and the same call made again, once a worker ran it, gets its
    # result without running it again.
    prefix = fresh_prefix()

    async def body(conn: Any) -> None:
        client = MultiServerMCPClient({"aci": conn})
        async with client.session("aci") as session:
            tools = await load_mcp_tools(session)
            started = time.monotonic()
            [pending] = await turn(tools, [FOUND])
            waited = time.monotonic() - started
            first = observation(pending)
            assert first["pending"] is True and "same arguments" in first["message"], first
            assert waited < 5.0, waited
            with worker(prefix):
                for _ in range(10):
                    again = observation((await turn(tools, [FOUND]))[0])
                    if not again.get("pending"):
                        break
        assert again["evidence_status"] == "EVIDENCE_FOUND"
        assert again["tool_call_id"] == first["tool_call_id"]

    if transport == "http":
        with http_server(env=queue_env(prefix)) as url:
            asyncio.run(body(connection("http", url)))
    else:
        asyncio.run(body(connection("stdio", env=queue_env(prefix))))
