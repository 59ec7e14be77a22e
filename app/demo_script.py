"""The scripted diagnoses the demo plays, one per incident: rounds of parallel tool calls as an
agent would make them, including one that finds nothing, one repeated call (its control view
shows `duplicate_of`) and one that fails (an unknown data source).

Four incidents are the MOCK log world's; `real-log-files` is one the demo writes to real log
files with real producers (`workers.sources.logs.scenario_files`), read by the FILE backend."""

from __future__ import annotations

from typing import Any, Final

__all__ = ["FILE_SCENARIO", "SCRIPTS", "Round"]

Round = list[tuple[str, str, dict[str, Any]]]  # (tool, tool call id, arguments)

_SHARED_FAILURE: Final = (
    "query_mysql",
    "call_9_billing",
    {"data_source": "billing", "sql": "SELECT COUNT(*) FROM invoices", "params": []},
)

FILE_SCENARIO: Final = "real-log-files"

SCRIPTS: Final[dict[str, list[Round]]] = {
    "db-pool-exhaustion": [
        [
            ("lookup_knowledge", "call_1_kb", {"query": "order-service slow and returning 503"}),
            ("query_logs", "call_2_app", {"topic": "APPLICATION", "query": "level:ERROR", "lookback_minutes": 30}),
            ("query_logs", "call_3_oom", {"topic": "SYSTEM_EVENTS", "query": "OOMKilled", "lookback_minutes": 60}),
        ],
        [
            ("query_logs", "call_4_leak", {"topic": "APPLICATION", "query": '"connection held" RefundService', "lookback_minutes": 60}),
            ("query_mysql", "call_5_refunds", {"data_source": "shop", "sql": "SELECT app_version, status, COUNT(*) AS refunds\nFROM refunds\nWHERE requested_at >= ?\nGROUP BY app_version, status\nORDER BY app_version", "params": ["2026-03-14 00:00:00"]}),
            ("lookup_knowledge", "call_6_kb_again", {"query": "Order-service  slow and returning 503"}),
            _SHARED_FAILURE,
        ],
        [
            ("lookup_knowledge", "call_7_kb_zh", {"query": "数据库连接池耗尽怎么处理"}),
            ("query_logs", "call_8_deploy", {"topic": "SYSTEM_EVENTS", "query": "service:order-service", "lookback_minutes": 60}),
        ],
    ],
    "slow-query-storm": [
        [
            ("lookup_knowledge", "call_1_kb", {"query": "user-service p99 latency high, slow responses"}),
            ("query_logs", "call_2_slow", {"topic": "DATABASE_SLOW_QUERY", "query": "table:orders", "lookback_minutes": 30}),
            ("query_logs", "call_3_payment", {"topic": "SYSTEM_EVENTS", "query": "service:payment-service", "lookback_minutes": 30}),
        ],
        [
            ("query_logs", "call_4_migrate", {"topic": "SYSTEM_EVENTS", "query": "db-migrate", "lookback_minutes": 60}),
            ("query_mysql", "call_5_migrations", {"data_source": "shop", "sql": "SELECT version, description, statement, applied_at\nFROM schema_migrations\nWHERE applied_at >= ?\nORDER BY applied_at DESC", "params": ["2026-03-01 00:00:00"]}),
            ("lookup_knowledge", "call_6_kb_again", {"query": "User-service p99 latency high,  slow responses"}),
            _SHARED_FAILURE,
        ],
        [("lookup_knowledge", "call_7_kb_zh", {"query": "慢查询排查 缺少索引"})],
    ],
    "oom-kill-restarts": [
        [
            ("lookup_knowledge", "call_1_kb", {"query": "pod OOMKilled and restarting"}),
            ("query_logs", "call_2_events", {"topic": "SYSTEM_EVENTS", "query": "OOMKilled", "lookback_minutes": 30}),
            ("query_logs", "call_3_pool", {"topic": "APPLICATION", "query": '"connection not available"', "lookback_minutes": 30}),
        ],
        [
            ("query_logs", "call_4_app", {"topic": "APPLICATION", "query": "service:report-service level:ERROR", "lookback_minutes": 30}),
            ("query_mysql", "call_5_tenant", {"data_source": "shop", "sql": "SELECT tenant_id, COUNT(*) AS orders\nFROM orders\nGROUP BY tenant_id\nORDER BY orders DESC", "params": []}),
            ("lookup_knowledge", "call_6_kb_again", {"query": "Pod OOMKilled and restarting"}),
            _SHARED_FAILURE,
        ],
        [("lookup_knowledge", "call_7_kb_zh", {"query": "容器内存溢出 反复重启"})],
    ],
    "downstream-timeout": [
        [
            ("lookup_knowledge", "call_1_kb", {"query": "payment-service timeouts calling a downstream service"}),
            ("query_logs", "call_2_app", {"topic": "APPLICATION", "query": "service:payment-service timed out", "lookback_minutes": 30}),
            ("query_logs", "call_3_db", {"topic": "DATABASE_SLOW_QUERY", "query": "", "lookback_minutes": 30}),
        ],
        [
            ("query_logs", "call_4_events", {"topic": "SYSTEM_EVENTS", "query": "risk-service", "lookback_minutes": 30}),
            ("query_mysql", "call_5_payments", {"data_source": "shop", "sql": "SELECT status, COUNT(*) AS payments, AVG(risk_score) AS avg_risk\nFROM payments\nWHERE created_at >= ?\nGROUP BY status", "params": ["2026-03-14 00:00:00"]}),
            ("lookup_knowledge", "call_6_kb_again", {"query": "Payment-service timeouts calling a downstream service"}),
            _SHARED_FAILURE,
        ],
        [("lookup_knowledge", "call_7_kb_zh", {"query": "下游超时 熔断"})],
    ],
    FILE_SCENARIO: [
        [
            ("lookup_knowledge", "call_1_kb", {"query": "order-service returning 503, connection pool timeouts"}),
            ("query_logs", "call_2_app", {"topic": "APPLICATION", "query": "level:ERROR", "lookback_minutes": 30}),
            ("query_logs", "call_3_slow", {"topic": "DATABASE_SLOW_QUERY", "query": 'table:orders rows_examined:>=10000 "FOR UPDATE"', "lookback_minutes": 30}),
        ],
        [
            ("query_logs", "call_4_oom", {"topic": "SYSTEM_EVENTS", "query": '"out of memory"', "lookback_minutes": 30}),
            ("query_logs", "call_5_payment", {"topic": "APPLICATION", "query": "service:payment-service", "lookback_minutes": 30}),
            ("lookup_knowledge", "call_6_kb_again", {"query": "Order-service returning 503,  connection pool timeouts"}),
            _SHARED_FAILURE,
        ],
        [
            ("lookup_knowledge", "call_7_kb_zh", {"query": "数据库连接池耗尽怎么处理"}),
            ("query_mysql", "call_8_orders", {"data_source": "shop", "sql": "SELECT status, COUNT(*) AS orders\nFROM orders\nGROUP BY status\nORDER BY orders DESC", "params": []}),
        ],
    ],
}  # fmt: skip
