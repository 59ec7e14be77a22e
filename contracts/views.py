"""The two views of one canonical result.

- `observe`: the bounded Model Observation, only what the model needs to understand and cite.
  It never exceeds `Bounds.observation_max_bytes`; when it must be cut, whole trailing items
  of the largest list go first (deterministically), then trailing MySQL columns, then the
  longest remaining text (echoed query, scope, error message) is halved, and `truncated`
  becomes true (an error observation has no such flag; only its message can be cut).
  Every string is shown as `contracts.text.visible_text` shows it (hidden code points
  removed or marked): excerpts, log messages and rows are untrusted data.
- `control_view`: the Harness Control View, for the harness's decisions. No evidence bodies.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
from msgspec import UNSET, UnsetType

from contracts.bounds import Bounds
from contracts.logs import level_rank
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
    RecordTimes,
)
from contracts.status import ErrorCode, EvidenceStatus, LifecycleStatus, RelevanceLevel
from contracts.text import visible_text

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
    """What the model sees of a `lookup_knowledge` result."""

    tool_call_id: str
    evidence_status: EvidenceStatus
    query: str
    evidence: list[Evidence]
    relevance_level: RelevanceLevel | UnsetType = UNSET
    truncated: bool


class LogsObservation(msgspec.Struct, frozen=True, kw_only=True):
    """What the model sees of a `query_logs` result."""

    tool_call_id: str
    evidence_status: EvidenceStatus
    source_kind: str
    scope: LogScope
    patterns: list[LogPattern]
    events: list[LogEvent]
    truncated: bool
    # How the answer was read, when the model must know (lines not in their format, files
    # it could not read): omitted otherwise.
    notes: list[str] | UnsetType = UNSET


class MysqlObservation(msgspec.Struct, frozen=True, kw_only=True):
    """What the model sees of a `query_mysql` result."""

    tool_call_id: str
    evidence_status: EvidenceStatus
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool
    # The server's warnings that changed no value, briefly (the model may need to know a
    # NULL came from a division by zero).
    warnings: list[str] | UnsetType = UNSET
    # The columns left out past the column bound, by name (the model may ask for them).
    dropped_columns: list[str] | UnsetType = UNSET


class ErrorObservation(msgspec.Struct, frozen=True, kw_only=True):
    """What the model sees of a failure: its code and safe message."""

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
    """The whole observation of a result, its strings made visible (`_visible`)."""
    return _visible(_whole_view(result))[0]


def _visible(view: ModelObservation) -> tuple[ModelObservation, int]:
    """`view` with every string as `contracts.text.visible_text` shows it: evidence is data
    written by others, and hidden code points (tag characters spelling instructions, zero-width
    and bidi marks) must not reach the model unseen. One pass over the encoded view; a view
    without such code points (nearly all) is returned as is. With its encoded size."""
    raw = _ENCODER.encode(view)
    if raw.isascii():
        return view, len(raw)
    text = raw.decode("utf-8")
    shown = visible_text(text, newline="\\n")
    if shown is text:
        return view, len(raw)
    view = msgspec.json.decode(shown, type=type(view))
    return view, len(_ENCODER.encode(view))


def _whole_view(result: CanonicalResult) -> ModelObservation:
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
                notes=result.notes,
            )
        case MysqlResult():
            return MysqlObservation(
                tool_call_id=result.tool_call_id,
                evidence_status=result.evidence_status,
                columns=result.columns,
                rows=result.rows,
                truncated=result.truncated,
                warnings=result.warnings,
                dropped_columns=result.dropped_columns,
            )
        case ErrorResult():
            return ErrorObservation(
                tool_call_id=result.tool_call_id,
                evidence_status=result.evidence_status,
                error=result.error,
            )
    raise TypeError(f"not a canonical result: {type(result).__name__}")  # pragma: no cover


def _next_to_go(items: list[Any]) -> int:
    """The item a cut drops next: the last (lists are in order of importance), but of a log's
    events, a timeline, the least severe, the newest of them. Before, the newest went first:
    a crash at the end of the window was cut from the model's view before routine INFO."""
    if not isinstance(items[0], LogEvent):
        return len(items) - 1
    return min(range(len(items)), key=lambda i: (level_rank(items[i].level), -i))


def _drop_items(view: ModelObservation, budget: int, size: int) -> ModelObservation:
    lists = {name: list(getattr(view, name)) for name in _LIST_FIELDS if hasattr(view, name)}
    # Encoded size of each item plus its separating comma; the first item of a list has none.
    item_sizes = {n: [len(_ENCODER.encode(i)) + 1 for i in items] for n, items in lists.items()}
    # Drop items of whichever list is largest, one at a time, until the view fits.
    while size > budget and any(item_sizes.values()):
        name = max(item_sizes, key=lambda n: (sum(item_sizes[n]), n))
        at = _next_to_go(lists[name])
        lists[name].pop(at)
        size -= item_sizes[name].pop(at) - (0 if item_sizes[name] else 1)
    return msgspec.structs.replace(view, truncated=True, **lists)


def _texts(view: ModelObservation) -> dict[str, str]:
    # The free text left once the lists are cut, by the name `_with_texts` sets it back under.
    match view:
        case RagObservation():
            return {"query": view.query}
        case LogsObservation(scope=scope):
            return {
                "query": scope.query,
                "start_time": scope.start_time,
                "end_time": scope.end_time,
                "source_kind": view.source_kind,
            }
        case ErrorObservation():
            return {"message": view.error.message}
    return {}


def _with_texts(view: ModelObservation, texts: dict[str, str]) -> ModelObservation:
    replace = msgspec.structs.replace
    match view:
        case RagObservation():
            return replace(view, query=texts["query"])
        case LogsObservation():
            scope = replace(
                view.scope,
                query=texts["query"],
                start_time=texts["start_time"],
                end_time=texts["end_time"],
            )
            return replace(view, scope=scope, source_kind=texts["source_kind"])
        case ErrorObservation():
            return replace(view, error=replace(view.error, message=texts["message"]))
    return view  # pragma: no cover  # MySQL has no free text beside its columns


def _fit(view: ModelObservation, size: int, budget: int) -> ModelObservation:
    # `size`: the view's encoded size.
    if size <= budget:
        return view
    if not isinstance(view, ErrorObservation):
        view = _drop_items(view, budget, size)
        size = len(_ENCODER.encode(view))
    if isinstance(view, MysqlObservation) and size > budget:
        # Rows are all gone; the column names alone are too long. Drop trailing columns.
        columns = list(view.columns)
        while columns and size > budget:
            columns.pop()
            view = msgspec.structs.replace(view, columns=columns)
            size = len(_ENCODER.encode(view))
    # Then halve the longest remaining free text (echoed query, scope, error message).
    texts = _texts(view)
    while size > budget and any(texts.values()):
        name = max(texts, key=lambda n: (len(_ENCODER.encode(texts[n])), n))
        texts[name] = texts[name][: len(texts[name]) // 2]
        view = _with_texts(view, texts)
        size = len(_ENCODER.encode(view))
    return view


def observe(result: CanonicalResult, bounds: Bounds) -> ModelObservation:
    """The Model Observation of a canonical result, within the byte budget."""
    return _fit(*_visible(_whole_view(result)), bounds.observation_max_bytes)


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
    indexed_chunks: int | UnsetType = UNSET
    source: dict[str, str] | UnsetType = UNSET
    index_rebuilding: bool | UnsetType = UNSET
    skipped_runbooks: list[str] | UnsetType = UNSET


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
    # True when `match_count` is a lower bound (a log scan stopped early); omitted when exact.
    match_count_lower_bound: bool | UnsetType = UNSET
    # FILE: lines not in their configured format, matched files it could not read, and
    # files that end in an error part way (read up to the damage).
    unparsed_lines: int | UnsetType = UNSET
    unread_files: int | UnsetType = UNSET
    broken_files: int | UnsetType = UNSET
    # FILE: matched paths that are no regular file (a fifo, a socket, a device), skipped.
    skipped_files: int | UnsetType = UNSET
    relevance_level: RelevanceLevel | UnsetType = UNSET
    truncated: bool | UnsetType = UNSET
    source_kind: str | UnsetType = UNSET
    error_code: ErrorCode | UnsetType = UNSET
    attempts: int
    timings: Timings
    # The size of the embedded knowledge index that answered a RAG result (when it says).
    indexed_chunks: int | UnsetType = UNSET
    # A log search's records outside its window (`contracts.results.RecordTimes`).
    record_times: RecordTimes | UnsetType = UNSET
    # What the source answered from: its configuration fingerprint (workers.sources.identity:
    # runbook folder digest and index id, the log topic's backend and config digest, the data
    # source names; never a secret), so a replay knows what it ran against.
    source: dict[str, str] | UnsetType = UNSET
    # query_mysql: the server's warnings that changed no value (see MysqlResult.warnings).
    warnings: list[str] | UnsetType = UNSET
    # True when the embedded index that answered is the previous one, kept answering while
    # the runbooks' new index is built; omitted otherwise.
    index_rebuilding: bool | UnsetType = UNSET
    # Runbooks the embedded index left out (larger than its size cap), by name; omitted if none.
    skipped_runbooks: list[str] | UnsetType = UNSET


def control_view(
    result: CanonicalResult, meta: InvocationMeta, observation: ModelObservation | None = None
) -> ControlView:
    """The Harness Control View of a result; `truncated` also reports the model's cut."""
    # Built from the fields that are set only: the same view (every field left out is UNSET
    # by default), and a keyword passed as UNSET costs the struct as much as a value (all 26:
    # ~3.8 µs here, the dozen a RAG view has set: ~1.3 µs).
    shown: dict[str, Any] = {
        "tool": meta.tool,
        "session_id": meta.session_id,
        "status": meta.status,
        "evidence_status": result.evidence_status,
        "attempts": meta.attempts,
        "timings": meta.timings,
    }
    value: object
    if (value := result.tool_call_id) is not UNSET:
        shown["tool_call_id"] = value
    if (value := meta.scope) is not UNSET:
        shown["scope"] = value
    if (value := meta.scope_fingerprint) is not UNSET:
        shown["scope_fingerprint"] = value
    if (value := meta.duplicate_of) is not UNSET:
        shown["duplicate_of"] = value
    if (value := meta.source) is not UNSET:
        shown["source"] = value
    match result:
        case ErrorResult():
            shown["error_code"] = result.error.code
        case RagResult():
            shown["returned_count"], shown["truncated"] = result.returned_count, result.truncated
            if (value := result.relevance_level) is not UNSET:
                shown["relevance_level"] = value
            # What only a RAG result's view carries: the index's notes.
            if (value := meta.indexed_chunks) is not UNSET:
                shown["indexed_chunks"] = value
            if (value := meta.index_rebuilding) is not UNSET:
                shown["index_rebuilding"] = value
            if (value := meta.skipped_runbooks) is not UNSET:
                shown["skipped_runbooks"] = value
        case LogsResult():
            shown["returned_count"], shown["truncated"] = result.returned_count, result.truncated
            shown["match_count"], shown["source_kind"] = result.match_count, result.source_kind
            if (value := result.match_count_lower_bound) is not UNSET:
                shown["match_count_lower_bound"] = value
            if (value := result.unparsed_lines) is not UNSET:
                shown["unparsed_lines"] = value
            if (value := result.unread_files) is not UNSET:
                shown["unread_files"] = value
            if (value := result.broken_files) is not UNSET:
                shown["broken_files"] = value
            if (value := result.skipped_files) is not UNSET:
                shown["skipped_files"] = value
            if (value := result.record_times) is not UNSET:
                shown["record_times"] = value
        case MysqlResult():
            shown["returned_count"], shown["truncated"] = result.returned_count, result.truncated
            if (value := result.warnings) is not UNSET:
                shown["warnings"] = value
    if observation is not None and getattr(observation, "truncated", False):
        shown["truncated"] = True
    return ControlView(**shown)
