"""AWS Lambda's JSON log format under `jsonl` (`workers/sources/logs/lambdajson.py`): the
runtime's `requestId` and a platform event's `record.requestId` are `request_id`, a REPORT
event's metrics the fields the text REPORT's are, its status its level. Before, a platform
event had no level and no message, and `request_id:<id>` found nothing.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from logs_helpers import file_source, search

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC).timestamp()
A = "8f5a1b2c-1111-2222-3333-444455556666"
LINES: list[dict[str, object]] = [
    {"time": "2026-12-04T11:50:00.000Z", "type": "platform.start",
     "record": {"requestId": A, "version": "$LATEST"}},
    {"timestamp": "2026-12-04T11:50:00.100Z", "level": "ERROR", "message": "charge failed",
     "logger": "root", "requestId": A},
    {"time": "2026-12-04T11:50:03.000Z", "type": "platform.report",
     "record": {"requestId": A, "status": "timeout",
                "metrics": {"durationMs": 3000.0, "billedDurationMs": 3000,
                            "memorySizeMB": 128, "maxMemoryUsedMB": 64}}},
    {"time": "2026-12-04T11:51:01.000Z", "type": "platform.report",
     "record": {"requestId": "9f5a1b2c-1111-2222-3333-444455556666", "status": "success",
                "metrics": {"durationMs": 120.5, "billedDurationMs": 121,
                            "memorySizeMB": 128, "maxMemoryUsedMB": 128}}},
    {"timestamp": "2026-12-04T11:52:00Z", "level": "INFO", "message": "other", "requestId": "r-1"},
]  # fmt: skip


@pytest.fixture
def source(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "fn.json"
    path.write_text("".join(json.dumps(line) + "\n" for line in LINES))
    os.utime(path, (NOW - 60, NOW - 60))
    return file_source(tmp_path, "jsonl", ["fn.json"], now=NOW)


def test_platform_events_and_request_ids(source) -> None:  # type: ignore[no-untyped-def]
    found = search(source, "")
    assert [(r.level, r.message, r.fields.get("request_id")) for r in found.records] == [
        ("INFO", "platform.start", A),
        ("ERROR", "charge failed", A),
        ("ERROR", "platform.report timeout", A),
        ("WARN", "platform.report success", "9f5a1b2c-1111-2222-3333-444455556666"),
        ("INFO", "other", None),  # not a Lambda request id: kept as the app named it
    ]
    report = found.records[2].fields
    assert (report["duration_ms"], report["billed_duration_ms"], report["status"]) == (
        3000.0, 3000, "timeout",
    )  # fmt: skip
    assert found.records[4].fields["requestId"] == "r-1"


@pytest.mark.parametrize(
    ("query", "count"),
    [
        (f"request_id:{A}", 3),
        ("duration_ms:>1000", 1),
        ("max_memory_used_mb:>=128", 1),
        ('"platform.report timeout"', 1),
        ("status:timeout", 1),
    ],
)
def test_an_agents_questions(source, query: str, count: int) -> None:  # type: ignore[no-untyped-def]
    assert search(source, query).match_count == count
