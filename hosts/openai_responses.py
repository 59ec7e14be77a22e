"""OpenAI Responses: `function_call` output items → `function_call_output` input items.

    outputs = await openai_responses.answer_tool_calls(response.output, client, "sess-1")
    next_input = [*response.output, *outputs]   # or previous_response_id + outputs

Results pair on `call_id`, never on the item `id`. Every call is answered, in order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hosts.turn import answer_calls, field, items, model_text
from pipeline.client import CallResult, EvidenceClient, ToolCall
from pipeline.window import AsOf

__all__ = ["answer_tool_calls", "format_result", "read_tool_calls"]


def read_tool_calls(output: object) -> list[ToolCall]:
    """The `function_call` items of a response (dict or SDK object) or of its `output` list."""
    raw = output
    if isinstance(output, Mapping) or not isinstance(output, Sequence):
        raw = field(output, "output", "response")
    calls: list[ToolCall] = []
    for index, item in enumerate(items(raw, "response.output")):
        path = f"response.output[{index}]"
        if field(item, "type", path) != "function_call":
            continue  # reasoning, messages and other items need no answer
        calls.append(
            ToolCall(
                tool=str(field(item, "name", path) or ""),
                tool_call_id=field(item, "call_id", path),
                arguments=field(item, "arguments", path),
            )
        )
    return calls


def format_result(call: ToolCall, result: CallResult | None) -> dict[str, Any]:
    """The `{"type": "function_call_output", "call_id", "output"}` item answering one call."""
    return {
        "type": "function_call_output",
        "call_id": call.tool_call_id,
        "output": model_text(call, result),
    }


async def answer_tool_calls(
    output: object,
    client: EvidenceClient,
    session_id: str,
    *,
    timeout: float = 30.0,
    as_of: AsOf | None = None,
) -> list[dict[str, Any]]:
    """Run every `function_call` of the response in parallel; one output item per call.
    `as_of` (the harness's, never the model's) pins the log calls to an incident time.
    """
    calls = read_tool_calls(output)
    results = await answer_calls(client, session_id, calls, timeout, as_of)
    return [format_result(c, r) for c, r in zip(calls, results, strict=True)]
