"""Incident time over MCP: which as-of a `tools/call` carries (a harness's, never the model's).

A harness pins one call with `_meta` `dev.aci-evidence/as_of` (ISO 8601; without a zone it
is UTC); the server's `--as-of` pins every call it serves; the call's own wins. Only
`query_logs` reads it (`pipeline.window`); a time that is not ISO 8601 or lies in the future
is that call's ERROR/SCHEMA, never a crash of the connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from contracts import AsOfError, ErrorCode, build_error_views
from pipeline.client import CallResult, ToolCall
from pipeline.settings import Settings
from pipeline.window import LOG_TOOL, checked_as_of

__all__ = ["AS_OF_META_KEY", "pinned_run"]

AS_OF_META_KEY: Final = "dev.aci-evidence/as_of"


async def pinned_run(
    runner: Callable[..., Awaitable[CallResult | None]],
    call: ToolCall,
    session_id: str,
    meta: Mapping[str, Any] | None,
    default: str | None,
) -> CallResult | None:
    """Run one call with its incident time: its `_meta` one, else `default` (the server's
    `--as-of`), checked here (a bad one is the call's ERROR/SCHEMA); a runner is called as
    `runner(call, session)` when there is none, or the call is not a log call."""
    found = meta.get(AS_OF_META_KEY) if meta is not None else None
    as_of = found if found is not None else default
    if as_of is None or call.tool != LOG_TOOL:
        return await runner(call, session_id)
    problem = f"{AS_OF_META_KEY} must be an ISO 8601 time"
    if isinstance(as_of, str):
        try:
            checked_as_of(as_of)
            return await runner(call, session_id, as_of)
        except AsOfError as exc:
            problem = str(exc)
    _, observation, control = build_error_views(
        ErrorCode.SCHEMA,
        problem,
        call.tool_call_id,
        tool=call.tool,
        session_id=session_id,
        bounds=Settings().bounds,
    )
    return CallResult.from_views(observation, control)
