"""Heroku's lines (`heroku logs`, a drain's file) under `syslog`
(`workers/sources/logs/heroku.py`): no host, the source and dyno the tag. Before, the tag
`heroku[router]:` was read as the host, an app's `app[web.1]: Error: ...` as host `app[web.1]:`
and app `Error`, no router line had a level (`level:error` missed every H12), and
`http_status:503` could not be asked. Also: `check` does not take an rsyslog file, or any
ISO-stamped lines, for `kubectl logs --timestamps` output read by `cri`.
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
HEROKU = """\
2026-12-04T11:50:00.123456+00:00 heroku[router]: at=error code=H12 desc="Request timeout" \
method=GET path="/orders" host=shop.herokuapp.com request_id=8601b555-6a83-4c12-8269-97c8e32cdb22 \
fwd="203.0.113.9" dyno=web.1 connect=0ms service=30000ms status=503 bytes=0 protocol=https
2026-12-04T11:50:01.000000+00:00 heroku[router]: at=info method=POST path="/pay" \
host=shop.herokuapp.com request_id=1111b555-6a83-4c12-8269-97c8e32cdb22 fwd="203.0.113.9" \
dyno=web.2 connect=1ms service=18ms status=201 bytes=1234 protocol=https
2026-12-04T11:50:02.000000+00:00 app[web.1]: Error: connect ECONNREFUSED 10.0.0.5:5432
2026-12-04T11:50:03.000000+00:00 heroku[web.1]: Error R14 (Memory quota exceeded)
2026-12-04T11:50:04.000000+00:00 heroku[web.1]: State changed from up to crashed
"""


@pytest.fixture
def source(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "heroku.log"
    path.write_text(HEROKU)
    os.utime(path, (NOW - 60, NOW - 60))
    return file_source(tmp_path, "syslog", ["*.log"], now=NOW)


def test_tags_levels_and_fields(source) -> None:  # type: ignore[no-untyped-def]
    records = search(source, "").records
    assert [(r.level, r.fields["app"], r.fields["pid"], "host" in r.fields) for r in records] == [
        ("ERROR", "heroku", "router", False),
        ("INFO", "heroku", "router", False),
        ("", "app", "web.1", False),
        ("ERROR", "heroku", "web.1", False),
        ("", "heroku", "web.1", False),
    ]
    assert records[2].message == "Error: connect ECONNREFUSED 10.0.0.5:5432"
    timeout = records[0].fields
    assert (timeout["code"], timeout["http_status"], timeout["duration_ms"]) == ("H12", 503, 30000)
    assert (timeout["uri"], timeout["client"], timeout["dyno"]) == (
        "/orders",
        "203.0.113.9",
        "web.1",
    )


@pytest.mark.parametrize(
    ("query", "count"),
    [
        ("level:error", 2),
        ("code:H12", 1),
        ("http_status:>=500", 1),
        ("duration_ms:>10000", 1),
        ("dyno:web.2", 1),
        ("request_id:8601b555-6a83-4c12-8269-97c8e32cdb22", 1),
        ("app:app ECONNREFUSED", 1),
    ],
)
def test_an_agents_questions(source, query: str, count: int) -> None:  # type: ignore[no-untyped-def]
    assert search(source, query).match_count == count


def test_a_host_is_still_a_host(tmp_path: Path) -> None:
    path = tmp_path / "messages"
    path.write_text("2026-12-04T11:50:00+00:00 web-1 sshd[812]: Accepted publickey for deploy\n")
    os.utime(path, (NOW - 60, NOW - 60))
    (record,) = search(file_source(tmp_path, "syslog", ["messages"], now=NOW), "").records
    assert (record.fields["host"], record.fields["app"], record.fields["pid"]) == (
        "web-1",
        "sshd",
        "812",
    )


@pytest.mark.parametrize("name", ["heroku.log", "messages"])
def test_check_does_not_propose_cri_for_iso_stamped_lines(tmp_path: Path, name: str) -> None:
    text = HEROKU if name == "heroku.log" else "2026-12-04T11:50:00+00:00 web-1 sshd[812]: hi\n"
    (tmp_path / name).write_text(text)
    config = parse_logs_config(
        f'roots = ["{tmp_path}"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "syslog"\n'
        f'paths = ["{tmp_path}/{name}"]\n'
    )
    (topic,) = check_logs(config, time.time())
    assert topic.problems() == []
