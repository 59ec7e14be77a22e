"""Traefik's JSON access log (`accessLog.format: json`) under `jsonl`
(`accesslog.read_traefik_access`). Traefik writes every access line at `info` with an empty
`msg`: before, a 502 was INFO with no message (one empty template for all requests), and
`http_status:502`, `uri:/api/charge` and `duration_ms:>1000` answered as unknown fields.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from logs_helpers import file_source, search

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC).timestamp()


def access(status: int, path: str, nanos: int, at: str) -> dict[str, object]:
    return {
        "ClientAddr": "10.0.0.9:51234", "ClientHost": "10.0.0.9", "ClientPort": "51234",
        "ClientUsername": "-", "DownstreamContentSize": 21, "DownstreamStatus": status,
        "Duration": nanos, "OriginContentSize": 21, "OriginDuration": nanos - 1000,
        "OriginStatus": status if status != 502 else 0, "Overhead": 1000,
        "RequestAddr": "shop.example.com", "RequestContentSize": 0, "RequestCount": 42,
        "RequestHost": "shop.example.com", "RequestMethod": "POST", "RequestPath": path,
        "RequestPort": "-", "RequestProtocol": "HTTP/1.1", "RequestScheme": "https",
        "RetryAttempts": 0, "RouterName": "orders@kubernetescrd",
        "ServiceAddr": "10.0.1.7:8080", "ServiceName": "orders@kubernetescrd",
        "ServiceURL": "http://10.0.1.7:8080", "StartLocal": at, "StartUTC": at,
        "entryPointName": "websecure", "level": "info", "msg": "", "time": at,
    }  # fmt: skip


@pytest.fixture
def source(tmp_path: Path):  # type: ignore[no-untyped-def]
    lines = [
        access(200, "/api/orders", 12_345_678, "2026-12-04T11:50:00Z"),
        access(502, "/api/charge", 30_001_234_567, "2026-12-04T11:51:00Z"),
        {
            "level": "error",
            "msg": "Error while connecting to backend",
            "time": "2026-12-04T11:51:01Z",
        },
    ]
    path = tmp_path / "access.json"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    os.utime(path, (NOW - 60, NOW - 60))
    return file_source(tmp_path, "jsonl", ["access.json"], now=NOW)


def test_requests_are_read_as_an_access_log(source) -> None:  # type: ignore[no-untyped-def]
    records = search(source, "").records
    assert [(r.level, r.service, r.message) for r in records] == [
        ("INFO", "orders@kubernetescrd", "POST /api/orders HTTP/1.1 200"),
        ("ERROR", "orders@kubernetescrd", "POST /api/charge HTTP/1.1 502"),
        ("ERROR", "", "Error while connecting to backend"),
    ]
    failed = records[1].fields
    assert (failed["http_status"], failed["duration_ms"], failed["upstream_time_ms"]) == (
        502, 30001.235, 30001.234,
    )  # fmt: skip
    assert (failed["client"], failed["upstream_host"]) == ("10.0.0.9", "http://10.0.1.7:8080")


@pytest.mark.parametrize(
    ("query", "count"),
    [
        ("level:error", 2),
        ("http_status:502", 1),
        ("http_status:>=500", 1),
        ("duration_ms:>1000", 1),
        ("uri:/api/charge", 1),
        ('"POST /api/charge"', 1),
        ("service:orders", 2),
    ],
)
def test_an_agents_questions(source, query: str, count: int) -> None:  # type: ignore[no-untyped-def]
    assert search(source, query).match_count == count
