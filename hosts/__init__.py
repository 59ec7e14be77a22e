"""Agent hosts: what sits between an agent runtime and the evidence tools.

`mcp_server` serves the three tools over MCP (stdio and Streamable HTTP) to standard hosts; it
is not imported here (it needs the optional `mcp` SDK). The other modules are thin adapters
between runtimes' native tool-call objects and the evidence queue: one module per runtime
(`openai_chat`, `openai_responses`, `anthropic`, `langchain`), each with `read_tool_calls`
(native object → `ToolCall`s), `format_result` (one call and its
`CallResult` → the runtime's native answer; pure) and `answer_tool_calls` (the whole turn,
submitted at once and awaited in parallel). The model-facing text is always the Model
Observation as compact JSON; the Harness Control View stays out of the model's messages.
`langchain_tools` (not imported here: it needs `langchain-core`) has the three tools as
LangChain `BaseTool`s for a stock LangGraph `ToolNode`.
"""

from __future__ import annotations

from hosts import anthropic, langchain, openai_chat, openai_responses
from hosts.turn import (
    NO_EVIDENCE_NOTE,
    PENDING_MESSAGE,
    AdapterError,
    pending_observation,
)

__all__ = [
    "NO_EVIDENCE_NOTE",
    "PENDING_MESSAGE",
    "AdapterError",
    "anthropic",
    "langchain",
    "openai_chat",
    "openai_responses",
    "pending_observation",
]
