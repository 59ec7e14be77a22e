"""Container logs as an SRE meets them (`cri`, `docker`): a Java app's record and its stack
trace, which the runtime writes a line each, are one record with the record's level; a JSON
record without a time of its own takes the runtime's; `kubectl logs --timestamps` output is
read by `cri`. Before, `level:error` over Spring Boot's pod answered NO_EVIDENCE (no level was
read from `2026-12-04 11:51:00.123 ERROR 1 --- [...]`), each stack line was a record of its
own, a timeless JSON line (`{"level":"error","msg":...}`) was a level-less string, and
`kubectl logs --timestamps` output was no line in format cri.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
from logs_helpers import file_source, search

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC).timestamp()
SPRING = [
    "2026-12-04 11:51:00.123 ERROR 1 --- [nio-8080-exec-1] c.s.OrderController : charge failed",
    "java.lang.IllegalStateException: gateway down for o-1042",
    "\tat com.shop.Pay.charge(Pay.java:31)",
    "Caused by: java.net.SocketTimeoutException: Read timed out",
    "\t... 12 more",
    "2026-12-04 11:51:01.000  INFO 1 --- [main] c.s.App : ok",
]


def container_log(fmt: str, lines: list[tuple[str, str]], step_s: int = 0) -> str:
    stamp = [f"2026-12-04T11:{51 + i * step_s // 60:02d}:{i * step_s % 60:02d}.{i:06d}123Z"
             for i in range(len(lines))]  # fmt: skip
    if fmt == "cri":
        return "".join(f"{stamp[i]} {s} F {t}\n" for i, (s, t) in enumerate(lines))
    return "".join(
        msgspec.json.encode({"log": t + "\n", "stream": s, "time": stamp[i]}).decode() + "\n"
        for i, (s, t) in enumerate(lines)
    )


def write(tmp_path: Path, text: str) -> None:
    path = tmp_path / "0.log"
    path.write_text(text)
    os.utime(path, (NOW - 60, NOW - 60))


@pytest.mark.parametrize("fmt", ["cri", "docker"])
def test_a_java_record_and_its_stack_are_one_record(tmp_path: Path, fmt: str) -> None:
    write(tmp_path, container_log(fmt, [("stdout", line) for line in SPRING]))
    source = file_source(tmp_path, fmt, ["0.log"], now=NOW)
    (error,) = search(source, "level:error").records
    assert error.message == "\n".join(SPRING[:5])
    assert error.fields["exception"] == "java.lang.IllegalStateException"
    assert search(source, "level:error SocketTimeoutException").match_count == 1
    assert [r.level for r in search(source, "").records] == ["ERROR", "INFO"]


@pytest.mark.parametrize("fmt", ["cri", "docker"])
def test_a_stack_line_written_later_is_no_part_of_the_record(tmp_path: Path, fmt: str) -> None:
    lines = [("stdout", SPRING[0]), ("stdout", "com.shop.Config: reloaded")]
    write(tmp_path, container_log(fmt, lines, step_s=30))  # 30 s apart: another write
    source = file_source(tmp_path, fmt, ["0.log"], now=NOW)
    assert search(source, "").match_count == 2


@pytest.mark.parametrize("fmt", ["cri", "docker"])
def test_the_other_stream_and_a_traceback_stay_apart(tmp_path: Path, fmt: str) -> None:
    lines = [("stdout", SPRING[0]), ("stderr", "\tindented on stderr"), ("stdout", SPRING[1])]
    lines += [("stdout", "Traceback (most recent call last):"), ("stdout", "ValueError: x")]
    write(tmp_path, container_log(fmt, lines))
    source = file_source(tmp_path, fmt, ["0.log"], now=NOW)
    records = search(source, "").records
    assert sorted(r.message for r in records) == sorted(
        [f"{SPRING[0]}\n{SPRING[1]}", "\tindented on stderr", "Traceback (most recent call "
         "last):\nValueError: x"]
    )  # fmt: skip


@pytest.mark.parametrize(
    ("line", "level"),
    [
        ("2026-12-04T11:51:00.123Z  WARN 1 --- [orders] [main] c.s.App : pool at 90%", "WARN"),
        ("11:51:00.123 [main] ERROR com.shop.Pay - charge failed", "ERROR"),  # logback
        ("2026-12-04 11:51:00,123 FATAL [main] com.shop.Pay - down", "FATAL"),  # log4j
        ("2026-12-04 11:51:00 ERRORS were found in the config", ""),  # a word, no level
    ],
)
def test_java_layouts_give_the_level(tmp_path: Path, line: str, level: str) -> None:
    write(tmp_path, container_log("cri", [("stdout", line)]))
    source = file_source(tmp_path, "cri", ["0.log"], now=NOW)
    assert [r.level for r in search(source, "").records] == [level]


@pytest.mark.parametrize("fmt", ["cri", "docker"])
def test_a_json_record_without_a_time_takes_the_runtimes(tmp_path: Path, fmt: str) -> None:
    lines = [("stdout", '{"level":"error","msg":"charge failed","trace_id":"4bf92f3577b3"}')]
    write(tmp_path, container_log(fmt, lines))
    source = file_source(tmp_path, fmt, ["0.log"], now=NOW)
    (record,) = search(source, "level:error trace_id:4bf92f3577b3").records
    assert record.message == "charge failed"
    assert record.timestamp == "2026-12-04T11:51:00.000Z"


def test_kubectl_logs_timestamps_are_read_by_cri(tmp_path: Path) -> None:
    lines = [
        '2026-12-04T11:51:00.123456789Z {"level":"error","ts":1796385060.5,"msg":"reconcile failed"}',
        "2026-12-04T11:51:01.000000000Z 2026-12-04 11:51:01.000 ERROR 1 --- [main] c.s.Pay : boom",
        "2026-12-04T11:51:01.000000001Z java.lang.IllegalStateException: boom",
        "2026-12-04T11:51:01.000000002Z \tat com.shop.Pay.charge(Pay.java:31)",
        "2026-12-04T11:51:02+00:00 plain words",
        "not a line of kubectl",
    ]
    write(tmp_path, "\n".join(lines) + "\n")
    source = file_source(tmp_path, "cri", ["0.log"], now=NOW)
    found = search(source, "level:error")
    assert [r.message.split("\n")[0] for r in found.records] == ["reconcile failed", lines[1][31:]]
    assert "stream" not in found.records[1].fields  # kubectl does not say which
    assert found.records[1].fields["exception"] == "java.lang.IllegalStateException"
    everything = search(source, "")
    assert everything.match_count == 3


@pytest.mark.parametrize("fmt", ["cri", "docker"])
def test_json_data_a_program_printed_stays_its_text(tmp_path: Path, fmt: str) -> None:
    write(tmp_path, container_log(fmt, [("stdout", '{"id": 7, "total": 12.5}')]))
    (record,) = search(file_source(tmp_path, fmt, ["0.log"], now=NOW), "").records
    assert (record.level, record.message) == ("", '{"id": 7, "total": 12.5}')
