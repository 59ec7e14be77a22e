"""Comparisons (`>`, `>=`, `<`, `<=`) on the fields a FILE topic adds: a format's numeric
fields (`bytes` of an access log, `rows_affected` of a slow log) and the fields the operator
names (a `fields` mapping, a regex pattern's groups), whose values compare as numbers when
they read as one (docs/logs.md). Before, every one of them was refused as "text" (a SCHEMA
error) though the FILE scan compares them: `bytes:>100000` over an access log could not be
asked. A format's text field (`uri`) is still refused.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from contracts import ErrorCode
from tests.workers.logs_helpers import file_source, search
from workers.sources import SourceError

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC).timestamp()
ACCESS = (
    '10.0.0.1 - - [04/Dec/2026:11:50:00 +0000] "GET /big.iso HTTP/1.1" 200 174758 "-" "curl/8"\n'
    '10.0.0.2 - - [04/Dec/2026:11:51:00 +0000] "GET /small HTTP/1.1" 200 217 "-" "curl/8"\n'
    '10.0.0.3 - - [04/Dec/2026:11:52:00 +0000] "GET /none HTTP/1.1" 304 - "-" "curl/8"\n'
)


def write(path: Path, text: str) -> None:
    path.write_text(text)
    os.utime(path, (NOW - 60, NOW - 60))


def test_a_formats_numeric_field_compares(tmp_path: Path) -> None:
    write(tmp_path / "access.log", ACCESS)
    source = file_source(tmp_path, "nginx_access", ["access.log"], now=NOW)
    (big,) = search(source, "bytes:>100000").records
    assert big.fields["uri"] == "/big.iso"
    assert search(source, "bytes:<=217").match_count == 1
    with pytest.raises(SourceError) as caught:  # a text field of the format: refused
        search(source, "uri:>5")
    assert caught.value.code is ErrorCode.SCHEMA


def test_an_operators_mapped_field_and_regex_group_compare(tmp_path: Path) -> None:
    lines = [
        {"timestamp": "2026-12-04T11:50:00Z", "msg": "slow", "attr": {"durationMillis": 1200}},
        {"timestamp": "2026-12-04T11:51:00Z", "msg": "fast", "attr": {"durationMillis": 12}},
    ]
    write(tmp_path / "app.jsonl", "".join(json.dumps(line) + "\n" for line in lines))
    mapped = file_source(
        tmp_path, "jsonl", ["app.jsonl"], now=NOW,
        extra='[topics.APPLICATION.fields]\nduration = "attr.durationMillis"\n',
    )  # fmt: skip
    (slow,) = search(mapped, "duration:>=1000").records
    assert slow.message == "slow"
    assert search(mapped, "duration:12").match_count == 1  # and equality, as before
    write(
        tmp_path / "app.log", "2026-12-04 11:50:00 took=1200 slow\n2026-12-04 11:51:00 took=12 ok\n"
    )
    regex = file_source(
        tmp_path, "regex", ["app.log"], now=NOW,
        extra=r"""pattern = '(?P<time>\S+ \S+) took=(?P<took>\d+) (?P<message>.*)'""" + "\n",
    )  # fmt: skip
    (found,) = search(regex, "took:>1000").records
    assert found.message == "slow"
