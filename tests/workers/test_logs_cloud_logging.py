"""Google Cloud Logging's `LogEntry` JSON lines (a Log Router sink to Cloud Storage) under
`jsonl` (`workers/sources/logs/cloudlogging.py`). Before, every key stayed under its envelope's
prefix: every record's message was empty (one empty template for all), `severity: DEFAULT`
was a level `DEFAULT`, and `trace_id:<id>`, `service:orders`, `pod:...`, `http_status:503`
answered NO_EVIDENCE over the very records.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
from logs_helpers import file_source, search

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC).timestamp()
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
ENTRIES = [
    {  # a GKE container's structured line
        "insertId": "1x2y3z",
        "jsonPayload": {"message": "payment gateway timeout for o-1042", "component": "charge"},
        "resource": {
            "type": "k8s_container",
            "labels": {
                "project_id": "shop-prod",
                "namespace_name": "shop",
                "pod_name": "orders-7d9f-x2",
                "container_name": "orders",
            },
        },
        "timestamp": "2026-12-04T11:50:00.123456Z",
        "severity": "ERROR",
        "logName": "projects/shop-prod/logs/stdout",
        "trace": f"projects/shop-prod/traces/{TRACE}",
        "spanId": "00f067aa0ba902b7",
        "receiveTimestamp": "2026-12-04T11:50:01.5Z",
    },
    {  # Cloud Run's own text line
        "insertId": "a1",
        "textPayload": "Memory limit of 512 MiB exceeded with 530 MiB used.\n",
        "resource": {"type": "cloud_run_revision", "labels": {"service_name": "checkout"}},
        "timestamp": "2026-12-04T11:51:00Z",
        "severity": "CRITICAL",
        "logName": "projects/shop-prod/logs/run.googleapis.com%2Fvarlog%2Fsystem",
    },
    {  # Cloud Run's request log
        "insertId": "a2",
        "httpRequest": {
            "requestMethod": "POST",
            "requestUrl": "https://checkout.run.app/pay",
            "status": 503,
            "responseSize": "97",
            "latency": "30.001s",
            "remoteIp": "203.0.113.9",
            "protocol": "HTTP/1.1",
        },
        "resource": {"type": "cloud_run_revision", "labels": {"service_name": "checkout"}},
        "timestamp": "2026-12-04T11:52:00Z",
        "severity": "ERROR",
        "logName": "projects/shop-prod/logs/run.googleapis.com%2Frequests",
    },
    {  # a line without a severity
        "insertId": "a3",
        "jsonPayload": {"msg": "cache warm", "items": 42},
        "timestamp": "2026-12-04T11:53:00Z",
        "severity": "DEFAULT",
        "logName": "projects/shop-prod/logs/app",
    },
    {  # an audit log
        "insertId": "a4",
        "protoPayload": {
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "status": {"code": 7, "message": "PERMISSION_DENIED"},
            "authenticationInfo": {"principalEmail": "ci@shop-prod.iam.gserviceaccount.com"},
            "methodName": "google.iam.admin.v1.CreateServiceAccountKey",
            "resourceName": "projects/-/serviceAccounts/orders@shop-prod.iam.gserviceaccount.com",
        },
        "timestamp": "2026-12-04T11:54:00Z",
        "severity": "ERROR",
        "logName": "projects/shop-prod/logs/cloudaudit.googleapis.com%2Factivity",
    },
]


@pytest.fixture
def source(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "logs.json"
    path.write_text("".join(msgspec.json.encode(e).decode() + "\n" for e in ENTRIES))
    os.utime(path, (NOW - 60, NOW - 60))
    return file_source(tmp_path, "jsonl", ["*.json"], now=NOW)


def test_messages_levels_and_services(source) -> None:  # type: ignore[no-untyped-def]
    records = search(source, "").records
    assert [(r.level, r.service, r.message) for r in records] == [
        ("ERROR", "orders", "payment gateway timeout for o-1042"),
        ("FATAL", "checkout", "Memory limit of 512 MiB exceeded with 530 MiB used."),
        ("ERROR", "checkout", "POST https://checkout.run.app/pay HTTP/1.1 503"),
        ("", "", "cache warm"),  # DEFAULT: no assigned severity, no level
        ("ERROR", "", "google.iam.admin.v1.CreateServiceAccountKey projects/-/serviceAccounts/"
         "orders@shop-prod.iam.gserviceaccount.com PERMISSION_DENIED"),
    ]  # fmt: skip
    first = records[0].fields
    assert first["log_name"] == "projects/shop-prod/logs/stdout"
    assert (first["namespace"], first["pod"], first["container"]) == ("shop", "orders-7d9f-x2",
                                                                       "orders")  # fmt: skip
    assert records[1].fields["log_name"].endswith("run.googleapis.com%2Fvarlog%2Fsystem")
    assert "receiveTimestamp" not in first and "receive_timestamp" not in first


@pytest.mark.parametrize(
    ("query", "count"),
    [
        (f"trace_id:{TRACE}", 1),
        ("service:orders level:error", 1),
        ("pod:orders-7d9f-x2", 1),
        ("http_status:503", 1),
        ("duration_ms:>30000", 1),
        ("bytes:97", 1),
        ('"POST https://checkout.run.app/pay"', 1),
        ("level:fatal", 1),
        ("principal:ci@shop-prod", 1),
        ('"CreateServiceAccountKey projects"', 1),
        ("level:error", 3),
        ("namespace:shop container:orders", 1),
        ("log_name:cloudaudit", 1),
    ],
)
def test_an_agents_questions(source, query: str, count: int) -> None:  # type: ignore[no-untyped-def]
    assert search(source, query).match_count == count


def test_an_apps_own_log_name_is_no_log_entry(tmp_path: Path) -> None:
    path = tmp_path / "app.jsonl"
    line = {"ts": "2026-12-04T11:50:00Z", "level": "info", "msg": "rotated", "logName": "a"}
    path.write_text(msgspec.json.encode(line).decode() + "\n")
    os.utime(path, (NOW - 60, NOW - 60))
    (record,) = search(file_source(tmp_path, "jsonl", ["*.jsonl"], now=NOW), "").records
    assert (record.message, record.fields["logName"]) == ("rotated", "a")
