"""The two status axes of the contract, and the error codes.

Evidence status is what the query found (agent-facing); lifecycle status is where the
invocation is (pipeline-facing). They are separate enums so they can never be mixed.
"""

from __future__ import annotations

import enum

__all__ = [
    "CONTRACT_VERSION",
    "ErrorCode",
    "EvidenceStatus",
    "LifecycleStatus",
    "RelevanceLevel",
    "SourceKind",
    "Topic",
]

# Bumped on any change of a frozen field set; carried on every envelope on the wire.
# Additions within v1 (optional, omitted when absent: msgspec schema evolution, so readers of
# either side ignore what they do not know and nothing already recorded changes):
# - LogsResult / ControlView `match_count_lower_bound` (a log scan stopped early).
# - Issue 31, incident time: envelope `as_of_ms` (a harness's pin) and `window_end_ms`
#   (written by admission); LogsUpstream / LogsResult / ControlView `record_times`
#   (`RecordTimes`: nearest records of an empty window, future-dated records); a log call's
#   Control View `scope` gains `start_time`, `end_time` and, when pinned, `as_of` (which its
#   fingerprint covers).
# - LogsUpstream / LogsResult / ControlView `broken_files` (compressed log files cut short or
#   corrupt part way, read up to the damage).
# - LogsUpstream / LogsResult / ControlView `skipped_files` (matched paths inside the log
#   roots that are no regular file: a fifo, a socket, a device; skipped, never opened).
CONTRACT_VERSION = 1
# Additions within version 1 (msgspec schema evolution: nothing renamed or removed, so a
# record written before decodes as it did):
# - ErrorCode.CANCELLED (issue 32): an invocation cancelled by its submitter before or while
#   it ran ends ERROR/CANCELLED, exactly once. A reader built before it decodes such a result's
#   code as unknown; every record it wrote decodes unchanged.


class EvidenceStatus(enum.StrEnum):
    """What the executed query found within its recorded scope."""

    EVIDENCE_FOUND = "EVIDENCE_FOUND"
    NO_EVIDENCE = "NO_EVIDENCE"
    ERROR = "ERROR"


class LifecycleStatus(enum.StrEnum):
    """Where an invocation is: accepted and being worked on, or final."""

    PROJECTING = "PROJECTING"
    READY = "READY"
    ERROR = "ERROR"

    @property
    def is_final(self) -> bool:
        return self is not LifecycleStatus.PROJECTING


class ErrorCode(enum.StrEnum):
    """Why an invocation ended in ERROR."""

    SCHEMA = "SCHEMA"
    INVALID_TOOL_CALL_ID = "INVALID_TOOL_CALL_ID"
    # The id names another call of this session (another tool or scope).
    DUPLICATE_TOOL_CALL_ID = "DUPLICATE_TOOL_CALL_ID"
    UNKNOWN_TOOL = "UNKNOWN_TOOL"
    AUTHORIZATION = "AUTHORIZATION"
    FORBIDDEN_QUERY = "FORBIDDEN_QUERY"
    EXECUTION = "EXECUTION"
    UNAVAILABLE = "UNAVAILABLE"
    TIMEOUT = "TIMEOUT"
    PROJECTION = "PROJECTION"
    GAVE_UP = "GAVE_UP"
    # Cancelled by its submitter before or while it ran: not a finding, nothing to conclude.
    CANCELLED = "CANCELLED"


class Topic(enum.StrEnum):
    """Which log topic to search."""

    APPLICATION = "APPLICATION"
    DATABASE_SLOW_QUERY = "DATABASE_SLOW_QUERY"
    SYSTEM_EVENTS = "SYSTEM_EVENTS"


class RelevanceLevel(enum.StrEnum):
    """Coarse relevance of knowledge evidence, normalised from upstream."""

    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"


class SourceKind(enum.StrEnum):
    """Which kind of backend answered a `query_logs` call: the built-in MOCK world, log files,
    or ClickHouse (the OpenTelemetry `otel_logs` schema). Never a path, table or host."""

    MOCK = "MOCK"
    FILE = "FILE"
    CLICKHOUSE = "CLICKHOUSE"
