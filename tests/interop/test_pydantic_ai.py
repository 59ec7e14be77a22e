"""Pydantic AI's MCP toolset (pydantic-ai-slim[mcp], fastmcp 3, pinned by `make interop`)
against `aci-evidence mcp` over stdio and Streamable HTTP, driven by a scripted model
(`FunctionModel`, no LLM): list, each tool in one parallel turn with the model's call id
through `process_tool_call`, and an ERROR result that is information for the model
(`tool_error_behavior="failed"`), not a retry that ends the run."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.interop.servers import (
    fresh_prefix,
    http_server,
    queue_env,
    server_env,
    stdio_command,
)

CALLS = [
    ("lookup_knowledge", {"query": "connection pool exhausted"}, "call_a"),
    ("query_logs", {"topic": "APPLICATION", "query": "no-such-term-xyz"}, "call_b"),
    ("query_mysql", {"data_source": "nope", "sql": "SELECT 1"}, "call_c"),
]
META_KEY = "dev.aci-evidence/tool_call_id"


async def call_id_meta(ctx: Any, call_tool: Any, name: str, args: dict[str, Any]) -> Any:
    """docs/adapters.md: the model's call id into `_meta`."""
    return await call_tool(name, args, metadata={META_KEY: ctx.tool_call_id})


def scripted(listed: list[str]) -> FunctionModel:
    """A model that calls the three tools at once, then answers with what it read."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        listed[:] = [t.name for t in info.function_tools]
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart(n, a, tool_call_id=i) for n, a, i in CALLS])
        returned = {
            part.tool_call_id: part.model_response_str() if hasattr(part, "model_response_str")
            else str(part.content)
            for message in messages if isinstance(message, ModelRequest)
            for part in message.parts if hasattr(part, "tool_call_id")
        }  # fmt: skip
        return ModelResponse(parts=[TextPart(json.dumps(returned))])

    return FunctionModel(respond)


def toolset(
    transport: str, url: str | None = None, env: dict[str, str] | None = None
) -> MCPToolset[Any]:
    if transport == "http":
        client: Any = url
    else:
        command, args = stdio_command(*([] if env else ["--local"]))
        client = StdioTransport(command, args, env=server_env(**(env or {})))
    return MCPToolset(
        client,
        tool_error_behavior="failed",
        process_tool_call=call_id_meta,
        init_timeout=60,
        read_timeout=60,
    )


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_list_each_tool_and_an_error_that_is_information(transport: str) -> None:
    listed: list[str] = []

    async def body(tools: MCPToolset[Any]) -> dict[str, str]:
        agent = Agent(scripted(listed), toolsets=[tools])
        result = await agent.run("why are orders timing out?")
        answer: dict[str, str] = json.loads(result.output)
        return answer

    if transport == "http":
        with http_server("--local") as url:
            answer = asyncio.run(body(toolset("http", url)))
    else:
        answer = asyncio.run(body(toolset("stdio")))
    assert listed == ["lookup_knowledge", "query_logs", "query_mysql"]
    assert '"EVIDENCE_FOUND"' in answer["call_a"] and '"call_a"' in answer["call_a"]
    assert '"NO_EVIDENCE"' in answer["call_b"]
    # The ERROR reached the model as the tool's result (with its id), and the run went on.
    # ToolFailed hands it over as {"error": "<the observation JSON>"}.
    failed = json.loads(json.loads(answer["call_c"])["error"])
    assert failed["evidence_status"] == "ERROR" and failed["tool_call_id"] == "call_c", answer


def burst_model(count: int) -> FunctionModel:
    """A model that makes `count` identical-looking calls in one turn, then returns their texts."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            name, arguments, _ = CALLS[0]
            return ModelResponse(
                parts=[ToolCallPart(name, arguments, tool_call_id=f"p{i}") for i in range(count)]
            )
        returned = {
            part.tool_call_id: part.model_response_str()
            for message in messages if isinstance(message, ModelRequest)
            for part in message.parts if hasattr(part, "model_response_str")
        }  # fmt: skip
        return ModelResponse(parts=[TextPart(json.dumps(returned))])

    return FunctionModel(respond)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_burst_of_twenty_parallel_calls(transport: str) -> None:
    async def body(tools: MCPToolset[Any]) -> dict[str, str]:
        result = await Agent(burst_model(20), toolsets=[tools]).run("go")
        answer: dict[str, str] = json.loads(result.output)
        return answer

    if transport == "http":
        with http_server("--local") as url:
            answer = asyncio.run(body(toolset("http", url)))
    else:
        answer = asyncio.run(body(toolset("stdio")))
    assert sorted(answer) == sorted(f"p{i}" for i in range(20))
    for call_id, text in answer.items():
        observation = json.loads(text)
        assert observation["evidence_status"] == "EVIDENCE_FOUND"
        assert observation["tool_call_id"] == call_id


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_call_that_cannot_be_final_is_answered_pending_in_time(transport: str) -> None:
    # Queue mode, no worker: the answer is the pending observation within the server's 4 s.
    prefix = fresh_prefix()

    async def body(tools: MCPToolset[Any]) -> dict[str, str]:
        result = await Agent(burst_model(1), toolsets=[tools]).run("go")
        answer: dict[str, str] = json.loads(result.output)
        return answer

    if transport == "http":
        with http_server(env=queue_env(prefix)) as url:
            answer = asyncio.run(body(toolset("http", url)))
    else:
        answer = asyncio.run(body(toolset("stdio", env=queue_env(prefix))))
    pending = json.loads(answer["p0"])
    assert pending["pending"] is True and pending["tool_call_id"] == "p0", pending
