"""`aci-evidence mcp`: the three evidence tools over stdio, with the official `mcp` SDK.

MCP's `tools/call` carries no tool call id of its own, so the host puts the framework's id
in the request's `_meta` under `dev.aci-evidence/tool_call_id`:

    {"method": "tools/call", "params": {"name": "query_logs", "arguments": {...},
     "_meta": {"dev.aci-evidence/tool_call_id": "call_7"}}}

Without a valid one the result is the contract's INVALID_TOOL_CALL_ID error (nothing is
minted). A result carries the Model Observation twice, as `structuredContent` and as one
text block of the same compact JSON; `isError` is true only for ERROR. The Harness Control
View is not sent: it stays on the session's control stream (queue mode) for the harness.

With `--local`, or when ACI_REDIS_URL is unset, the stages run in this process; otherwise
each call goes through the queue (`EvidenceClient`) under the `--session` id. `mcp` is an
optional dependency, imported only here.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Awaitable, Callable, Mapping
from importlib import metadata
from typing import TYPE_CHECKING, Any, Final

import msgspec
from msgspec import UNSET

from contracts import (
    ErrorCode,
    InvocationMeta,
    LifecycleStatus,
    control_view,
    encode_view,
    error_result,
    export_tools,
    is_valid_tool_call_id,
    observe,
)
from pipeline.adapters.turn import is_error, model_object, model_text
from pipeline.client import CallResult, EvidenceClient, ToolCall
from pipeline.keys import is_valid_session_id
from pipeline.redis_io import PipelineError
from pipeline.settings import Settings
from workers.source import Source

if TYPE_CHECKING:
    import mcp.types as mcp_types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "TOOL_CALL_ID_META_KEY",
    "Runner",
    "build_server",
    "call_tool_result",
    "list_tools_result",
    "local_runner",
    "queue_runner",
    "read_call",
    "serve",
]

TOOL_CALL_ID_META_KEY: Final = "dev.aci-evidence/tool_call_id"
DEFAULT_TIMEOUT_S: Final = 30.0

log = logging.getLogger("aci.mcp")

Runner = Callable[[ToolCall], Awaitable[CallResult | None]]


def read_call(name: str, arguments: object, meta: Mapping[str, Any] | None) -> ToolCall:
    """The framework tool call of one `tools/call` request (its id from `_meta`, if any)."""
    tool_call_id = None if meta is None else meta.get(TOOL_CALL_ID_META_KEY)
    return ToolCall(
        tool=name, tool_call_id=tool_call_id, arguments={} if arguments is None else arguments
    )


def call_tool_result(call: ToolCall, result: CallResult | None) -> dict[str, Any]:
    """The `CallToolResult` (wire shape) answering one call; pure."""
    return {
        "content": [{"type": "text", "text": model_text(call, result)}],
        "structuredContent": model_object(call, result),
        "isError": is_error(result),
    }


def list_tools_result() -> dict[str, Any]:
    """The `ListToolsResult` (wire shape): the three tools, in a stable order."""
    return {"tools": export_tools("mcp")}


def _as_call_result(
    call: ToolCall, code: ErrorCode, message: str, session_id: str, settings: Settings
) -> CallResult:
    tool_call_id = call.tool_call_id if is_valid_tool_call_id(call.tool_call_id) else UNSET
    result = error_result(code, message, tool_call_id)
    observation = observe(result, settings.bounds)
    meta = InvocationMeta(tool=call.tool[:64], session_id=session_id, status=LifecycleStatus.ERROR)
    return CallResult(
        tool_call_id=tool_call_id,
        lifecycle=LifecycleStatus.ERROR,
        model=msgspec.Raw(encode_view(observation)),
        control=msgspec.Raw(encode_view(control_view(result, meta, observation))),
    )


def local_runner(sources: Mapping[str, Source], session_id: str, settings: Settings) -> Runner:
    """Run each call's stages in this process (no Redis)."""
    from workers.stage import run_stages

    async def run(call: ToolCall) -> CallResult | None:
        outcome = await run_stages(
            tool=call.tool,
            tool_call_id=call.tool_call_id,
            arguments=call.arguments,
            session_id=session_id,
            sources=sources,
            settings=settings,
        )
        return CallResult(
            tool_call_id=outcome.result.tool_call_id,
            lifecycle=outcome.control.status,
            model=msgspec.Raw(encode_view(outcome.observation)),
            control=msgspec.Raw(encode_view(outcome.control)),
        )

    return run


def queue_runner(client: EvidenceClient, session_id: str, timeout: float) -> Runner:
    """Submit each call to the queue and await it (None while still running at `timeout`)."""

    async def run(call: ToolCall) -> CallResult | None:
        try:
            return await client.call(session_id, call, timeout)
        except PipelineError as exc:
            log.warning("the queue failed: %s", type(exc).__name__)
            message = "the evidence queue is unavailable; try again later"
            settings = client.settings
            return _as_call_result(call, ErrorCode.UNAVAILABLE, message, session_id, settings)

    return run


def build_server(runner: Runner) -> Server[Any]:
    """The MCP server (low-level `mcp.server.lowlevel.Server`) answering with `runner`."""
    import mcp.types as types
    from mcp.server.lowlevel import Server

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        return types.ListToolsResult.model_validate(list_tools_result())

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        call = read_call(params.name, params.arguments, params.meta)
        result = await runner(call)
        return types.CallToolResult.model_validate(call_tool_result(call, result))

    try:
        version = metadata.version("aci-evidence")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a checkout
        version = "0.0.0"
    return Server(
        "aci-evidence", version=version, on_list_tools=on_list_tools, on_call_tool=on_call_tool
    )


async def serve(args: Any, settings: Settings) -> int:
    """Serve over stdio until the client closes the connection."""
    try:
        from mcp.server.stdio import stdio_server
    except ImportError:
        print("aci-evidence mcp needs the MCP SDK: pip install mcp", file=sys.stderr)
        return 2
    session_id = str(getattr(args, "session", "mcp"))
    if not is_valid_session_id(session_id):
        print("--session: 1-128 letters, digits, '.', '_' or '-'", file=sys.stderr)
        return 2
    local = bool(getattr(args, "local", False)) or not settings.redis_url
    timeout = float(getattr(args, "timeout", None) or DEFAULT_TIMEOUT_S)
    async with contextlib.AsyncExitStack() as stack:
        if local:
            from workers.sources import open_sources

            sources = await stack.enter_async_context(open_sources())
            runner = local_runner(sources, session_id, settings)
            log.info("serving over stdio; stages run in-process")
        else:
            client = await stack.enter_async_context(EvidenceClient.connect(settings))
            runner = queue_runner(client, session_id, timeout)
            log.info("serving over stdio; calls go through the queue as session %s", session_id)
        server = build_server(runner)
        read_stream, write_stream = await stack.enter_async_context(stdio_server())
        await server.run(read_stream, write_stream, server.create_initialization_options())
    return 0
