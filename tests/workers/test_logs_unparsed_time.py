"""A line not in its format, matched as text, is timed by the record before it in its file.

In the multi-line formats a record is emitted only when the next head arrives, so such a line
was timed by the record before the previous one (or by the file's mtime while its file's first
record was still open): in the window when its neighbours were not, and out of it when they
were. It is in the window exactly when the record before it is.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from logs_helpers import file_source, search

NOW = datetime(2026, 12, 4, 20, 0, tzinfo=UTC).timestamp()


def write(tmp_path: Path, text: str) -> None:
    path = tmp_path / "app.log"
    path.write_text(text)
    os.utime(path, (NOW - 60, NOW - 60))


def found(tmp_path: Path, query: str) -> int:
    source = file_source(tmp_path, "plain", ["app.log"], now=NOW, extra='timezone = "UTC"\n')
    return search(source, query, lookback=30).match_count  # 19:30 to 20:00


def test_a_line_after_a_record_in_the_window_is_in_the_window(tmp_path: Path) -> None:
    write(
        tmp_path,
        "2026-12-04T19:00:00 INFO refund A\n"
        "2026-12-04T19:50:00 INFO refund B\n"
        "refund o-1042 stuck\n"
        "runtime: no crash follows, refund o-1043\n"
        "2026-12-04T19:51:00 INFO refund C\n",
    )
    # B, C and both lines after B (19:50): the lines were timed by A (19:00), 2 in all
    assert found(tmp_path, "refund") == 4
    # a query only they match: the prefilter skips every record, and the mtime timed them
    assert found(tmp_path, "o-1042") == 1 and found(tmp_path, "o-1043") == 1


def test_a_line_after_a_record_before_the_window_is_not_in_it(tmp_path: Path) -> None:
    write(
        tmp_path,
        "2026-12-04T19:00:00 INFO A first\n"
        "o-1042 refund stuck\n"
        "2026-12-04T19:50:00 INFO B second\n"
        "2026-12-04T19:51:00 INFO C third\n",
    )
    assert found(tmp_path, "o-1042") == 0  # after A (19:00): was timed by the mtime (19:59), 1


def test_a_line_before_any_record_takes_the_files_mtime(tmp_path: Path) -> None:
    write(tmp_path, "o-1042 banner\n2026-12-04T19:00:00 INFO A first\n")
    assert found(tmp_path, "o-1042") == 1  # as the docs say, unchanged
