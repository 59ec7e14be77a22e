"""Typical and noisy upstream answers of each tool, shared by the tests and the benchmark."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from contracts import LogRecord, LogScope, LogsUpstream, MysqlUpstream, Topic

__all__ = [
    "LOGS_ARGS",
    "MYSQL_ARGS",
    "RAG_ARGS",
    "logs_upstream",
    "mysql_upstream",
    "rag_upstream",
]

RAG_ARGS = '{"query": "HikariPool connection timeout after deploy"}'
LOGS_ARGS = '{"topic": "APPLICATION", "query": "timeout -healthcheck", "lookback_minutes": 30}'
MYSQL_ARGS = (
    '{"data_source": "orders", "sql": "SELECT id, amount, created_at, payload, note '
    'FROM orders WHERE status = ? AND amount > ?", "params": ["FAILED", 10]}'
)

_POOL_TEXT = (
    "When HikariPool reports 'Connection is not available, request timed out after 30000ms', "
    "the pool is exhausted. Check for long transactions first: SELECT * FROM "
    "information_schema.innodb_trx ORDER BY trx_started. Then compare maximumPoolSize with "
    "the number of busy threads."
)
_DEPLOY_TEXT = "After a deploy, a wave of timeouts usually means cold caches; wait 5 minutes."


def rag_upstream(relevance: str = "High") -> dict[str, Any]:
    """A noisy RAG answer: context pack, traces, scores, fallback attempts, full bodies."""
    return {
        "requestId": "rq-8812",
        "contextPack": {
            "relevanceLevel": relevance,
            "tokenCount": 812,
            "hits": [
                {
                    "documentId": "kb-db-017",
                    "title": "Connection pool exhaustion",
                    "breadcrumb": ["Runbooks", "Database", "Connection pools"],
                    "source": "runbooks/database/pool.md",
                    "content": "  " + _POOL_TEXT + "\n",
                    "score": 0.913,
                    "denseScore": 0.88,
                    "sparseScore": 12.4,
                    "rerankScore": 0.97,
                    "metadata": {"owner": "dba", "chunk": 3, "embeddingModel": "bge-m3"},
                    "fullBody": "# Connection pool exhaustion\n\n" + _POOL_TEXT * 20,
                },
                {
                    "doc_id": "kb-ops-204",
                    "metadata": {"title": "Deploy checklist", "path": "runbooks/ops/deploy.md"},
                    "text": _DEPLOY_TEXT,
                    "score": 0.41,
                    "rerankScore": 0.52,
                },
                {"documentId": "kb-empty", "content": "   ", "score": 0.99},
            ],
        },
        "retrievalTrace": {"l0": ["kb-db-017"], "l1": ["kb-ops-204"], "latencyMs": 41},
        "rerankTrace": {"model": "bge-reranker", "scores": [0.97, 0.52]},
        "fallbackAttempts": [{"collection": "kb_v1", "error": "timeout"}],
        "metadata": {"region": "ap-shanghai", "cache": "miss"},
    }


def logs_upstream(*, matches: bool = True) -> LogsUpstream:
    """A mock log answer: 37 matches in scope, a sample of 6 records, templates derived."""
    scope = LogScope(
        topic=Topic.APPLICATION,
        query="timeout -healthcheck",
        lookback_minutes=30,
        start_time="2024-05-01T09:30:00+00:00",
        end_time="2024-05-01T10:00:00+00:00",
    )
    if not matches:
        return LogsUpstream(source_kind="MOCK", scope=scope, match_count=0)
    records = [
        LogRecord(
            timestamp=f"2024-05-01T09:{m:02d}:00+00:00",
            level=level,
            service=service,
            message=message,
            fields={"trace_id": f"t-{m}", "latency_ms": m * 10} if level == "ERROR" else {},
        )
        for m, level, service, message in [
            (32, "WARN", "gateway", "upstream slow: 1200ms for /api/orders"),
            (41, "ERROR", "order-svc", "HikariPool-1 - Connection is not available, timed out 30000ms"),
            (43, "ERROR", "order-svc", "HikariPool-1 - Connection is not available, timed out 30001ms"),
            (44, "INFO", "order-svc", "retrying request 3 of 5"),
            (47, "ERROR", "payment-svc", "call to 10.0.3.17:8080 timed out after 5000ms"),
            (55, "WARN", "gateway", "upstream slow: 2400ms for /api/orders"),
        ]
    ]  # fmt: skip
    return LogsUpstream(source_kind="MOCK", scope=scope, match_count=37, records=records)


def mysql_upstream(*, rows: bool = True) -> MysqlUpstream:
    """Fetched rows covering every documented value kind."""
    columns = ["id", "amount", "created_at", "payload", "note"]
    if not rows:
        return MysqlUpstream(columns=columns, rows=[])
    return MysqlUpstream(
        columns=columns,
        rows=[
            [
                9007199254740993,
                Decimal("12.50"),
                dt.datetime(2024, 5, 1, 9, 41, 7),
                {"sku": "A-1", "qty": 2, "tags": ["x"]},
                "card declined",
            ],
            [
                1002,
                Decimal("-0.10"),
                dt.date(2024, 5, 2),
                [1, 2.5, None],
                b"\x00\xffbin",
            ],
            [1003, float("nan"), dt.timedelta(hours=-26, seconds=5), None, "x" * 400],
        ],
    )
