"""Every tool export and every adapter answer, validated against the official SDKs' own
types (`openai`, `anthropic`, `mcp`, `langchain-core`), not against our idea of them.

The `openai` and `anthropic` param types are TypedDicts, which pydantic validates by
dropping unknown keys; so each check also asserts that validation returned the value
unchanged (no key dropped, nothing coerced).
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter

from contracts import export_tools
from hosts import anthropic, langchain, openai_chat, openai_responses
from hosts.mcp_server import call_tool_result, list_tools_result, read_call
from tests.hosts.test_adapters import (
    anthropic_message,
    chat_message,
    golden_turn,
    langchain_calls,
    responses_output,
)

openai_types = pytest.importorskip("openai.types")
anthropic_types = pytest.importorskip("anthropic.types")


def materialised(value: Any) -> Any:
    """The validated value with every lazily validated iterable (`Iterable[...]` fields)
    drawn out, which also runs their validation."""
    if isinstance(value, dict):
        return {k: materialised(v) for k, v in value.items()}
    if isinstance(value, list | tuple) or type(value).__name__ == "ValidatorIterator":
        return [materialised(v) for v in value]
    return value


def exactly(sdk_type: Any, value: Any) -> None:
    """`value` is a valid `sdk_type`, and validation kept every key and value as it was."""
    adapter = TypeAdapter(sdk_type)  # alive while the lazy iterables are drawn out
    validated = adapter.validate_python(value, strict=True)
    assert materialised(validated) == value


def test_exports_are_the_sdks_tool_params() -> None:
    from anthropic.types import ToolParam
    from mcp.types import ListToolsResult
    from openai.types.chat import ChatCompletionToolParam
    from openai.types.responses import FunctionToolParam

    for tool in export_tools("openai"):
        exactly(ChatCompletionToolParam, tool)
    for tool in export_tools("responses"):
        exactly(FunctionToolParam, tool)
    for tool in export_tools("anthropic"):
        exactly(ToolParam, tool)
    listed = ListToolsResult.model_validate(list_tools_result())
    tools = [t.model_dump(by_alias=True, exclude_none=True) for t in listed.tools]
    assert tools == export_tools("mcp")


def test_openai_chat_answers_are_tool_message_params() -> None:
    from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolMessageParam

    spec, results = golden_turn()
    message = chat_message(spec)
    exactly(ChatCompletionMessageParam, message)  # the turn we read is a real one
    calls = openai_chat.read_tool_calls(message)
    for call, result in zip(calls, results, strict=True):
        exactly(ChatCompletionToolMessageParam, openai_chat.format_result(call, result))


def test_openai_responses_answers_are_function_call_outputs() -> None:
    from openai.types.responses import ResponseInputParam
    from openai.types.responses.response_input_param import FunctionCallOutput

    spec, results = golden_turn()
    output = [item for item in responses_output(spec) if item["type"] == "function_call"]
    exactly(ResponseInputParam, output)
    calls = openai_responses.read_tool_calls({"output": output})
    answers = [openai_responses.format_result(c, r) for c, r in zip(calls, results, strict=True)]
    for answer in answers:
        exactly(FunctionCallOutput, answer)
    exactly(ResponseInputParam, [*output, *answers])  # the next request's input


def test_anthropic_answer_is_one_user_message_of_tool_result_blocks() -> None:
    from anthropic.types import MessageParam, ToolResultBlockParam

    spec, results = golden_turn()
    message = anthropic_message(spec)
    exactly(MessageParam, {k: v for k, v in message.items() if k != "stop_reason"})
    calls = anthropic.read_tool_calls(message)
    blocks = [anthropic.format_result(c, r) for c, r in zip(calls, results, strict=True)]
    for block in blocks:
        exactly(ToolResultBlockParam, block)
    exactly(MessageParam, anthropic.user_message(blocks))


def test_mcp_answers_are_call_tool_results() -> None:
    from mcp.types import CallToolResult

    spec, results = golden_turn()
    for (tool_call_id, tool, arguments), result in zip(spec, results, strict=True):
        wire = call_tool_result(read_call(tool, arguments, None, tool_call_id or None), result)
        dumped = CallToolResult.model_validate(wire).model_dump(by_alias=True, exclude_none=True)
        assert dumped.pop("resultType") == "complete"  # the SDK's default, added on the wire
        assert dumped == wire


def test_langchain_answers_are_tool_messages() -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.messages import AIMessage, ToolMessage

    spec, results = golden_turn()
    ai = AIMessage.model_validate(langchain_calls([s for s in spec if s[0]]))
    calls = langchain.read_tool_calls(ai)
    kept = [r for (i, *_), r in zip(spec, results, strict=True) if i]
    for call, result in zip(calls, kept, strict=True):
        fields = langchain.tool_message_fields(call, result)
        message = ToolMessage.model_validate(fields)
        assert {k: getattr(message, k) for k in fields} == fields


@pytest.mark.parametrize(
    "bad",
    [
        {"role": "tool", "tool_call_id": "c1", "content": "x", "is_error": True},  # unknown key
        {"role": "tool", "tool_call_id": 7, "content": "x"},  # not a string
        {"role": "tool", "content": "x"},  # no id
    ],
)
def test_exactly_refuses_what_the_sdk_would_not_take(bad: dict[str, Any]) -> None:
    from openai.types.chat import ChatCompletionToolMessageParam

    with pytest.raises((AssertionError, ValueError)):
        exactly(ChatCompletionToolMessageParam, bad)
