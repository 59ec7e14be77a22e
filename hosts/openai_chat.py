"""OpenAI Chat Completions: an assistant message's `tool_calls` → `role: "tool"` messages.

    reply = await openai_chat.answer_tool_calls(assistant_message, client, "sess-1")
    messages += [assistant_message, *reply]

Every call gets exactly one tool message, in the calls' order, whether it found evidence,
found nothing, failed or is still running. Chat Completions has no error flag, so an error
is said in the content itself (the observation's `evidence_status` and `error`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hosts.turn import answer_calls, field, items, model_text
from pipeline.client import CallResult, EvidenceClient, ToolCall
from pipeline.window import AsOf

__all__ = ["answer_tool_calls", "format_result", "read_tool_calls"]


def read_tool_calls(message: object) -> list[ToolCall]:
    """The calls of an assistant message (dict or SDK object), or of its `tool_calls` list."""
    raw = message if isinstance(message, Sequence) and not isinstance(message, str) else None
    if raw is None:
        raw = field(message, "tool_calls", "message")
    calls: list[ToolCall] = []
    for index, item in enumerate(items(raw, "message.tool_calls")):
        path = f"message.tool_calls[{index}]"
        function = field(item, "function", path)
        if function is None:
            function = {}
        calls.append(
            ToolCall(
                tool=str(field(function, "name", f"{path}.function") or ""),
                tool_call_id=field(item, "id", path),
                arguments=field(function, "arguments", f"{path}.function"),
            )
        )
    return calls


def format_result(call: ToolCall, result: CallResult | None) -> dict[str, Any]:
    """The `{"role": "tool", "tool_call_id", "content"}` message answering one call."""
    return {"role": "tool", "tool_call_id": call.tool_call_id, "content": model_text(call, result)}


async def answer_tool_calls(
    message: object,
    client: EvidenceClient,
    session_id: str,
    *,
    timeout: float = 30.0,
    as_of: AsOf | None = None,
) -> list[dict[str, Any]]:
    """Run every call of the turn in parallel; one tool message per call, in order.
    `as_of` (the harness's, never the model's) pins the log calls to an incident time.
    """
    calls = read_tool_calls(message)
    results = await answer_calls(client, session_id, calls, timeout, as_of)
    return [format_result(c, r) for c, r in zip(calls, results, strict=True)]
