"""The evidence tools in a stock LangGraph `ToolNode` and `create_react_agent`, with a fake
chat model that issues parallel tool calls (found, none, error, unknown tool), through the
real queue (a worker in this process, on the test's own key prefix)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from pydantic import Field

from contracts import input_schema
from pipeline.client import EvidenceClient, InvalidSessionId
from pipeline.settings import Settings
from tests.hosts.test_adapters import CONTROL_ONLY, GatedSource
from tests.pipeline.helpers import running_worker

pytest.importorskip("langgraph")
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, create_react_agent
from langgraph.warnings import LangGraphDeprecatedSinceV10

from hosts.langchain_tools import EvidenceTool, evidence_tools

# One assistant turn of four parallel calls: (id, tool, arguments).
TURN = [
    ("call_found", "lookup_knowledge", {"query": "pool exhausted"}),
    ("call_none", "lookup_knowledge", {"query": "nothing"}),
    ("call_bad", "query_logs", {"topic": "NOPE", "query": "timeout"}),
    ("call_unknown", "query_metrics", {"name": "cpu"}),
]


def turn_message() -> AIMessage:
    calls = [{"name": t, "args": a, "id": i, "type": "tool_call"} for i, t, a in TURN]
    return AIMessage(content="", tool_calls=calls)


class ToolCallingFake(GenericFakeChatModel):
    """GenericFakeChatModel that accepts `bind_tools` (as create_react_agent needs) and
    records what it was given."""

    bound: list[Any] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        self.bound.extend(convert_to_openai_tool(t) for t in tools)
        return self


def check_answers(messages: list[Any]) -> None:
    answers = [m for m in messages if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in answers] == [i for i, *_ in TURN]  # the model's own ids
    assert [m.status for m in answers] == ["success", "success", "error", "error"]
    found, none, bad, unknown = answers
    observations = [json.loads(m.content) for m in (found, none, bad)]
    assert [o["evidence_status"] for o in observations] == [
        "EVIDENCE_FOUND",
        "NO_EVIDENCE",
        "ERROR",
    ]
    assert [o["tool_call_id"] for o in observations] == ["call_found", "call_none", "call_bad"]
    assert observations[2]["error"]["code"] == "SCHEMA"
    for message in (found, none, bad):  # the control view is the artifact, never the content
        assert message.artifact["tool_call_id"] == message.tool_call_id
        assert message.artifact.get("scope_fingerprint") or message.status == "error"
        assert message.artifact["session_id"] == "lg-session"
        assert not any(word in message.content for word in CONTROL_ONLY)
    assert "not a valid tool" in unknown.content  # ToolNode's own answer for an unknown name


def sources() -> dict[str, Any]:
    return {"lookup_knowledge": GatedSource()}


@pytest.mark.redis
async def test_stock_tool_node_answers_parallel_calls_through_the_queue(
    redis: Any, prefix: str
) -> None:
    settings = Settings(prefix=prefix, visibility_timeout_s=10.0, deadline_s=5.0)
    async with (
        EvidenceClient(redis, settings) as client,
        running_worker(redis, settings, sources()),
    ):
        graph = StateGraph(MessagesState)
        graph.add_node("tools", ToolNode(evidence_tools(client, "lg-session", timeout=10.0)))
        graph.add_edge(START, "tools")
        graph.add_edge("tools", END)
        out = await graph.compile().ainvoke({"messages": [turn_message()]})
    check_answers(out["messages"])


@pytest.mark.redis
async def test_create_react_agent_runs_the_evidence_tools(redis: Any, prefix: str) -> None:
    def replies() -> Iterator[AIMessage]:
        yield turn_message()
        yield AIMessage(content="The pool is exhausted.")

    model = ToolCallingFake(messages=replies())
    settings = Settings(prefix=prefix, visibility_timeout_s=10.0, deadline_s=5.0)
    async with (
        EvidenceClient(redis, settings) as client,
        running_worker(redis, settings, sources()),
    ):
        tools = evidence_tools(client, "lg-session", timeout=10.0)
        # Still the stock prebuilt agent in LangGraph 1.x, which warns that it moves to
        # `langchain.agents.create_agent` (the `langchain` package) in 2.0.
        with pytest.warns(LangGraphDeprecatedSinceV10):
            agent = create_react_agent(model, tools)
        state = await agent.ainvoke({"messages": [HumanMessage("Why is checkout slow?")]})
    check_answers(state["messages"])
    assert state["messages"][-1].content == "The pool is exhausted."
    # The model was given exactly the exported definitions.
    names = [t["function"]["name"] for t in model.bound]
    assert names == ["lookup_knowledge", "query_logs", "query_mysql"]
    for tool in model.bound:
        assert tool["function"]["parameters"] == input_schema(tool["function"]["name"])


@pytest.mark.redis
async def test_bare_arguments_get_the_invalid_id_error_and_nothing_is_minted(
    redis: Any, prefix: str
) -> None:
    settings = Settings(prefix=prefix)
    async with EvidenceClient(redis, settings) as client:
        [knowledge, *_] = evidence_tools(client, "lg-session")
        text = await knowledge.ainvoke({"query": "pool"})  # no ToolCall, so no id
    observation = json.loads(text)
    assert observation["error"]["code"] == "INVALID_TOOL_CALL_ID"
    assert "tool_call_id" not in observation


@pytest.mark.redis
async def test_tools_are_async_only_and_need_a_valid_session(redis: Any, prefix: str) -> None:
    client = EvidenceClient(redis, Settings(prefix=prefix))  # never entered: nothing runs
    [knowledge, *_] = evidence_tools(client, "s")
    assert isinstance(knowledge, EvidenceTool)
    call = {"name": "lookup_knowledge", "args": {"query": "x"}, "id": "c1", "type": "tool_call"}
    with pytest.raises(NotImplementedError, match="ainvoke"):
        knowledge.invoke(call)
    with pytest.raises(InvalidSessionId):
        evidence_tools(client, "has space")
