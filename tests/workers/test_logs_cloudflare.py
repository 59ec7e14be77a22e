"""Cloudflare Logpush's HTTP requests under `jsonl` (`workers/sources/logs/cloudflare.py`): the
edge's start time, its status's level, the request line as the message, the access fields.
Before, no key jsonl reads as a time: every call an `EXECUTION` error.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from logs_helpers import file_source, search

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC).timestamp()
LINES: list[dict[str, object]] = [
    {"ClientIP": "203.0.113.9", "ClientRequestHost": "shop.example.com",
     "ClientRequestMethod": "POST", "ClientRequestURI": "/api/charge",
     "ClientRequestProtocol": "HTTP/2", "ClientRequestUserAgent": "curl/8.4.0",
     "EdgeStartTimestamp": "2026-12-04T11:50:00Z", "EdgeEndTimestamp": "2026-12-04T11:50:01.5Z",
     "EdgeResponseBytes": 1234, "EdgeResponseStatus": 502, "OriginResponseStatus": 502,
     "OriginIP": "10.0.0.7", "RayID": "7f1e0c0e2a1b3c4d", "CacheCacheStatus": "dynamic"},
    {"ClientIP": "198.51.100.4", "ClientRequestMethod": "GET", "ClientRequestURI": "/admin",
     "EdgeStartTimestamp": 1796385060000000000, "EdgeEndTimestamp": 1796385060002000000,
     "EdgeResponseStatus": 403, "OriginResponseStatus": 0, "SecurityAction": "block",
     "RayID": "8f1e0c0e2a1b3c4d"},  # unixnano; the WAF answered alone
    {"ClientIP": "203.0.113.9", "ClientRequestMethod": "GET", "ClientRequestURI": "/",
     "EdgeStartTimestamp": 1796385120, "EdgeResponseStatus": 200, "RayID": "9f1e0c0e2a1b3c4d"},
]  # fmt: skip


@pytest.fixture
def source(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "http_requests.json"
    path.write_text("".join(json.dumps(line) + "\n" for line in LINES))
    os.utime(path, (NOW - 60, NOW - 60))
    return file_source(tmp_path, "jsonl", ["http_requests.json"], now=NOW)


def test_requests_are_access_records(source) -> None:  # type: ignore[no-untyped-def]
    found = search(source, "")
    assert [(r.timestamp[11:19], r.level, r.message) for r in found.records] == [
        ("11:50:00", "ERROR", "POST /api/charge HTTP/2 502"),
        ("11:51:00", "WARN", "GET /admin 403"),
        ("11:52:00", "INFO", "GET / 200"),
    ]
    first, blocked, _ = (r.fields for r in found.records)
    assert (first["http_status"], first["target_status"], first["duration_ms"]) == (
        502,
        502,
        1500.0,
    )
    assert (first["client"], first["upstream_host"], first["request_id"]) == (
        "203.0.113.9", "10.0.0.7", "7f1e0c0e2a1b3c4d",
    )  # fmt: skip
    assert "target_status" not in blocked and blocked["duration_ms"] == 2.0
    assert blocked["SecurityAction"] == "block"


@pytest.mark.parametrize(
    ("query", "count"),
    [
        ("level:error", 1),
        ("http_status:>=400", 2),
        ("target_status:502", 1),
        ('"GET /admin"', 1),
        ("request_id:9f1e0c0e2a1b3c4d", 1),
        ("duration_ms:>1000", 1),
    ],
)
def test_an_agents_questions(source, query: str, count: int) -> None:  # type: ignore[no-untyped-def]
    assert search(source, query).match_count == count
