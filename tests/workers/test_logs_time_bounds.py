"""Records dated at the ends of what a date can hold (Go's zero time `0001-01-01T00:00:00Z`,
a `9999-12-31` stamp): read and shown in a topic's zone, or in UTC where that zone's date
would fall out of range, never an uncaught OverflowError."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from logs_helpers import file_source, search

NOW = 1_796_000_000.0  # 2026-11-30T00:53:20Z


def written(tmp_path: Path, stamp: str) -> None:
    lines = [
        {"ts": "2026-11-30T00:40:00Z", "level": "info", "msg": "order accepted"},
        {"ts": stamp, "level": "error", "msg": "stamped at the end of time"},
    ]
    (tmp_path / "app.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    os.utime(tmp_path / "app.jsonl", (NOW - 60, NOW - 60))


EXTREMES = pytest.mark.parametrize(
    ("stamp", "zone"),
    [
        ("0001-01-01T00:00:00Z", "America/New_York"),  # Go's zero time, a zone behind UTC
        ("9999-12-31T23:00:00Z", "Asia/Shanghai"),  # a zone ahead: past year 9999
    ],
)


@EXTREMES
def test_a_record_at_the_end_of_dates_is_no_crash(tmp_path: Path, stamp: str, zone: str) -> None:
    # Before: query_logs raised OverflowError ('date value out of range', in format_ms) for
    # '' (9999 under +08:00: every call of the topic) and for a word of the record.
    written(tmp_path, stamp)
    source = file_source(tmp_path, "jsonl", ["app.jsonl"], now=NOW, top=f'timezone = "{zone}"')
    assert search(source, "accepted").match_count == 1
    search(source, "")
    search(source, "stamped")


@EXTREMES
def test_check_and_the_start_warning_read_a_last_record_at_the_end_of_dates(
    tmp_path: Path, stamp: str, zone: str
) -> None:
    # The last record of the newest file is compared with the file's last write
    # (`filetime.zone_behind`): its date in the topic's zone raised OverflowError, so
    # `aci-evidence check` and the worker's start-up warning died on Go's zero time.
    from workers.sources.logs.check import check_logs
    from workers.sources.logs.config import parse_logs_config

    line = {"ts": stamp, "level": "error", "msg": "stamped at the end of time"}
    (tmp_path / "app.jsonl").write_text(json.dumps(line) + "\n")  # the file's only record
    source = file_source(tmp_path, "jsonl", ["app.jsonl"], now=NOW, top=f'timezone = "{zone}"')
    source.clock_warning()
    config = parse_logs_config(
        f'roots = ["{tmp_path}"]\ntimezone = "{zone}"\n[topics.APPLICATION]\nbackend = "file"\n'
        f'format = "jsonl"\npaths = ["{tmp_path}/app.jsonl"]\n'
    )
    (topic,) = check_logs(config, NOW)
    topic.problems()
