"""Logs whose stamps lack a year or a date (RFC 3164 syslog, log4j2's `HH:mm:ss.SSS`): the
year or date is supplied from the window's end, or the file's last write when earlier (its
records are not later than it), in the scan *and* in the peek that chooses the files.

Before, the peek supplied them from the wall clock: a syslog file of last year, last written
after the incident (as a log goes on being written), was dated this year by the peek, ruled
out as "written after the window", and the call answered NO_EVIDENCE; with the same file's
mtime inside the window the scan read it and found the records.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from contracts import QueryLogsRequest, Topic
from tests.workers.logs_helpers import file_source, search
from workers.sources.logs.deadline import StopFlag
from workers.sources.logs.file_source import FileLogSource
from workers.sources.logs.source import parse_log_query

NOW = datetime(2026, 12, 5, 3, 0, tzinfo=UTC).timestamp()  # the worker's clock

SYSLOG = (
    "Nov  3 09:23:38 veridian automount[7998]: lookup(file): lookup for foobar failed\n"
    "Nov  3 09:23:38 veridian automount[16442]: attempting to mount entry /auto/opt\n"
    "Nov  3 09:47:02 veridian sudo: alice : TTY=pts/6 ; COMMAND=/usr/bin/tail\n"
)
CLOCK_ONLY = (  # log4j2's default pattern: the time of day alone
    "09:23:38.101 [main] INFO  com.shop.Orders - order o-1 accepted\n"
    "09:23:39.202 [main] ERROR com.shop.Orders - payment failed for order o-1\n"
)


def at(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def pinned(source: FileLogSource, query: str, end_ms: int, lookback: int = 60) -> int:
    """The match count of `query` over the window ending at `end_ms` (an as-of)."""
    request = QueryLogsRequest(topic=Topic.APPLICATION, query=query, lookback_minutes=lookback)
    return source.search(request, parse_log_query(query), StopFlag(60), end_ms).match_count


@pytest.mark.parametrize(
    ("fmt", "text", "end", "mtime"),
    [
        # last year's syslog, written on after the incident (mtime the next day)
        ("syslog", SYSLOG, "2025-11-03T10:00:00+00:00", "2025-11-04T00:00:00+00:00"),
        # a clock-only log4j2 file of three days ago, written on until the evening
        ("log4j", CLOCK_ONLY, "2026-12-02T10:00:00+00:00", "2026-12-02T20:00:00+00:00"),
    ],
)
def test_a_file_written_after_the_window_is_dated_from_the_window_end(
    tmp_path: Path, fmt: str, text: str, end: str, mtime: str
) -> None:
    path = tmp_path / "app.log"
    path.write_text(text)
    source = file_source(tmp_path, fmt, ["app.log"], now=NOW)
    when = at(mtime) / 1000
    os.utime(path, (when, when))
    assert pinned(source, "failed", at(end)) == 1
    # the same file with its mtime inside the window: the same answer
    inside = at(end) / 1000 - 60
    os.utime(path, (inside, inside))
    assert pinned(source, "failed", at(end)) == 1


def test_a_peek_cached_for_one_end_is_not_used_for_another(tmp_path: Path) -> None:
    """Unpinned first (the file read as this year's), then pinned to last year: the cached
    peek of the first call must not rule the file out for the second."""
    path = tmp_path / "app.log"
    path.write_text(SYSLOG)
    source = file_source(tmp_path, "syslog", ["app.log"], now=NOW)
    when = at("2025-11-04T00:00:00+00:00") / 1000
    os.utime(path, (when, when))
    assert search(source, "failed", lookback=60).match_count == 0  # now: 2026-12-05
    # last written 2025-11-04: it holds no record of 2026-11-03
    assert pinned(source, "failed", at("2026-11-03T10:00:00+00:00")) == 0
    assert pinned(source, "failed", at("2025-11-03T10:00:00+00:00")) == 1


@pytest.mark.parametrize(
    ("fmt", "line", "mtime"),
    [
        # a rotation kept a year (`rotate 52`): its `Dec  5 02:30:00` is last year's
        ("syslog", "Dec  5 02:30:00 oldhost kernel: EXT4-fs error: disk failure on sda1\n",
         "2025-12-06T00:00:00+00:00"),
        # a clock-only log4j2 file last written three days ago: its 02:30 is that day's
        ("log4j", "02:30:00.101 [main] ERROR com.shop.Disk - disk failure on sda1\n",
         "2026-12-02T03:00:00+00:00"),
    ],
)  # fmt: skip
def test_an_old_files_stamps_are_not_dated_into_todays_window(
    tmp_path: Path, fmt: str, line: str, mtime: str
) -> None:
    """A stamp without a year or a date is dated no later than its file's last write: before,
    from the wall clock, a year-old rotated syslog line was answered as evidence of the last
    hour ("disk failure" 30 minutes ago)."""
    path = tmp_path / "old.log"
    path.write_text(line)
    when = at(mtime) / 1000
    os.utime(path, (when, when))
    source = file_source(tmp_path, fmt, ["old.log"], now=NOW)  # 2026-12-05T03:00Z
    assert search(source, '"disk failure"', lookback=60).match_count == 0
    written = datetime.fromtimestamp(when, UTC)
    day_of = written.replace(hour=3, minute=0) if fmt == "log4j" else written.replace(day=5)
    end = int(day_of.replace(hour=3, minute=0, second=0).timestamp() * 1000)
    assert pinned(source, '"disk failure"', end) == 1  # its own day, pinned, finds it
