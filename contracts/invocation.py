"""How one invocation ends: its final lifecycle status and both views of its result, built in
one place for every path that answers a call (the stages, a call refused by the client, an MCP
server that cannot reach the queue).

- `final_status`: READY for evidence or none, ERROR for any failure (CONTRACT.md §1).
- `build_views`: the Model Observation and the Harness Control View of a result, with the
  invocation's metadata and the status its result puts it in.
- `build_error_views`: an ERROR result for a failure the caller names, and its two views.
"""

from __future__ import annotations

from typing import Any, Final

from msgspec import UNSET, UnsetType

from contracts.bounds import Bounds
from contracts.requests import is_valid_tool_call_id
from contracts.results import CanonicalResult, ErrorResult, error_result
from contracts.status import ErrorCode, EvidenceStatus, LifecycleStatus
from contracts.views import (
    ControlView,
    InvocationMeta,
    ModelObservation,
    Timings,
    control_view,
    observe,
)

__all__ = ["build_error_views", "build_views", "final_status"]

# A tool name is echoed to the harness only this long (characters); no tool has a longer one.
_TOOL_ECHO_CHARS: Final = 64
_NO_TIMINGS: Final = Timings()


def final_status(result: CanonicalResult) -> LifecycleStatus:
    """The final lifecycle state a canonical result puts its invocation in."""
    if result.evidence_status is EvidenceStatus.ERROR:
        return LifecycleStatus.ERROR
    return LifecycleStatus.READY


def build_views(
    result: CanonicalResult,
    bounds: Bounds,
    *,
    tool: str,
    session_id: str,
    scope: dict[str, Any] | UnsetType = UNSET,
    fingerprint: str | UnsetType = UNSET,
    duplicate_of: str | UnsetType = UNSET,
    attempts: int = 1,
    timings: Timings = _NO_TIMINGS,
    indexed_chunks: int | UnsetType = UNSET,
    source: dict[str, str] | UnsetType = UNSET,
    index_rebuilding: bool | UnsetType = UNSET,
    skipped_runbooks: list[str] | UnsetType = UNSET,
) -> tuple[ModelObservation, ControlView]:
    """Both views of a final result: the bounded Model Observation and the Harness Control
    View, whose status is the one the result puts its invocation in (`final_status`)."""
    observation = observe(result, bounds)
    meta = InvocationMeta(
        tool=tool,
        session_id=session_id,
        status=final_status(result),
        scope=scope,
        scope_fingerprint=fingerprint,
        duplicate_of=duplicate_of,
        attempts=attempts,
        timings=timings,
        indexed_chunks=indexed_chunks,
        source=source,
        index_rebuilding=index_rebuilding,
        skipped_runbooks=skipped_runbooks,
    )
    return observation, control_view(result, meta, observation)


def build_error_views(
    code: ErrorCode,
    message: str,
    tool_call_id: object,
    *,
    tool: str,
    session_id: str,
    bounds: Bounds,
) -> tuple[ErrorResult, ModelObservation, ControlView]:
    """The ERROR result of a call answered without running it, and its two views.

    The result carries `tool_call_id` only when it is a valid one (none is minted); the tool
    name is echoed to the harness cut to 64 characters."""
    valid: str | UnsetType = UNSET
    if isinstance(tool_call_id, str) and is_valid_tool_call_id(tool_call_id):
        valid = tool_call_id
    result = error_result(code, message, valid)
    observation, control = build_views(
        result, bounds, tool=tool[:_TOOL_ECHO_CHARS], session_id=session_id
    )
    return result, observation, control
