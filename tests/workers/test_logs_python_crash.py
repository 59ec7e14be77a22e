"""A Python program's uncaught exception on a container's stderr (`cri`, `docker`): the
interpreter prints `Traceback (most recent call last):`, its frames (indented) and last the
exception (`ConnectionError: payment gateway unreachable`). One record, level ERROR,
`exception` the class on its last line, as Go's panics and Java's uncaught exceptions are.
Before, each line was a record of its own without a level: `level:ERROR` and `exception:*`
over the hour of the crash answered NO_EVIDENCE.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
from logs_helpers import file_source, search

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC).timestamp()
TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/app/worker.py", line 31, in <module>',
    "    charge(order)",
    '  File "/app/worker.py", line 12, in charge',
    '    raise ConnectionError("payment gateway unreachable")',
    "ConnectionError: payment gateway unreachable",
]


def container_log(fmt: str, lines: list[tuple[str, str]]) -> str:
    stamp = [f"2026-12-04T11:51:00.{i:06d}123Z" for i in range(len(lines))]
    if fmt == "cri":
        return "".join(f"{stamp[i]} {s} F {t}\n" for i, (s, t) in enumerate(lines))
    return "".join(
        msgspec.json.encode({"log": t + "\n", "stream": s, "time": stamp[i]}).decode() + "\n"
        for i, (s, t) in enumerate(lines)
    )


@pytest.mark.parametrize("fmt", ["cri", "docker"])
def test_a_python_traceback_on_a_stream_is_one_error_record(tmp_path: Path, fmt: str) -> None:
    lines = [("stdout", "Starting worker")]
    lines += [("stderr", line) for line in TRACEBACK[:3]]
    lines += [("stdout", "draining")]  # the other stream's line between: its own record
    lines += [("stderr", line) for line in TRACEBACK[3:]]
    lines += [("stdout", "Starting worker")]  # the restart
    path = tmp_path / "0.log"
    path.write_text(container_log(fmt, lines))
    os.utime(path, (NOW - 60, NOW - 60))
    source = file_source(tmp_path, fmt, ["0.log"], now=NOW)
    assert search(source, "").match_count == 4 and not search(source, "").unparsed_lines
    (crash,) = search(source, "level:ERROR").records
    assert crash.message.splitlines() == TRACEBACK
    assert crash.fields["exception"] == "ConnectionError" and crash.fields["stream"] == "stderr"
    assert crash.timestamp == "2026-12-04T11:51:00.000Z"  # its first line's
    assert search(source, "exception:ConnectionError").match_count == 1


@pytest.mark.parametrize("fmt", ["cri", "docker"])
def test_a_chained_traceback_names_the_last_exception(tmp_path: Path, fmt: str) -> None:
    chained = [
        "Traceback (most recent call last):",
        '  File "/app/db.py", line 5, in connect',
        "socket.timeout: timed out",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "/app/worker.py", line 9, in <module>',
        "requests.exceptions.ConnectTimeout: pool timed out",
    ]
    path = tmp_path / "0.log"
    path.write_text(container_log(fmt, [("stderr", line) for line in chained]))
    os.utime(path, (NOW - 60, NOW - 60))
    source = file_source(tmp_path, fmt, ["0.log"], now=NOW)
    errors = search(source, "level:ERROR").records
    assert [e.fields["exception"] for e in errors] == [
        "socket.timeout",
        "requests.exceptions.ConnectTimeout",
    ]
    assert search(source, '"During handling"').match_count == 1  # a record between them


# Python prints an exception's message as it is: `raise BillingConfigError("bad config:\n...")`
# ends the traceback with the message's lines, unindented; a class of the app's own naming
MESSAGE_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/srv/billing/worker.py", line 31, in <module>',
    "    load(cfg)",
    "billing.config.BillingConfigError: bad config:",
    "key 'region' missing",
    "Hint: set AWS_REGION or region in /etc/billing.toml",
]
HEADS = {
    "plain": ("2026-12-04 11:50:01,000 ERROR job failed", "2026-12-04 11:50:02,000 INFO next job"),
    "log4j": (
        "2026-12-04 11:50:01,000 ERROR [main] billing.worker - job failed",
        "2026-12-04 11:50:02,000 INFO [main] billing.worker - next job",
    ),
}


@pytest.mark.parametrize("fmt", ["plain", "log4j"])
def test_an_exceptions_message_over_lines_joins_its_record(tmp_path: Path, fmt: str) -> None:
    # before: the record's message stopped at the exception's first line, the others were
    # lines not in the format (level-less text), and `Hint: ...` no part of the error
    first, after = HEADS[fmt]
    path = tmp_path / "app.log"
    path.write_text("\n".join([first, *MESSAGE_TRACEBACK, after]) + "\n")
    os.utime(path, (NOW - 60, NOW - 60))
    source = file_source(tmp_path, fmt, ["app.log"], now=NOW)
    every = search(source, "")
    assert every.match_count == 2 and every.unparsed_lines is msgspec.UNSET
    (error,) = search(source, "level:ERROR AWS_REGION").records
    assert error.message.split("\n")[1:] == MESSAGE_TRACEBACK
    assert error.fields["exception"] == "billing.config.BillingConfigError"
    assert search(source, "level:ERROR region").match_count == 1


def test_a_line_after_a_traceback_cut_short_is_still_no_part_of_it(tmp_path: Path) -> None:
    # no exception line ended it (the process killed): the next unindented line is not the
    # exception's message
    first, after = HEADS["plain"]
    path = tmp_path / "app.log"
    path.write_text("\n".join([first, *MESSAGE_TRACEBACK[:3], "done", after]) + "\n")
    os.utime(path, (NOW - 60, NOW - 60))
    every = search(file_source(tmp_path, "plain", ["app.log"], now=NOW), "")
    assert every.match_count == 2 and every.unparsed_lines == 1


def test_a_traceback_ends_with_an_exception_of_any_class_name(tmp_path: Path) -> None:
    # `class BillingFailure(Exception)`: no `Error` or `Exception` in its name, no module
    first, after = HEADS["plain"]
    lines = [first, *MESSAGE_TRACEBACK[:3], "BillingFailure: card declined", after]
    path = tmp_path / "app.log"
    path.write_text("\n".join(lines) + "\n")
    os.utime(path, (NOW - 60, NOW - 60))
    source = file_source(tmp_path, "plain", ["app.log"], now=NOW)
    every = search(source, "")
    assert every.match_count == 2 and every.unparsed_lines is msgspec.UNSET
    (error,) = search(source, "declined").records
    assert error.level == "ERROR" and error.message.endswith("BillingFailure: card declined")
