"""The JVM's unified logging (`-Xlog:gc*:file=gc.log:time,uptime,level,tags`, its GC log)
under `plain` (`workers/sources/logs/jvmlogs.py`). Before, every record was level-less, the
`[info][gc]` decorations in its message (every template), `level:warn` missed `To-space
exhausted` and no pause could be compared (`duration_ms:>1000`).
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from logs_helpers import file_source, search

from workers.sources.logs.check import check_logs
from workers.sources.logs.config import parse_logs_config

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC).timestamp()
GC_LOG = """\
[2026-12-04T11:40:00.015+0000][0.015s][info][gc] Using G1
[2026-12-04T11:50:00.100+0000][600.100s][info][gc,start    ] GC(12) Pause Young (Normal) (G1 Evacuation Pause)
[2026-12-04T11:50:00.104+0000][600.104s][info][gc          ] GC(12) Pause Young (Normal) (G1 Evacuation Pause) 100M->20M(256M) 3.456ms
[2026-12-04T12:50:00.500+0100][1200.500s][warning][gc,alloc] GC(40) To-space exhausted
[2026-12-04T11:51:01.900+0000][1201.900s][1234][1301][info ][gc] GC(41) Pause Full (G1 Compaction Pause) 255M->250M(256M) 1402.118ms
[2026-12-04T11:51:02.000+0000][1202.000s][error][gc,heap] Heap exhausted
[0.016s][info][gc] a line without a time decorator
"""


@pytest.fixture
def found(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "gc.log"
    path.write_text(GC_LOG)
    os.utime(path, (NOW - 60, NOW - 60))
    return search(file_source(tmp_path, "plain", ["gc.log"], now=NOW), "")


def test_levels_tags_and_times(found) -> None:  # type: ignore[no-untyped-def]
    records = found.records
    assert [(r.timestamp, r.level, r.fields["logger"]) for r in records] == [
        ("2026-12-04T11:40:00.015Z", "INFO", "gc"),
        ("2026-12-04T11:50:00.100Z", "INFO", "gc,start"),
        ("2026-12-04T11:50:00.104Z", "INFO", "gc"),
        ("2026-12-04T11:50:00.500Z", "WARN", "gc,alloc"),  # its +0100 read
        ("2026-12-04T11:51:01.900Z", "INFO", "gc"),
        ("2026-12-04T11:51:02.000Z", "ERROR", "gc,heap"),
    ]
    assert records[3].message == "GC(40) To-space exhausted"
    assert (records[4].fields["pid"], records[4].fields["thread"]) == ("1234", "1301")
    assert records[4].fields["duration_ms"] == 1402.118
    assert found.unparsed_lines == 1  # no wall time to read: a line not in the format


@pytest.mark.parametrize(
    ("query", "count"),
    [
        ("level:warn", 1),
        ("level:error", 1),
        ("duration_ms:>1000", 1),
        ("duration_ms:<10", 1),
        ("logger:gc,alloc", 1),
        ('"Pause Full"', 1),
    ],
)
def test_an_agents_questions(tmp_path: Path, query: str, count: int) -> None:
    path = tmp_path / "gc.log"
    path.write_text(GC_LOG)
    os.utime(path, (NOW - 60, NOW - 60))
    assert search(file_source(tmp_path, "plain", ["gc.log"], now=NOW), query).match_count == count


def test_check_says_to_add_the_time_decorator(tmp_path: Path) -> None:
    (tmp_path / "gc.log").write_text(
        "[0.015s][info][gc] Using G1\n[600.104s][info ][gc,start] GC(12) Pause Young (Normal)\n"
    )
    config = parse_logs_config(
        f'roots = ["{tmp_path}"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "plain"\n'
        f'paths = ["{tmp_path}/gc.log"]\n'
    )
    (topic,) = check_logs(config, time.time())
    assert topic.problems() == [
        f"APPLICATION: {tmp_path}/gc.log: no line is in format plain: the JVM's -Xlog lines "
        "without a time decorator (its default is uptime,level,tags): add time, "
        "-Xlog:gc*:file=gc.log:time,uptime,level,tags"
    ]
