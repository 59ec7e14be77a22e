"""The golden invocations: each tool found / nothing found, and each kind of error."""

from __future__ import annotations

from typing import Any

import msgspec
from contract_samples import (
    LOGS_ARGS,
    MYSQL_ARGS,
    RAG_ARGS,
    logs_upstream,
    mysql_upstream,
    rag_upstream,
)
from msgspec import UNSET

from contracts import (
    DEFAULT_BOUNDS,
    CanonicalResult,
    ErrorResult,
    InvocationMeta,
    LifecycleStatus,
    RecordTimes,
    SourceKind,
    Timings,
    cancelled_result,
    decode_invocation,
    fingerprint_scope,
    normalise_scope,
    project,
)

__all__ = ["CANCELLED", "CASES", "run_case"]

# The upstream of a call its submitter cancelled (`cancelled_result`), before or while it ran.
CANCELLED = {"before": object(), "running": object()}

# name: (tool, tool_call_id, arguments, upstream)
CASES: dict[str, tuple[str, object, object, Any]] = {
    "rag_found": ("lookup_knowledge", "call_rag_1", RAG_ARGS, rag_upstream()),
    "rag_no_evidence": (
        "lookup_knowledge", "call_rag_2", RAG_ARGS,
        {"relevanceLevel": "HIGH", "hits": [{"id": "x", "content": " "}], "retrievalTrace": {}},
    ),
    "logs_found": ("query_logs", "call_logs_1", LOGS_ARGS, logs_upstream()),
    "logs_no_evidence": ("query_logs", "call_logs_2", LOGS_ARGS, logs_upstream(matches=False)),
    # A FILE backend whose scan budget ran out: truncated, the count a lower bound.
    "logs_file_lower_bound": (
        "query_logs", "call_logs_3", LOGS_ARGS,
        msgspec.structs.replace(
            logs_upstream(), source_kind=SourceKind.FILE, match_count_lower_bound=True
        ),
    ),
    # A FILE backend that read lines not in their format and a file it could not decompress.
    "logs_file_unparsed": (
        "query_logs", "call_logs_4", LOGS_ARGS,
        msgspec.structs.replace(
            logs_upstream(), source_kind=SourceKind.FILE, match_count_lower_bound=True,
            unparsed_lines=8, unread_files=1,
            notes=["8 lines read are not in their log format; a query of plain words alone "
                   "also matches them as text",
                   "1 matched log files are compressed with zstd, which this worker cannot "
                   "read: the count is a lower bound"],
        ),
    ),
    # A FILE backend that read records, none in the window (a post-mortem at the wrong time),
    # some dated in the future (a wrong timezone): NO_EVIDENCE, and the Control View says so.
    "logs_file_outside_window": (
        "query_logs", "call_logs_4", LOGS_ARGS,
        msgspec.structs.replace(
            logs_upstream(matches=False), source_kind=SourceKind.FILE,
            record_times=RecordTimes(
                nearest_before="2026-03-11T09:59:30.000+08:00",
                nearest_after="2026-03-14T18:05:00.000+08:00",
                future_records=140, latest="2026-03-14T18:09:30.000+08:00",
            ),
        ),
    ),
    "mysql_found": ("query_mysql", "call_mysql_1", MYSQL_ARGS, mysql_upstream()),
    "mysql_no_evidence": ("query_mysql", "call_mysql_2", MYSQL_ARGS, mysql_upstream(rows=False)),
    "error_schema": ("query_logs", "call_err_1", '{"topic": "APPLICATION", "query": 5}', None),
    "error_tool_call_id_in_arguments": (
        "lookup_knowledge", "call_err_2", '{"query": "x", "tool_call_id": "call_err_2"}', None,
    ),
    "error_invalid_tool_call_id": ("lookup_knowledge", " call_err_3", RAG_ARGS, None),
    "error_unknown_tool": ("query_metrics", "call_err_4", "{}", None),
    "error_projection": ("lookup_knowledge", "call_err_5", RAG_ARGS, {"unexpected": True}),
    "error_projection_logs": ("query_logs", "call_err_6", LOGS_ARGS, {"records": "x"}),
    "error_cancelled": ("query_mysql", "call_err_7", MYSQL_ARGS, CANCELLED["before"]),
    "error_cancelled_running": ("query_logs", "call_err_8", LOGS_ARGS, CANCELLED["running"]),
}  # fmt: skip


def run_case(name: str) -> tuple[CanonicalResult, InvocationMeta]:
    """Decode and project one golden invocation; the metadata its control view is built from."""
    tool, tool_call_id, arguments, upstream = CASES[name]
    decoded = decode_invocation(tool, tool_call_id, arguments)
    if isinstance(decoded, ErrorResult):
        meta = InvocationMeta(
            tool=str(tool), session_id="sess-42", status=LifecycleStatus.ERROR,
            timings=Timings(total_ms=0.4),
        )  # fmt: skip
        return decoded, meta
    assert isinstance(tool_call_id, str)
    scope = normalise_scope(tool, decoded)
    if upstream is CANCELLED["before"] or upstream is CANCELLED["running"]:
        result: CanonicalResult = cancelled_result(
            tool_call_id, started=upstream is CANCELLED["running"]
        )
    else:
        result = project(tool, decoded, tool_call_id, upstream, DEFAULT_BOUNDS)
    failed = isinstance(result, ErrorResult)
    meta = InvocationMeta(
        tool=tool,
        session_id="sess-42",
        status=LifecycleStatus.ERROR if failed else LifecycleStatus.READY,
        scope=scope,
        scope_fingerprint=fingerprint_scope(scope),
        duplicate_of="call_earlier_1" if name.endswith("no_evidence") else UNSET,
        attempts=2 if failed else 1,
        timings=Timings(queue_ms=1.25, execute_ms=38.5, project_ms=0.125, total_ms=40.0),
        # The embedded index's size: in the control view of a RAG result only (issue 22).
        indexed_chunks=99 if tool == "lookup_knowledge" else UNSET,
    )
    return result, meta
