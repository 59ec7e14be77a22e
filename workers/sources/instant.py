"""A no-op source that answers every tool at once with a small, fixed upstream answer.

For benchmarks of the pipeline itself (`aci-evidence bench pipeline`, or a worker started
with `ACI_INSTANT_SOURCES=1`): it measures transport and projection, not a backend.
"""

from __future__ import annotations

from typing import Any

from contracts import (
    LogRecord,
    LogScope,
    LogsUpstream,
    LookupKnowledgeRequest,
    MysqlUpstream,
    QueryLogsRequest,
    Request,
)

__all__ = ["InstantSource"]

_RAG: dict[str, Any] = {
    "contextPack": {
        "relevanceLevel": "high",
        "hits": [
            {
                "documentId": "kb-7f3a",
                "source": "runbooks/db-connection-pool.md",
                "title": "Database connection pool exhaustion",
                "breadcrumb": "Database connection pool exhaustion > Symptoms",
                "content": "Requests fail with 'connection not available' after 30000 ms; "
                "active connections sit at the pool maximum while idle is zero.",
                "scores": {"bm25": 11.2, "rerank": 0.91},
            }
        ],
    },
    "retrievalTrace": [{"step": "bm25", "ms": 0.3}],
}


class InstantSource:
    """Answers any request immediately (benchmarks only): an `ImmediateSource`."""

    async def fetch(self, request: Request) -> Any:
        return self.fetch_now(request)

    def fetch_now(self, request: Request) -> Any:
        if isinstance(request, LookupKnowledgeRequest):
            return _RAG
        if isinstance(request, QueryLogsRequest):
            scope = LogScope(
                topic=request.topic,
                query=request.query,
                lookback_minutes=request.lookback_minutes or 60,
                start_time="2026-03-14T09:10:00+08:00",
                end_time="2026-03-14T10:10:00+08:00",
            )
            record = LogRecord(
                timestamp="2026-03-14T09:55:02.113+08:00",
                level="ERROR",
                service="order-service",
                message="connection not available, request timed out after 30000 ms",
            )
            return LogsUpstream(source_kind="MOCK", scope=scope, match_count=1, records=[record])
        return MysqlUpstream(columns=["id", "status"], rows=[[1, "PAID"]])

    async def aclose(self) -> None:
        return None
