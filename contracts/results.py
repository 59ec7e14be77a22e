"""Canonical results: the frozen JSON fields of the contract, one struct per tool plus errors.

Optional fields are `UNSET` and omitted from the JSON when absent.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
from msgspec import UNSET, UnsetType

from contracts.status import ErrorCode, EvidenceStatus, RelevanceLevel, Topic

__all__ = [
    "ERROR_MESSAGE_CHARS",
    "CanonicalResult",
    "ErrorDetail",
    "ErrorResult",
    "Evidence",
    "JsonScalar",
    "LogEvent",
    "LogPattern",
    "LogScope",
    "LogsResult",
    "MysqlResult",
    "RagResult",
    "RecordTimes",
    "cancelled_result",
    "decode_result",
    "encode_result",
    "error_result",
]

ERROR_MESSAGE_CHARS: Final = 300

JsonScalar = str | int | float | bool | None


class Evidence(msgspec.Struct, frozen=True, kw_only=True):
    """One verbatim excerpt of a knowledge document."""

    document_id: str
    source: str
    title: str
    breadcrumb: str
    excerpt: str


class RagResult(msgspec.Struct, frozen=True, kw_only=True):
    """Canonical result of `lookup_knowledge`."""

    evidence_status: EvidenceStatus
    tool_call_id: str
    query: str
    evidence: list[Evidence]
    returned_count: int
    relevance_level: RelevanceLevel | UnsetType = UNSET
    truncated: bool


class LogScope(msgspec.Struct, frozen=True, kw_only=True):
    """The complete executed scope of a log query: what ran, over which absolute window."""

    topic: Topic
    query: str
    lookback_minutes: int
    start_time: str
    end_time: str


class LogPattern(msgspec.Struct, frozen=True, kw_only=True):
    """A log template with how often and when it occurred in scope."""

    template: str
    count: int
    level: str
    first_seen: str
    last_seen: str


class LogEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One log record on the timeline, its message bounded."""

    timestamp: str
    level: str
    service: str
    message: str
    fields: dict[str, JsonScalar] = {}


class RecordTimes(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What a log search saw of its records' times outside its window (Control View only).

    `nearest_before` / `nearest_after`: records were read but none fell in the window; the
    times of the nearest ones before its start and after its end (a post-mortem at the wrong
    time, or a lookback too short). `future_records`: records dated later than the clock that
    read them (a wrong timezone of the topic), and `latest` the latest such time."""

    nearest_before: str | UnsetType = UNSET
    nearest_after: str | UnsetType = UNSET
    future_records: int | UnsetType = UNSET
    latest: str | UnsetType = UNSET


class LogsResult(msgspec.Struct, frozen=True, kw_only=True):
    """Canonical result of `query_logs`."""

    evidence_status: EvidenceStatus
    tool_call_id: str
    source_kind: str
    scope: LogScope
    match_count: int
    returned_count: int
    patterns: list[LogPattern]
    events: list[LogEvent]
    truncated: bool
    # Present (true) only when the source stopped counting early (scan budget, deadline):
    # `match_count` is then a lower bound. Omitted otherwise, so exact results are unchanged.
    match_count_lower_bound: bool | UnsetType = UNSET
    # FILE: lines not in their configured format, matched files it could not read (a
    # compression it lacks), and short notes for the model on both. Omitted when none.
    unparsed_lines: int | UnsetType = UNSET
    unread_files: int | UnsetType = UNSET
    # Files that end in an error part way, read up to the damage (`LogsUpstream`).
    broken_files: int | UnsetType = UNSET
    # Matched paths that are no regular file, skipped unopened (`LogsUpstream`).
    skipped_files: int | UnsetType = UNSET
    notes: list[str] | UnsetType = UNSET
    # Present only when the search saw records outside its window worth saying (above).
    record_times: RecordTimes | UnsetType = UNSET


class MysqlResult(msgspec.Struct, frozen=True, kw_only=True):
    """Canonical result of `query_mysql`: columns in result order, rows of JSON values."""

    evidence_status: EvidenceStatus
    tool_call_id: str
    columns: list[str]
    rows: list[list[Any]]
    returned_count: int
    truncated: bool
    # Server warnings that changed no value (`warning 1365: division by zero`), at most 5.
    warnings: list[str] | UnsetType = UNSET
    # The columns past the column bound, left out (at most 50 names, then `and N more`).
    dropped_columns: list[str] | UnsetType = UNSET


class ErrorDetail(msgspec.Struct, frozen=True, kw_only=True):
    """A failure's code and a short, safe message."""

    code: ErrorCode
    message: str


class ErrorResult(msgspec.Struct, frozen=True, kw_only=True):
    """Any failure. Carries `tool_call_id` only when the framework supplied a valid one."""

    evidence_status: EvidenceStatus = EvidenceStatus.ERROR
    tool_call_id: str | UnsetType = UNSET
    error: ErrorDetail


CanonicalResult = RagResult | LogsResult | MysqlResult | ErrorResult


def error_result(
    code: ErrorCode, message: str, tool_call_id: str | UnsetType = UNSET
) -> ErrorResult:
    """Build an ERROR result; the message is cut to a short, single-line text."""
    text = " ".join(message.split())
    if len(text) > ERROR_MESSAGE_CHARS:
        text = text[: ERROR_MESSAGE_CHARS - 1] + "…"
    return ErrorResult(tool_call_id=tool_call_id, error=ErrorDetail(code=code, message=text))


# What the model reads of a cancelled call: that it was stopped, never that nothing was found.
CANCELLED_QUEUED: Final = (
    "the call was cancelled by the caller before it ran: no query was run, so this says "
    "nothing about the evidence; call again if it is still needed"
)
CANCELLED_RUNNING: Final = (
    "the call was cancelled by the caller while it ran and was stopped: no result, so this "
    "says nothing about the evidence; call again if it is still needed"
)


def cancelled_result(tool_call_id: str | UnsetType, *, started: bool = False) -> ErrorResult:
    """The ERROR/CANCELLED result of a call its submitter cancelled (`started`: while it ran).
    Use it for every cancelled call, so the model is always told the same thing."""
    message = CANCELLED_RUNNING if started else CANCELLED_QUEUED
    return error_result(ErrorCode.CANCELLED, message, tool_call_id)


_ENCODER: Final = msgspec.json.Encoder()
_RESULT_TYPES: Final[dict[str, type[CanonicalResult]]] = {
    "lookup_knowledge": RagResult,
    "query_logs": LogsResult,
    "query_mysql": MysqlResult,
}
_DECODERS: Final = {name: msgspec.json.Decoder(t) for name, t in _RESULT_TYPES.items()}
_ERROR_DECODER: Final = msgspec.json.Decoder(ErrorResult)


class _StatusProbe(msgspec.Struct):
    evidence_status: EvidenceStatus


_PROBE_DECODER: Final = msgspec.json.Decoder(_StatusProbe)


def encode_result(result: CanonicalResult) -> bytes:
    """The canonical JSON of a result."""
    return _ENCODER.encode(result)


def decode_result(tool: str, data: bytes | str) -> CanonicalResult:
    """Decode the canonical JSON of a result produced for `tool` (strict: raises on mismatch)."""
    if _PROBE_DECODER.decode(data).evidence_status is EvidenceStatus.ERROR or tool not in _DECODERS:
        return _ERROR_DECODER.decode(data)
    return _DECODERS[tool].decode(data)
