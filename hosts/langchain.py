"""LangChain / LangGraph: an `AIMessage`'s `tool_calls` → `ToolMessage`s.

    async def evidence_node(state):                     # a LangGraph node
        reply = await langchain.answer_tool_calls(state["messages"][-1], client, "sess-1")
        return {"messages": reply}

`content` is the Model Observation (compact JSON), `artifact` the Harness Control View (a
dict the model never sees), `status` is "error" only for ERROR. `langchain_core` is an
optional dependency, imported only when a `ToolMessage` is built.

For a stock LangGraph `ToolNode` or `create_react_agent`, use the `BaseTool`s of
`hosts.langchain_tools.evidence_tools` instead of a node of your own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hosts.turn import (
    answer_calls,
    control_artifact,
    field,
    is_error,
    items,
    model_text,
)
from pipeline.client import CallResult, EvidenceClient, ToolCall
from pipeline.window import AsOf

if TYPE_CHECKING:
    from langchain_core.messages import ToolMessage

__all__ = ["answer_tool_calls", "format_result", "read_tool_calls", "tool_message_fields"]


def read_tool_calls(message: object) -> list[ToolCall]:
    """The calls of an `AIMessage` (or a dict with `tool_calls`, or a list of `ToolCall`s)."""
    raw = message if isinstance(message, Sequence) and not isinstance(message, str) else None
    if raw is None:
        raw = field(message, "tool_calls", "message")
    calls: list[ToolCall] = []
    for index, item in enumerate(items(raw, "message.tool_calls")):
        path = f"message.tool_calls[{index}]"
        args = field(item, "args", path)
        calls.append(
            ToolCall(
                tool=str(field(item, "name", path) or ""),
                tool_call_id=field(item, "id", path),
                arguments={} if args is None else args,
            )
        )
    return calls


def tool_message_fields(call: ToolCall, result: CallResult | None) -> dict[str, Any]:
    """The `ToolMessage` fields answering one call (pure; no LangChain needed)."""
    return {
        "content": model_text(call, result),
        "tool_call_id": call.tool_call_id,
        "name": str(call.tool),
        "artifact": control_artifact(call, result),
        "status": "error" if is_error(result) else "success",
    }


def format_result(call: ToolCall, result: CallResult | None) -> ToolMessage:
    """The `ToolMessage` answering one call (needs `langchain-core`)."""
    try:
        from langchain_core.messages import ToolMessage
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the LangChain adapter needs langchain-core: pip install langchain-core"
        ) from exc
    return ToolMessage(**tool_message_fields(call, result))


async def answer_tool_calls(
    message: object,
    client: EvidenceClient,
    session_id: str,
    *,
    timeout: float = 30.0,
    as_of: AsOf | None = None,
) -> list[ToolMessage]:
    """Run every call of the turn in parallel; one `ToolMessage` per call, in order.
    `as_of` (the harness's, never the model's) pins the log calls to an incident time.
    """
    calls = read_tool_calls(message)
    results = await answer_calls(client, session_id, calls, timeout, as_of)
    return [format_result(c, r) for c, r in zip(calls, results, strict=True)]
