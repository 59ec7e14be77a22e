"""Anthropic Messages: `tool_use` blocks → ONE user message of `tool_result` blocks.

    reply = await anthropic.answer_tool_calls(response, client, "sess-1")
    messages += [{"role": "assistant", "content": response.content}, reply]

Every `tool_use` gets a `tool_result` in the next user message, in the calls' order, and the
message holds only those blocks (text, if you add any, must come after them). `is_error` is
true only for ERROR. Content is never empty: the observation JSON is always its first text
block, and a NO_EVIDENCE result adds one plain sentence saying the query ran and found
nothing in its scope.
"""

from __future__ import annotations

from typing import Any

from contracts import EvidenceStatus
from hosts.turn import (
    NO_EVIDENCE_NOTE,
    answer_calls,
    evidence_status,
    field,
    is_error,
    items,
    model_text,
)
from pipeline.client import CallResult, EvidenceClient, ToolCall
from pipeline.window import AsOf

__all__ = ["answer_tool_calls", "format_result", "read_tool_calls", "user_message"]


def read_tool_calls(message: object) -> list[ToolCall]:
    """The `tool_use` blocks of an assistant message or Messages response (dict or SDK object)."""
    content = field(message, "content", "message")
    if isinstance(content, str):
        return []  # plain text: nothing to answer
    calls: list[ToolCall] = []
    for index, block in enumerate(items(content, "message.content")):
        path = f"message.content[{index}]"
        if field(block, "type", path) != "tool_use":
            continue
        calls.append(
            ToolCall(
                tool=str(field(block, "name", path) or ""),
                tool_call_id=field(block, "id", path),
                arguments=field(block, "input", path),
            )
        )
    return calls


def format_result(call: ToolCall, result: CallResult | None) -> dict[str, Any]:
    """The `tool_result` block answering one `tool_use`."""
    content = [{"type": "text", "text": model_text(call, result)}]
    if evidence_status(result) is EvidenceStatus.NO_EVIDENCE:
        content.append({"type": "text", "text": NO_EVIDENCE_NOTE})
    return {
        "type": "tool_result",
        "tool_use_id": call.tool_call_id,
        "content": content,
        "is_error": is_error(result),
    }


def user_message(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """The one user message carrying every `tool_result` block of a turn."""
    return {"role": "user", "content": blocks}


async def answer_tool_calls(
    message: object,
    client: EvidenceClient,
    session_id: str,
    *,
    timeout: float = 30.0,
    as_of: AsOf | None = None,
) -> dict[str, Any] | None:
    """Run every `tool_use` of the turn in parallel; the user message answering all of them
    (None when the message has no `tool_use` block).
    `as_of` (the harness's, never the model's) pins the log calls to an incident time.
    """
    calls = read_tool_calls(message)
    if not calls:
        return None
    results = await answer_calls(client, session_id, calls, timeout, as_of)
    return user_message([format_result(c, r) for c, r in zip(calls, results, strict=True)])
