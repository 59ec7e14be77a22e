"""What a call is and how one is refused without a worker: `ToolCall`, `CallResult`.

A call whose tool call id is invalid, or whose tool name or arguments exceed their bounds, is
refused before anything is written; a call whose id another call of its session holds is
answered with `DUPLICATE_TOOL_CALL_ID`. Either way `rejected_locally` builds the contract's
ERROR views here, as a worker would publish them.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
from msgspec import UnsetType

from contracts import (
    Bounds,
    ControlView,
    ErrorCode,
    ErrorResult,
    LifecycleStatus,
    ModelObservation,
    build_views,
    decode_invocation,
    encode_view,
    error_result,
)

__all__ = ["CallResult", "InvalidSessionId", "ToolCall", "rejected_locally"]

_ENCODER: Final = msgspec.json.Encoder()
_TOOL_NAME_MAX: Final = 64  # bytes; no tool has a longer name


class InvalidSessionId(ValueError):
    """Session ids are 1-128 characters of letters, digits, `.`, `_` and `-`."""

    def __init__(self, session_id: object) -> None:
        # The offending value is quoted escaped and cut: it may be long or hold newlines.
        super().__init__(
            f"invalid session id {str(session_id)[:40]!r}: 1-128 letters, digits, '.', '_' or '-'"
        )


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """One framework tool call: name, the framework's id, and its arguments (JSON or object)."""

    tool: str
    tool_call_id: Any
    arguments: Any


class CallResult(msgspec.Struct, frozen=True, kw_only=True):
    """A final invocation: lifecycle status and both views (as published JSON)."""

    tool_call_id: str | UnsetType
    lifecycle: LifecycleStatus
    model: msgspec.Raw
    control: msgspec.Raw
    # The scope key the worker ran ("" when none was recorded, e.g. an undecodable envelope).
    scope_key: str = ""

    @classmethod
    def from_views(cls, observation: ModelObservation, control: ControlView) -> CallResult:
        """The final result of a call answered in this process, from its two views (as a
        worker would publish them)."""
        return cls(
            tool_call_id=control.tool_call_id,
            lifecycle=control.status,
            model=msgspec.Raw(encode_view(observation)),
            control=msgspec.Raw(encode_view(control)),
        )

    def as_json(self) -> bytes:
        """`{"lifecycle": ..., "model": {...}, "control": {...}}`."""
        return _ENCODER.encode(
            {"lifecycle": self.lifecycle, "model": self.model, "control": self.control}
        )


def _arguments_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    if isinstance(arguments, bytes | bytearray):
        return bytes(arguments).decode("utf-8", "replace")
    try:
        return _ENCODER.encode(arguments).decode()
    except (TypeError, ValueError, OverflowError, RecursionError):  # (nested too deep)
        return "null"  # not JSON-shaped: the worker answers with a SCHEMA error


def rejected_locally(
    call: ToolCall, session_id: str, bounds: Bounds, result: ErrorResult | None = None
) -> CallResult:
    """The ERROR answer for a call that is not enqueued: by default the one for an invalid
    tool call id (nothing minted); else `result`, for a call refused before anything is
    written (an oversized tool name or arguments, a conflicting reuse of its id)."""
    if result is None:
        decoded = decode_invocation(call.tool, call.tool_call_id, call.arguments)
        assert isinstance(decoded, ErrorResult)
        result = decoded
    tool = _cut_utf8(str(call.tool), _TOOL_NAME_MAX)
    return CallResult.from_views(*build_views(result, bounds, tool=tool, session_id=session_id))


def _cut_utf8(text: str, limit: int) -> str:
    return text.encode("utf-8", "replace")[:limit].decode("utf-8", "ignore")


def _oversized(call: ToolCall, arguments: str, limit: int) -> ErrorResult | None:
    """The ERROR for a call whose tool name or arguments exceed their bounds, checked before
    anything is written (neither is stored or echoed)."""
    tool_call_id = call.tool_call_id
    if len(str(call.tool).encode("utf-8", "replace")) > _TOOL_NAME_MAX:
        return error_result(ErrorCode.UNKNOWN_TOOL, "no tool has a name this long", tool_call_id)
    if len(arguments.encode("utf-8", "replace")) > limit:
        return error_result(ErrorCode.SCHEMA, f"the arguments exceed {limit} bytes", tool_call_id)
    return None


def _conflict(call: ToolCall) -> ErrorResult:
    return error_result(
        ErrorCode.DUPLICATE_TOOL_CALL_ID,
        "this tool call id was already used in this session for a different call",
        call.tool_call_id,
    )
