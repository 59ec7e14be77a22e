"""The evidence contract: pure structs, projectors, views and tool definitions.

Imports only the standard library, msgspec and (lazily, for SQL normalisation) sqlglot; does
no I/O. Any agent runtime can use it without the pipeline.
"""

from __future__ import annotations

from contracts.bounds import DEFAULT_BOUNDS, Bounds
from contracts.fingerprint import fingerprint_scope, normalise_scope
from contracts.invocation import build_error_views, build_views, final_status
from contracts.logs import LogRecord, LogsUpstream, UpstreamPattern, project_logs
from contracts.mysql import MysqlUpstream, project_mysql, to_json_cell
from contracts.projection import project
from contracts.rag import normalise_relevance, project_rag, safe_source
from contracts.requests import (
    TOOL_NAMES,
    LookupKnowledgeRequest,
    QueryLogsRequest,
    QueryMysqlRequest,
    Request,
    decode_invocation,
    is_valid_tool_call_id,
)
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
    cancelled_result,
    decode_result,
    encode_result,
    error_result,
)
from contracts.status import (
    CONTRACT_VERSION,
    ErrorCode,
    EvidenceStatus,
    LifecycleStatus,
    RelevanceLevel,
    SourceKind,
    Topic,
)
from contracts.text import INVISIBLE_CLASS, visible_text
from contracts.tools import MAX_DATA_SOURCES, data_source_enum, export_tools, input_schema
from contracts.views import (
    ControlView,
    ErrorObservation,
    InvocationMeta,
    LogsObservation,
    ModelObservation,
    MysqlObservation,
    RagObservation,
    Timings,
    control_view,
    encode_view,
    observe,
)
from contracts.window import (
    AS_OF_SKEW_MS,
    AsOfError,
    as_of_problem,
    format_utc_ms,
    has_zone,
    parse_as_of,
    pin_scope,
    window_bounds,
    with_window,
)

__all__ = [
    "AS_OF_SKEW_MS",
    "CONTRACT_VERSION",
    "DEFAULT_BOUNDS",
    "INVISIBLE_CLASS",
    "MAX_DATA_SOURCES",
    "TOOL_NAMES",
    "AsOfError",
    "Bounds",
    "CanonicalResult",
    "ControlView",
    "ErrorCode",
    "ErrorDetail",
    "ErrorObservation",
    "ErrorResult",
    "Evidence",
    "EvidenceStatus",
    "InvocationMeta",
    "LifecycleStatus",
    "LogEvent",
    "LogPattern",
    "LogRecord",
    "LogScope",
    "LogsObservation",
    "LogsResult",
    "LogsUpstream",
    "LookupKnowledgeRequest",
    "ModelObservation",
    "MysqlObservation",
    "MysqlResult",
    "MysqlUpstream",
    "QueryLogsRequest",
    "QueryMysqlRequest",
    "RagObservation",
    "RagResult",
    "RecordTimes",
    "RelevanceLevel",
    "Request",
    "SourceKind",
    "Timings",
    "Topic",
    "UpstreamPattern",
    "as_of_problem",
    "build_error_views",
    "build_views",
    "cancelled_result",
    "control_view",
    "data_source_enum",
    "decode_invocation",
    "decode_result",
    "encode_result",
    "encode_view",
    "error_result",
    "export_tools",
    "final_status",
    "fingerprint_scope",
    "format_utc_ms",
    "has_zone",
    "input_schema",
    "is_valid_tool_call_id",
    "normalise_relevance",
    "normalise_scope",
    "observe",
    "parse_as_of",
    "pin_scope",
    "project",
    "project_logs",
    "project_mysql",
    "project_rag",
    "safe_source",
    "to_json_cell",
    "visible_text",
    "window_bounds",
    "with_window",
]
