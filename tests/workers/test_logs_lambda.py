"""AWS Lambda's text log lines under `plain` (`workers/sources/logs/lambdalogs.py`): the Node
and Java runtimes' `time<TAB>request id<TAB>LEVEL<TAB>message`, Python's `[LEVEL]<TAB>time<TAB>
request id<TAB>message` and the platform's `Task timed out` (ERROR). Before, every record was
level-less with the id and level in its message: `level:error` over a function's errors and
timeouts found none.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from logs_helpers import file_source, search

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC).timestamp()
A = "8f5a1b2c-1111-2222-3333-444455556666"
B = "9f5a1b2c-1111-2222-3333-444455556666"
LOG = (
    f"START RequestId: {A} Version: $LATEST\n"
    f"2026-12-04T11:50:00.100Z\t{A}\tINFO\tcharging order o-1042\n"
    f'2026-12-04T11:50:03.000Z\t{A}\tERROR\tInvoke Error \t{{"errorType":"Error",'
    f'"errorMessage":"gateway timeout","stack":["Error: gateway timeout"]}}\n'
    f"END RequestId: {A}\n"
    f"REPORT RequestId: {A}\tDuration: 3012.35 ms\tBilled Duration: 3013 ms\n"
    f"[WARNING]\t2026-12-04T11:51:00.000Z\t{B}\tretrying the gateway\n"
    f"2026-12-04T11:51:03.012Z {B} Task timed out after 3.00 seconds\n"
    f"2026-12-04T11:52:03.012Z\t{B}\tTask timed out after 3.00 seconds\n"  # tabs too
)


@pytest.fixture
def source(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "lambda.log"
    path.write_text(LOG)
    os.utime(path, (NOW - 60, NOW - 60))
    return file_source(tmp_path, "plain", ["lambda.log"], now=NOW)


def test_levels_and_request_ids(source) -> None:  # type: ignore[no-untyped-def]
    found = search(source, "")
    assert [(r.level, r.fields["request_id"], r.message[:20]) for r in found.records] == [
        ("INFO", A, "charging order o-104"),
        ("ERROR", A, 'Invoke Error \t{"erro'),
        ("WARN", B, "retrying the gateway"),
        ("ERROR", B, "Task timed out after"),
        ("ERROR", B, "Task timed out after"),
    ]
    assert found.unparsed_lines == 3  # START, END, REPORT: no time of their own


@pytest.mark.parametrize(
    ("query", "count"),
    [("level:error", 3), (f"request_id:{A}", 2), ('"Task timed out" level:error', 2)],
)
def test_an_agents_questions(source, query: str, count: int) -> None:  # type: ignore[no-untyped-def]
    assert search(source, query).match_count == count


# A CloudWatch export's lines (each after the event's time): the platform's lines are records
EXPORT = (
    f"2026-12-04T11:50:00.000Z START RequestId: {A} Version: $LATEST\n"
    f"2026-12-04T11:50:00.100Z\t{A}\tINFO\tcharging order o-1042\n"
    f"2026-12-04T11:50:01.402Z END RequestId: {A}\n"
    f"2026-12-04T11:50:01.402Z REPORT RequestId: {A}\tDuration: 1402.11 ms\tBilled Duration: "
    "1403 ms\tMemory Size: 128 MB\tMax Memory Used: 71 MB\tInit Duration: 180.22 ms\t\n"
    f"2026-12-04T11:51:00.000Z START RequestId: {B} Version: $LATEST\n"
    f"2026-12-04T11:51:03.000Z REPORT RequestId: {B} Duration: 3000.00 ms Billed Duration: "
    "3000 ms Memory Size: 128 MB Max Memory Used: 64 MB Status: timeout\n"  # spaces too
    "2026-12-04T11:52:00.500Z REPORT RequestId: 0f5a1b2c-1111-2222-3333-444455556666\t"
    "Duration: 880.00 ms\tBilled Duration: 880 ms\tMemory Size: 128 MB\tMax Memory Used: 128 MB"
    "\tStatus: error\tError Type: Runtime.OutOfMemory\n"
    "2026-12-04T11:53:00.500Z REPORT RequestId: 1f5a1b2c-1111-2222-3333-444455556666\t"
    "Duration: 700.00 ms\tBilled Duration: 700 ms\tMemory Size: 256 MB\tMax Memory Used: 256 MB\n"
)


@pytest.fixture
def export(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "export.log"
    path.write_text(EXPORT)
    os.utime(path, (NOW - 60, NOW - 60))
    return file_source(tmp_path, "plain", ["export.log"], now=NOW)


def test_platform_lines_with_a_time_are_records(export) -> None:  # type: ignore[no-untyped-def]
    found = search(export, "")
    assert not found.unparsed_lines  # (unset: none)
    assert [(r.level, r.message.split(" ")[0]) for r in found.records] == [
        ("INFO", "START"), ("INFO", "charging"), ("INFO", "END"), ("INFO", "REPORT"),
        ("INFO", "START"), ("ERROR", "REPORT"), ("ERROR", "REPORT"), ("WARN", "REPORT"),
    ]  # fmt: skip
    report = found.records[3].fields
    assert (report["request_id"], report["duration_ms"], report["billed_duration_ms"]) == (
        A, 1402.11, 1403,
    )  # fmt: skip
    assert (report["memory_size_mb"], report["max_memory_used_mb"]) == (128, 71)
    assert report["init_duration_ms"] == 180.22
    assert found.records[6].fields["error_type"] == "Runtime.OutOfMemory"
    assert found.records[5].fields["status"] == "timeout"


@pytest.mark.parametrize(
    ("query", "count"),
    [
        ("duration_ms:>1000", 2),
        ("max_memory_used_mb:>=128", 2),
        (f"request_id:{A}", 4),
        ("status:timeout level:error", 1),
        ("error_type:*", 1),
        ("level:warn", 1),
    ],
)
def test_an_agents_questions_over_an_export(export, query: str, count: int) -> None:  # type: ignore[no-untyped-def]
    assert search(export, query).match_count == count


def test_a_line_that_only_names_a_request_id_is_no_platform_line(tmp_path: Path) -> None:
    path = tmp_path / "app.log"
    path.write_text(f"2026-12-04T11:50:00.000Z REPORTS RequestId: {A} weekly\n")
    os.utime(path, (NOW - 60, NOW - 60))
    (record,) = search(file_source(tmp_path, "plain", ["app.log"], now=NOW), "").records
    assert record.level == "" and "request_id" not in record.fields


def test_an_s3_exports_time_before_a_runtimes_line(tmp_path: Path) -> None:
    path = tmp_path / "000000.log"  # CloudWatch's export: each event after its time
    path.write_text(
        f"2026-12-04T11:50:00.100Z 2026-12-04T11:50:00.100Z\t{A}\tERROR\tInvoke Error\n"
        f"2026-12-04T11:50:00.200Z [WARNING]\t2026-12-04T11:50:00.200Z\t{A}\tretrying\n"
        f"2026-12-04T11:50:03.000Z 2026-12-04T11:50:03.000Z {A} Task timed out after 3.00 seconds\n"
    )
    os.utime(path, (NOW - 60, NOW - 60))
    found = search(file_source(tmp_path, "plain", ["000000.log"], now=NOW), "")
    assert [(r.level, r.message, r.fields["request_id"]) for r in found.records] == [
        ("ERROR", "Invoke Error", A),
        ("WARN", "retrying", A),
        ("ERROR", "Task timed out after 3.00 seconds", A),
    ]  # before: level-less, the runtime's time, id and level in each message
