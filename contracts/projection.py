"""One entry point from a recorded raw upstream answer to a canonical result.

Used by the worker's project stage and by replay, so both run the same pure code.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from contracts.bounds import Bounds
from contracts.logs import LogsUpstream, project_logs
from contracts.mysql import MysqlUpstream, project_mysql
from contracts.rag import project_rag
from contracts.requests import LookupKnowledgeRequest, Request
from contracts.results import CanonicalResult, error_result
from contracts.status import ErrorCode

__all__ = ["UPSTREAM_TYPES", "project"]

# The raw upstream shape each tool's sources return (Any: RAG upstreams are free-form JSON).
UPSTREAM_TYPES: Final[dict[str, Any]] = {
    "lookup_knowledge": Any,
    "query_logs": LogsUpstream,
    "query_mysql": MysqlUpstream,
}


def project(
    tool: str, request: Request, tool_call_id: str, upstream: object, bounds: Bounds
) -> CanonicalResult:
    """Project a raw upstream answer (a struct, or its JSON builtins as recorded) for `tool`.

    An upstream that does not have the shape its tool expects is an ERROR/PROJECTION result.
    """
    try:
        if tool == "lookup_knowledge":
            assert isinstance(request, LookupKnowledgeRequest)
            return project_rag(request, tool_call_id, upstream, bounds)
        if tool == "query_logs":
            logs = msgspec.convert(upstream, LogsUpstream, from_attributes=True)
            return project_logs(tool_call_id, logs, bounds)
        if tool == "query_mysql":
            rows = msgspec.convert(upstream, MysqlUpstream, from_attributes=True)
            return project_mysql(tool_call_id, rows, bounds)
    except msgspec.ValidationError as exc:
        return error_result(
            ErrorCode.PROJECTION, f"the source returned an unexpected shape: {exc}", tool_call_id
        )
    return error_result(ErrorCode.UNKNOWN_TOOL, "unknown tool", tool_call_id)
