"""The two views of one canonical result.

- `observe`: the bounded Model Observation, only what the model needs to understand and cite.
  It never exceeds `Bounds.observation_max_bytes`; when it must be cut, whole trailing items
  of the largest list go first (deterministically), then the echoed query, and
  `truncated` becomes true.
- `control_view`: the Harness Control View, for the harness's decisions. No evidence bodies.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
from msgspec import UNSET, UnsetType

from contracts.bounds import Bounds
from contracts.results import (
    CanonicalResult,
    ErrorDetail,
    ErrorResult,
    Evidence,
    LogEvent,
    LogPattern,
    LogScope,
    LogsResult,
    MysqlResult,
    RagResult,
)
from contracts.status import ErrorCode, EvidenceStatus, LifecycleStatus, RelevanceLevel

__all__ = [
    "ControlView",
    "ErrorObservation",
    "InvocationMeta",
    "LogsObservation",
    "ModelObservation",
    "MysqlObservation",
    "RagObservation",
    "Timings",
    "control_view",
    "encode_view",
    "observe",
]


class RagObservation(msgspec.Struct, frozen=True, kw_only=True):
    tool_call_id: str
    evidence_status: EvidenceStatus
    query: str
    evidence: list[Evidence]
    relevance_level: RelevanceLevel | UnsetType = UNSET
    truncated: bool


class LogsObservation(msgspec.Struct, frozen=True, kw_only=True):
    tool_call_id: str
    evidence_status: EvidenceStatus
    source_kind: str
    scope: LogScope
    patterns: list[LogPattern]
    events: list[LogEvent]
    truncated: bool


class MysqlObservation(msgspec.Struct, frozen=True, kw_only=True):
    tool_call_id: str
    evidence_status: EvidenceStatus
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool


class ErrorObservation(msgspec.Struct, frozen=True, kw_only=True):
    tool_call_id: str | UnsetType = UNSET
    evidence_status: EvidenceStatus
    error: ErrorDetail


ModelObservation = RagObservation | LogsObservation | MysqlObservation | ErrorObservation

_ENCODER: Final = msgspec.json.Encoder()
_LIST_FIELDS: Final = ("evidence", "events", "rows", "patterns")


def encode_view(view: msgspec.Struct) -> bytes:
    """Compact JSON of a view, as published and as shown to the model."""
    return _ENCODER.encode(view)


def _first_view(result: CanonicalResult) -> ModelObservation:
    match result:
        case RagResult():
            return RagObservation(
                tool_call_id=result.tool_call_id,
                evidence_status=result.evidence_status,
                query=result.query,
                evidence=result.evidence,
                relevance_level=result.relevance_level,
                truncated=result.truncated,
            )
        case LogsResult():
            return LogsObservation(
                tool_call_id=result.tool_call_id,
                evidence_status=result.evidence_status,
                source_kind=result.source_kind,
                scope=result.scope,
                patterns=result.patterns,
                events=result.events,
                truncated=result.truncated,
            )
        case MysqlResult():
            return MysqlObservation(
                tool_call_id=result.tool_call_id,
                evidence_status=result.evidence_status,
                columns=result.columns,
                rows=result.rows,
                truncated=result.truncated,
            )
        case ErrorResult():
            return ErrorObservation(
                tool_call_id=result.tool_call_id,
                evidence_status=result.evidence_status,
                error=result.error,
            )
    raise TypeError(f"not a canonical result: {type(result).__name__}")  # pragma: no cover


def _fit(view: ModelObservation, budget: int) -> ModelObservation:
    size = len(_ENCODER.encode(view))
    if size <= budget:
        return view
    lists = {
        name: list(getattr(view, name)) for name in _LIST_FIELDS if hasattr(view, name)
    }
    item_sizes = {name: [len(_ENCODER.encode(i)) + 1 for i in items] for name, items in lists.items()}
    # Drop trailing items of whichever list is largest, one at a time, until the view fits.
    while size > budget and any(item_sizes.values()):
        name = max(item_sizes, key=lambda n: (sum(item_sizes[n]), n))
        lists[name].pop()
        size -= item_sizes[name].pop()
    view = msgspec.structs.replace(view, truncated=True, **lists)
    if len(_ENCODER.encode(view)) <= budget:
        return view
    # Only the echoed query can still be long (rows/events/evidence are gone).
    text: str = getattr(view, "query", "")
    if isinstance(view, LogsObservation):
        text = view.scope.query
    while text and len(_ENCODER.encode(view)) > budget:
        text = text[: len(text) // 2]
        if isinstance(view, LogsObservation):
            view = msgspec.structs.replace(view, scope=msgspec.structs.replace(view.scope, query=text))
        else:
            view = msgspec.structs.replace(view, query=text)
    return view


def observe(result: CanonicalResult, bounds: Bounds) -> ModelObservation:
    """The Model Observation of a canonical result, within the byte budget."""
    view = _first_view(result)
    if isinstance(view, ErrorObservation):
        return view  # error messages are short by construction
    return _fit(view, bounds.observation_max_bytes)


class Timings(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Milliseconds spent per stage of one invocation."""

    queue_ms: float = 0.0
    execute_ms: float = 0.0
    project_ms: float = 0.0
    total_ms: float = 0.0


class InvocationMeta(msgspec.Struct, frozen=True, kw_only=True):
    """What the pipeline knows about an invocation beyond its canonical result."""

    tool: str
    session_id: str
    status: LifecycleStatus
    scope: dict[str, Any] | UnsetType = UNSET
    scope_fingerprint: str | UnsetType = UNSET
    duplicate_of: str | UnsetType = UNSET
    attempts: int = 1
    timings: Timings = Timings()


class ControlView(msgspec.Struct, frozen=True, kw_only=True):
    """The Harness Control View: identity, status, scope and counters. No evidence bodies."""

    tool: str
    tool_call_id: str | UnsetType = UNSET
    session_id: str
    status: LifecycleStatus
    evidence_status: EvidenceStatus
    scope: dict[str, Any] | UnsetType = UNSET
    scope_fingerprint: str | UnsetType = UNSET
    duplicate_of: str | UnsetType = UNSET
    returned_count: int | UnsetType = UNSET
    match_count: int | UnsetType = UNSET
    relevance_level: RelevanceLevel | UnsetType = UNSET
    truncated: bool | UnsetType = UNSET
    source_kind: str | UnsetType = UNSET
    error_code: ErrorCode | UnsetType = UNSET
    attempts: int
    timings: Timings


def control_view(
    result: CanonicalResult, meta: InvocationMeta, observation: ModelObservation | None = None
) -> ControlView:
    """The Harness Control View of a result; `truncated` also reports the model's cut."""
    returned: int | UnsetType = UNSET
    match_count: int | UnsetType = UNSET
    relevance: RelevanceLevel | UnsetType = UNSET
    source_kind: str | UnsetType = UNSET
    error_code: ErrorCode | UnsetType = UNSET
    truncated: bool | UnsetType = UNSET
    match result:
        case ErrorResult():
            error_code = result.error.code
        case RagResult():
            returned, relevance, truncated = result.returned_count, result.relevance_level, result.truncated
        case LogsResult():
            returned, match_count = result.returned_count, result.match_count
            source_kind, truncated = result.source_kind, result.truncated
        case MysqlResult():
            returned, truncated = result.returned_count, result.truncated
    if observation is not None and getattr(observation, "truncated", False):
        truncated = True
    return ControlView(
        tool=meta.tool,
        tool_call_id=result.tool_call_id,
        session_id=meta.session_id,
        status=meta.status,
        evidence_status=result.evidence_status,
        scope=meta.scope,
        scope_fingerprint=meta.scope_fingerprint,
        duplicate_of=meta.duplicate_of,
        returned_count=returned,
        match_count=match_count,
        relevance_level=relevance,
        truncated=truncated,
        source_kind=source_kind,
        error_code=error_code,
        attempts=meta.attempts,
        timings=meta.timings,
    )
