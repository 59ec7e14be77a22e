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
