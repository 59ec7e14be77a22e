"""Go's runtime explains some fatal errors on lines of its own before it throws
(`runtime: out of memory: cannot allocate ...` then `fatal error: out of memory`): those lines
are the crash's, in its record, not lines of no record (tests/workers/logs_samples/README.md:
`go_out_of_memory.log` and `go_stack_overflow.log` are Go 1.19's own output)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
from logs_helpers import file_source, search
from test_logs_producers import NOW, SAMPLES, read

from workers.sources.logs.multiline import MAX_HELD_RUNTIME

OOM_WRITTEN = datetime(2026, 12, 4, 22, 42, 25, 600000, tzinfo=UTC).timestamp()
LATER = OOM_WRITTEN + 600


def test_a_go_out_of_memory_is_one_fatal_record_with_the_runtimes_explanation(
    tmp_path: Path,
) -> None:
    # `ulimit -v 1000000` under a Go 1.19 program that allocates 64 MiB slices
    every = read(tmp_path, "go_out_of_memory.log", now=LATER, written=OOM_WRITTEN)
    assert every.match_count == 3 and not every.unparsed_lines  # 2 log lines and the crash
    (fatal,) = read(
        tmp_path, "go_out_of_memory.log", '"cannot allocate"', now=LATER, written=OOM_WRITTEN
    ).records
    lines = (SAMPLES / "go_out_of_memory.log").read_text().splitlines()
    assert fatal.message.splitlines() == [line for line in lines[2:] if line.strip()]
    assert fatal.message.startswith(
        "runtime: out of memory: cannot allocate 67108864-byte block (272367616 in use)\n"
        "fatal error: out of memory\ngoroutine 1 [running]:"
    )
    assert fatal.level == "FATAL" and fatal.fields == {"exception": "fatal error"}
    assert fatal.timestamp == "2026-12-04T22:42:25.600Z"  # its process's last write
    query = '"out of memory" level:fatal'
    assert read(tmp_path, "go_out_of_memory.log", query, now=LATER).match_count == 1


def test_a_go_stack_overflow_takes_its_runtime_lines(tmp_path: Path) -> None:
    every = read(tmp_path, "go_stack_overflow.log", now=NOW + 3600)
    assert every.match_count == 2 and not every.unparsed_lines
    (fatal,) = read(tmp_path, "go_stack_overflow.log", '"stack exceeds"', now=NOW + 3600).records
    lines = (SAMPLES / "go_stack_overflow.log").read_text().splitlines()
    assert fatal.message.splitlines() == [line for line in lines[1:] if line.strip()]
    assert fatal.message.startswith("runtime: goroutine stack exceeds 65536-byte limit\n")
    assert fatal.level == "FATAL" and fatal.fields == {"exception": "fatal error"}


HEAD = "2026/12/04 19:46:37.027351 handling request id=42\n"
FATAL = "fatal error: out of memory\n\ngoroutine 1 [running]:\nmain.main()\n\t/srv/m.go:9 +0x1\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "app.log"
    path.write_text(text)
    os.utime(path, (NOW - 60, NOW - 60))
    return path


def test_runtime_lines_followed_by_no_crash_are_lines_not_in_the_format(tmp_path: Path) -> None:
    write(tmp_path, HEAD + "runtime: a note of the runtime\n" + HEAD)
    source = file_source(tmp_path, "plain", ["app.log"], now=NOW)
    every = search(source, "", lookback=1440)
    assert every.match_count == 2 and every.unparsed_lines == 1
    assert search(source, '"a note of the runtime"', lookback=1440).match_count == 1  # as text
    write(tmp_path, HEAD + "runtime: at the end of the file\n")
    every = search(source, "", lookback=1440)
    assert every.match_count == 1 and every.unparsed_lines == 1
    write(tmp_path, "runtime: before any record\n" + FATAL + HEAD)  # nothing to time them by
    every = search(source, "", lookback=1440)
    assert every.match_count == 1 and every.unparsed_lines == 5


def test_runtime_lines_held_are_bounded(tmp_path: Path) -> None:
    runtime = "".join(f"runtime: line {n}\n" for n in range(MAX_HELD_RUNTIME + 4))
    write(tmp_path, HEAD + runtime + FATAL)
    source = file_source(tmp_path, "plain", ["app.log"], now=NOW)
    every = search(source, "", lookback=1440)
    assert every.match_count == 2 and every.unparsed_lines == 4  # the oldest four
    (fatal,) = search(source, "level:fatal", lookback=1440).records
    assert (
        fatal.message.startswith("runtime: line 4\n") and "runtime: line 3\n" not in fatal.message
    )
    assert search(source, '"runtime: line 0"', lookback=1440).match_count == 1


def test_runtime_lines_inside_a_goroutine_dump_join_it(tmp_path: Path) -> None:
    # `runtime: unexpected return pc for ...` is printed between the frames of a traceback
    dump = "panic: boom\n\ngoroutine 1 [running]:\nmain.f()\n\t/srv/m.go:5 +0x1\n"
    dump += "runtime: unexpected return pc for main.g called from 0x0\nmain.g()\n\t/srv/m.go:9\n"
    write(tmp_path, HEAD + dump + HEAD)
    source = file_source(tmp_path, "plain", ["app.log"], now=NOW)
    every = search(source, "", lookback=1440)
    assert every.match_count == 3 and not every.unparsed_lines
    (panic,) = search(source, "level:fatal", lookback=1440).records
    assert panic.message.splitlines() == [line for line in dump.splitlines() if line]


@pytest.mark.parametrize("fmt", ["cri", "docker"])
def test_runtime_lines_in_a_container_log_join_the_crash_on_their_stream(
    tmp_path: Path, fmt: str
) -> None:
    lines = [("stdout", "handling request id=42"), ("stderr", "runtime: out of memory: x")]
    lines += [("stdout", "draining")]  # the other stream's line between: its own record
    lines += [("stderr", line) for line in FATAL.splitlines()]
    lines += [("stderr", "runtime: alone"), ("stdout", "restarted")]
    stamp = [f"2026-12-04T19:46:37.{i:06d}123Z" for i in range(len(lines))]
    if fmt == "cri":
        text = "".join(f"{stamp[i]} {s} F {t}\n" for i, (s, t) in enumerate(lines))
    else:
        text = "".join(
            msgspec.json.encode({"log": t + "\n", "stream": s, "time": stamp[i]}).decode() + "\n"
            for i, (s, t) in enumerate(lines)
        )
    path = tmp_path / "0.log"
    path.write_text(text)
    os.utime(path, (NOW - 60, NOW - 60))
    source = file_source(tmp_path, fmt, ["0.log"], now=NOW)
    every = search(source, "", lookback=1440)
    # handling, draining, the crash, `runtime: alone` (followed by no crash: a record as
    # before), restarted
    assert every.match_count == 5 and not every.unparsed_lines
    (fatal,) = search(source, "level:fatal", lookback=1440).records
    assert fatal.message.splitlines() == [
        "runtime: out of memory: x",
        *(line for line in FATAL.splitlines() if line),
    ]
    assert fatal.timestamp == "2026-12-04T19:46:37.000Z"  # the runtime line's time
    assert fatal.fields["exception"] == "fatal error" and fatal.fields["stream"] == "stderr"
    assert search(source, "draining", lookback=1440).match_count == 1
    assert search(source, '"runtime: alone"', lookback=1440).records[0].level == ""


@pytest.mark.parametrize("fmt", ["cri", "docker"])
def test_a_runtime_line_hours_before_a_crash_neither_joins_nor_times_it(
    tmp_path: Path, fmt: str
) -> None:
    # An app that writes a `runtime: ` line of its own to stderr at 09:00, its log on stdout,
    # and panics at 19:59: the crash took the 09:00 line and its time (outside the last
    # hour: `level:fatal` found 0). Go writes its explanation within the same moment.
    lines = [
        ("2026-12-04T09:00:00.000000000Z", "stderr", "runtime: GOMAXPROCS=4 set by config"),
        ("2026-12-04T19:30:00.000000000Z", "stdout", "handling request id=42"),
        ("2026-12-04T19:59:00.000000000Z", "stderr", "fatal error: out of memory"),
        ("2026-12-04T19:59:00.000100000Z", "stderr", ""),
        ("2026-12-04T19:59:00.000200000Z", "stderr", "goroutine 1 [running]:"),
    ]
    if fmt == "cri":
        text = "".join(f"{at} {s} F {t}\n" for at, s, t in lines)
    else:
        text = "".join(
            msgspec.json.encode({"log": t + "\n", "stream": s, "time": at}).decode() + "\n"
            for at, s, t in lines
        )
    path = tmp_path / "0.log"
    path.write_text(text)
    os.utime(path, (NOW - 30, NOW - 30))
    source = file_source(tmp_path, fmt, ["0.log"], now=NOW)
    (fatal,) = search(source, "level:fatal", lookback=60).records
    assert fatal.timestamp == "2026-12-04T19:59:00.000Z"
    assert "GOMAXPROCS" not in fatal.message
    (alone,) = search(source, "GOMAXPROCS", lookback=1440).records  # a record of its own
    assert alone.timestamp == "2026-12-04T09:00:00.000Z" and alone.level == ""
