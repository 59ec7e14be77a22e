"""LangChain / LangGraph: the three evidence tools as `BaseTool`s, for a stock `ToolNode` or
`create_react_agent`.

    async with EvidenceClient.connect() as client:
        tools = evidence_tools(client, "incident-42")
        agent = create_react_agent(model, tools)        # or ToolNode(tools) in a graph

One tool per evidence tool, built from the exported definitions (`export_tools("schema")`):
the model sees exactly the exported name, description and input schema. Invoked with the
model's `ToolCall` (as `ToolNode` does), a tool answers with a `ToolMessage` whose
`tool_call_id` is the call's own id, `content` the Model Observation JSON, `artifact` the
Harness Control View and `status` "error" only for ERROR. The arguments reach the pipeline
as the model wrote them, so a bad argument is the contract's typed SCHEMA error. Parallel
calls of one turn (ToolNode runs them concurrently) each go through the queue.

Needs `langchain-core` (imported by this module); async only, like the queue client.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool
from pydantic import ConfigDict

from contracts import export_tools
from hosts.langchain import format_result
from hosts.turn import model_text
from pipeline.client import EvidenceClient, InvalidSessionId, ToolCall
from pipeline.keys import is_valid_session_id

__all__ = ["EvidenceTool", "evidence_tools"]


class EvidenceTool(BaseTool):
    """One evidence tool answered through the queue (build them with `evidence_tools`)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: EvidenceClient
    session_id: str
    timeout: float = 30.0
    as_of: str | None = None  # the harness's incident time for query_logs (ISO 8601)

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        # The arguments go to the pipeline untouched (it decodes and reports them), and the
        # model's call id comes along: LangChain passes it here from the ToolCall input.
        return (), {"arguments": tool_input, "tool_call_id": tool_call_id}

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("evidence tools are async: use ainvoke (or an async graph)")

    async def _arun(self, *args: Any, **kwargs: Any) -> Any:
        call = ToolCall(
            tool=self.name, tool_call_id=kwargs["tool_call_id"], arguments=kwargs["arguments"]
        )
        result = await self.client.call(self.session_id, call, self.timeout, as_of=self.as_of)
        if call.tool_call_id is None:
            # Invoked with bare arguments: no call id, so the INVALID_TOOL_CALL_ID error as
            # text (a ToolMessage needs an id, and none is minted).
            return model_text(call, result)
        return format_result(call, result)


def evidence_tools(
    client: EvidenceClient, session_id: str, *, timeout: float = 30.0, as_of: str | None = None
) -> list[BaseTool]:
    """The three evidence tools, answering through `client` in `session_id`; `as_of` (ISO
    8601 with a zone) pins their log calls to an incident time."""
    if not is_valid_session_id(session_id):
        raise InvalidSessionId(session_id)
    return [
        EvidenceTool(
            name=tool["name"],
            description=tool["description"],
            args_schema=tool["schema"],
            client=client,
            session_id=session_id,
            timeout=timeout,
            as_of=as_of,
        )
        for tool in export_tools("schema")
    ]
