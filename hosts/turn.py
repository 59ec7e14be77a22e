"""What every runtime adapter shares: reading native objects, the model-facing text, and
the honest answer for a call whose result is not ready yet.

The model-facing text of a final call is its Model Observation as compact JSON, exactly as
published on the session's model stream. The Harness Control View never enters it.

A call still running when the adapter's timeout passes is answered with a *pending*
observation (`{"tool_call_id", "pending": true, "message"}`): no `evidence_status`, so it can
never be read as `NO_EVIDENCE`, and not an error, because nothing failed. The message promises
the model nothing it cannot do. The harness can still have the final result: submitting the
same calls again (same session, same ids, same arguments) is idempotent and returns it, and
`EvidenceClient.result(session_id, tool_call_id)` reads it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from contracts import EvidenceStatus, LifecycleStatus
from pipeline.client import CallResult, EvidenceClient, ToolCall
from pipeline.window import AsOf

__all__ = [
    "NO_EVIDENCE_NOTE",
    "PENDING_MESSAGE",
    "AdapterError",
    "answer_calls",
    "control_artifact",
    "evidence_status",
    "field",
    "is_error",
    "items",
    "model_object",
    "model_text",
    "pending_observation",
]

# Only what is true for every host: the model has no tool that fetches a result, and it cannot
# choose its call id (a call made again gets a new one, so it runs the query again).
PENDING_MESSAGE: Final = (
    "The query is still running and its result did not arrive in time, so it is not "
    "included here. This is not a finding: it says nothing about whether evidence exists. "
    "Calling the tool again runs the query again."
)
NO_EVIDENCE_NOTE: Final = "The query ran and found nothing in its scope."

_ENCODER: Final = msgspec.json.Encoder()


class AdapterError(ValueError):
    """A runtime object that is not the shape its adapter reads; the message names the path."""


class _StatusProbe(msgspec.Struct):
    evidence_status: EvidenceStatus


_PROBE: Final = msgspec.json.Decoder(_StatusProbe)


def field(obj: object, name: str, path: str) -> Any:
    """`obj[name]` for a mapping (or the attribute of an SDK object); None when absent."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    if hasattr(obj, name):
        return getattr(obj, name)
    if hasattr(obj, "model_dump"):  # an SDK model without the attribute
        return None
    raise AdapterError(f"{path} must be an object, got {type(obj).__name__}")


def items(value: object, path: str) -> list[Any]:
    """A list-like field as a list; None counts as empty."""
    if value is None:
        return []
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise AdapterError(f"{path} must be a list, got {type(value).__name__}")
    return list(value)


def pending_observation(call: ToolCall) -> dict[str, Any]:
    """What the model reads for a call still running at the adapter's timeout."""
    return {"tool_call_id": call.tool_call_id, "pending": True, "message": PENDING_MESSAGE}


def model_text(call: ToolCall, result: CallResult | None) -> str:
    """The Model Observation as compact JSON (the pending observation when not final)."""
    if result is None:
        return _ENCODER.encode(pending_observation(call)).decode()
    return bytes(result.model).decode()


def model_object(call: ToolCall, result: CallResult | None) -> dict[str, Any]:
    """The Model Observation as a JSON object (for structured channels such as MCP)."""
    if result is None:
        return pending_observation(call)
    decoded: dict[str, Any] = msgspec.json.decode(result.model)
    return decoded


def evidence_status(result: CallResult | None) -> EvidenceStatus | None:
    """The evidence status of a final result; None while it is pending."""
    return None if result is None else _PROBE.decode(result.model).evidence_status


def is_error(result: CallResult | None) -> bool:
    """True only for a final ERROR (never for a pending call or for NO_EVIDENCE)."""
    return result is not None and result.lifecycle is LifecycleStatus.ERROR


def control_artifact(call: ToolCall, result: CallResult | None) -> dict[str, Any]:
    """The Harness Control View as a dict, for harness-only channels (never the model's)."""
    if result is None:
        return {
            "tool": str(call.tool),
            "tool_call_id": call.tool_call_id,
            "status": LifecycleStatus.PROJECTING.value,
        }
    decoded: dict[str, Any] = msgspec.json.decode(result.control)
    return decoded


async def answer_calls(
    client: EvidenceClient,
    session_id: str,
    calls: Sequence[ToolCall],
    timeout: float,
    as_of: AsOf | None = None,
) -> list[CallResult | None]:
    """Submit all calls of one assistant turn at once and await them together; `as_of` (the
    harness's, never the model's) pins the log calls among them to an incident time."""
    if not calls:
        return []
    return await client.call_many(session_id, calls, timeout, as_of=as_of)
