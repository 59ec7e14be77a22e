"""A pattern's count is of records of its level: one template written at several levels (an
access log's request line, whose level comes from its status) is one pattern per level, on
every backend, so the model never reads N routine requests as N errors."""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

from contracts import DEFAULT_BOUNDS, LogScope, Topic
from contracts.logs import LogRecord, LogsUpstream, project_logs
from tests.workers.logs_helpers import file_source, project, search
from workers.sources.logs.mocklog.index import _topic_index
from workers.sources.logs.mocklog.summary import summarise
from workers.sources.logs.mocklog.world import MockRecord

SAMPLES = Path(__file__).parent / "logs_samples"
NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC).timestamp()  # the sample was written at 11:32


def _by_level(patterns: list) -> dict[str, tuple[str, int]]:
    return {p.level: (p.template, p.count) for p in patterns}


def test_an_access_logs_request_line_is_a_pattern_per_level(tmp_path: Path) -> None:
    # nginx's own access log: two 200s, a 404 and a 502. Before: one pattern, ERROR, count 4
    # (the template's severest level over every record of it): four errors to the model.
    shutil.copy(SAMPLES / "nginx_access.log", tmp_path / "access.log")
    os.utime(tmp_path / "access.log", (NOW - 60, NOW - 60))
    source = file_source(tmp_path, "nginx_access", ["access.log"], now=NOW)
    found = search(source, "", lookback=1440)
    assert found.match_count == 4
    levels = _by_level(found.patterns)
    assert {level: count for level, (_, count) in levels.items()} == {
        "INFO": 2,
        "WARN": 1,
        "ERROR": 1,
    }
    assert len({template for template, _ in levels.values()}) == 1  # one template, three levels
    shown = project(found)
    assert sorted((p.level, p.count) for p in shown.patterns) == [
        ("ERROR", 1),
        ("INFO", 2),
        ("WARN", 1),
    ]
    # The timeline holds an exemplar of each: the 502 is not hidden behind the 200s.
    assert {e.level for e in shown.events} == {"INFO", "WARN", "ERROR"}


def _record(second: int, level: str, message: str) -> LogRecord:
    return LogRecord(
        timestamp=f"2026-12-04T11:00:{second:02d}.000Z", level=level, service="web", message=message
    )


_RECORDS = [
    _record(1, "INFO", "GET /orders 200"),
    _record(2, "INFO", "GET /orders 200"),
    _record(3, "ERROR", "GET /orders 502"),
    _record(4, "INFO", "GET /orders 200"),
]
_SCOPE = LogScope(
    topic=Topic.APPLICATION,
    query="",
    lookback_minutes=120,
    start_time="2026-12-04T10:00:00.000Z",
    end_time="2026-12-04T12:00:00.000Z",
)


def test_patterns_made_from_records_are_per_level_too() -> None:
    # An upstream that sends records only (the projector makes the patterns).
    upstream = LogsUpstream(source_kind="FILE", scope=_SCOPE, match_count=4, records=_RECORDS)
    result = project_logs("c1", upstream, DEFAULT_BOUNDS)
    assert sorted((p.level, p.count) for p in result.patterns) == [("ERROR", 1), ("INFO", 3)]


def test_the_mock_summary_is_per_level_too() -> None:
    index = _topic_index(
        tuple(
            MockRecord(
                epoch_ms=int(datetime.fromisoformat(r.timestamp).timestamp() * 1000),
                timestamp=r.timestamp, level=r.level, service=r.service, message=r.message,
                fields={},
            )
            for r in _RECORDS
        )
    )  # fmt: skip
    patterns, records = summarise(index, list(range(len(_RECORDS))), 20, _SCOPE)
    assert sorted((p.level, p.count) for p in patterns) == [("ERROR", 1), ("INFO", 3)]
    assert {r.level for r in records} == {"INFO", "ERROR"}


def test_the_digest_stays_bounded_over_records_of_countless_levels() -> None:
    # Once the distinct messages fill the figures, the rest is one pattern per level; a JSON
    # key `level` holding any text (a game's "world-1-3", a request id) made one per record:
    # 20,000 such records were 20,000 patterns (100,000: 36 MB and 8 s of CPU to rank them),
    # where the Digest's state is meant to be bounded whatever the number of matches.
    from workers.sources.logs.records import MAX_TEMPLATES, Digest, Entry

    digest = Digest(20)
    start = 1_796_000_000_000
    for i in range(MAX_TEMPLATES):
        digest.add(Entry(start + i, "INFO", "svc", f"job {chr(65 + i % 26)} kind{i}x{i * 7}y"))
    for i in range(20_000):
        digest.add(Entry(start + i, f"world-{i}", "svc", "level done"))
    scope = LogScope(
        topic=Topic.APPLICATION, query="", lookback_minutes=60,
        start_time="2026-11-30T00:00:00Z", end_time="2026-11-30T01:00:00Z",
    )  # fmt: skip
    found = digest.upstream("file", scope, UTC)
    assert len(found.patterns) <= MAX_TEMPLATES + 64
    assert sum(p.count for p in found.patterns) == found.match_count == MAX_TEMPLATES + 20_000
