"""`aws logs tail`'s output under `plain` (`workers/sources/logs/awstail.py`): the event's time,
the log stream a field `log_stream`, the message read as a record's (a Lambda runtime's line,
the platform's REPORT, a JSON object, a level first). Before, every line was a level-less
record whose message began with the stream: `level:error` over a tail found nothing.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from logs_helpers import file_source, search

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC).timestamp()
A = "8f5a1b2c-1111-2222-3333-444455556666"
FN = "2026/12/04/[$LATEST]0123456789abcdef0123456789abcdef"
WEB = "ecs/web/5f1e2d3c4b5a69788796a5b4c3d2e1f0"
TAIL = (
    f"2026-12-04T11:50:00.123000+00:00 {FN} START RequestId: {A} Version: $LATEST\n"
    f"2026-12-04T11:50:00.223000+00:00 {FN} 2026-12-04T11:50:00.223Z\t{A}\tERROR\tInvoke Error\n"
    f"2026-12-04T11:50:03+00:00 {FN} REPORT RequestId: {A}\tDuration: 3000.00 ms\t"
    "Billed Duration: 3000 ms\tMemory Size: 128 MB\tMax Memory Used: 50 MB\tStatus: timeout\n"
    f"2026-12-04T11:51:00.000000+00:00 {WEB} ERROR connection refused to db:5432\n"
    f'2026-12-04T11:51:01.000000+00:00 {WEB} {{"level":50,"msg":"db down","host":"db-1"}}\n'
    f"2026-12-04T11:51:02.000000+00:00 {WEB} 2026-12-04 11:51:02,001 WARN [main] o.a.Pool - slow\n"
    "2026-12-04T11:51:03.000000+00:00 i-0abc123d [WARN] disk at 91%\n"
    "2026-12-04T11:51:04.000000+00:00 started server on :8080\n"  # an app's, no stream
)


@pytest.fixture
def source(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "tail.log"
    path.write_text(TAIL)
    os.utime(path, (NOW - 60, NOW - 60))
    return file_source(tmp_path, "plain", ["tail.log"], now=NOW)


def test_streams_levels_and_messages(source) -> None:  # type: ignore[no-untyped-def]
    found = search(source, "")
    assert [(r.level, r.fields.get("log_stream", ""), r.message) for r in found.records] == [
        ("INFO", FN, f"START RequestId: {A} Version: $LATEST"),
        ("ERROR", FN, "Invoke Error"),
        ("ERROR", FN, f"REPORT RequestId: {A}\tDuration: 3000.00 ms\tBilled Duration: 3000 ms"
                      "\tMemory Size: 128 MB\tMax Memory Used: 50 MB\tStatus: timeout"),
        ("ERROR", WEB, "connection refused to db:5432"),
        ("ERROR", WEB, "db down"),
        ("WARN", WEB, "[main] o.a.Pool - slow"),
        ("WARN", "i-0abc123d", "disk at 91%"),
        ("", "", "started server on :8080"),
    ]  # fmt: skip
    assert found.records[1].fields["request_id"] == A
    assert found.records[2].fields["duration_ms"] == 3000.0
    assert found.records[4].fields["host"] == "db-1"
    assert found.records[2].timestamp.startswith("2026-12-04T11:50:03")


@pytest.mark.parametrize(
    ("query", "count"),
    [
        ("level:error", 4),  # pino's 50 too (the prefilter does not skip it)
        (f"log_stream:{WEB}", 3),
        ("log_stream:i-0abc123d level:warn", 1),
        (f"request_id:{A}", 3),
        ("duration_ms:>=3000", 1),
        ('"db down"', 1),
    ],
)
def test_an_agents_questions(source, query: str, count: int) -> None:  # type: ignore[no-untyped-def]
    assert search(source, query).match_count == count


def test_an_apps_own_isoformat_lines_keep_their_words(tmp_path: Path) -> None:
    path = tmp_path / "app.log"
    path.write_text(
        "2026-12-04T11:50:00.000000+00:00 /usr/sbin/mariadbd: ready for connections\n"
        "2026-12-04T11:50:01.000000+00:00 [main/INFO] loading world\n"
        "2026-12-04T11:50:02+00:00 ERROR disk full\n"
    )
    os.utime(path, (NOW - 60, NOW - 60))
    found = search(file_source(tmp_path, "plain", ["app.log"], now=NOW), "")
    assert [(r.level, r.message) for r in found.records] == [
        ("", "/usr/sbin/mariadbd: ready for connections"),
        ("", "[main/INFO] loading world"),  # as plain read it before
        ("ERROR", "disk full"),
    ]
    assert not any("log_stream" in r.fields for r in found.records)
