"""Counts never lie, and one bad line spoils only itself (issue 31's attacks on FILE)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from logs_helpers import file_source, project, search

from contracts import Topic
from contracts.bounds import DEFAULT_BOUNDS
from contracts.views import encode_view
from workers.sources.base import SourceError
from workers.sources.logs import files
from workers.sources.logs.formats import MAX_FIELDS

NOW = 1_796_000_000.0


def jsonl(count: int, message: str = "upstream timed out", start: float = 600) -> bytes:
    lines = (
        json.dumps({"ts": NOW - start + i, "level": "error", "msg": f"{message} {i}"}) + "\n"
        for i in range(count)
    )
    return "".join(lines).encode()


CODECS = {
    "gz": ["gzip"],
    "xz": ["xz"],
    "bz2": ["bzip2"],
    "zst": ["zstd", "-q"],
    "lz4": ["lz4", "-q"],
}


def rotations(folder: Path) -> None:
    """app.log plus one rotation per compression, each written by the real command-line tool."""
    (folder / "app.log").write_bytes(jsonl(10))
    for n, (suffix, command) in enumerate(CODECS.items(), start=1):
        if shutil.which(command[0]) is None:
            pytest.skip(f"{command[0]} is not installed")
        plain = folder / f"app.log.{n}"
        plain.write_bytes(jsonl(101, start=500 - n))
        target = [f"{plain}.lz4"] if suffix == "lz4" else []  # lz4 to a pipe writes stdout
        subprocess.run([*command, str(plain), *target], check=True)
        if suffix in ("zst", "lz4"):
            plain.unlink()  # zstd and lz4 keep their input
        os.utime(folder / f"app.log.{n}.{suffix}", (NOW - 60, NOW - 60))
    os.utime(folder / "app.log", (NOW, NOW))


def test_every_compressed_rotation_is_read_by_its_magic_bytes(tmp_path: Path) -> None:
    rotations(tmp_path)
    source = file_source(tmp_path, "jsonl", ["app.log*"], now=NOW)
    found = search(source, '"timed out"')  # a phrase: the prefilter runs on decompressed text
    assert found.match_count == 10 + 5 * 101 and not found.match_count_lower_bound
    assert not found.unread_files and not found.notes


def test_a_compression_the_worker_cannot_read_makes_the_count_a_lower_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rotations(tmp_path)
    # As on a worker without the zstandard and lz4 packages
    monkeypatch.setattr(files, "UNREADABLE", frozenset({"zstd", "lz4"}))
    source = file_source(tmp_path, "jsonl", ["app.log*"], now=NOW)
    found = search(source, '"timed out"')
    assert found.match_count == 10 + 3 * 101 and found.match_count_lower_bound
    assert found.unread_files == 2 and found.notes
    assert "compressed with lz4, zstd, which this worker cannot read" in found.notes[0]
    result = project(found)
    assert result.truncated and result.match_count_lower_bound and result.unread_files == 2
    # only unreadable files: an error, never a silent exact 0
    for name in tmp_path.iterdir():
        if not name.name.endswith((".zst", ".lz4")):
            name.unlink()
    with pytest.raises(SourceError, match="compressed with lz4, zstd"):
        search(source, '"timed out"')


def test_a_broken_archive_is_a_lower_bound_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "app.log").write_bytes(jsonl(5))
    (tmp_path / "app.log.1.zst").write_bytes(b"\x28\xb5\x2f\xfd" + os.urandom(200))
    for name in ("app.log", "app.log.1.zst"):
        os.utime(tmp_path / name, (NOW, NOW))
    source = file_source(tmp_path, "jsonl", ["app.log*"], now=NOW)
    found = search(source, "")
    assert found.match_count == 5 and found.match_count_lower_bound
    assert found.notes and "corrupt part way" in found.notes[-1] and found.broken_files == 1


SLOW = """# Time: 2026-11-29T08:00:00.000000Z
# User@Host: app[app] @ localhost []
# Query_time: 0.5  Lock_time: 0.0 Rows_sent: 1  Rows_examined: 10
SET timestamp={t0};
INSERT INTO notes (body) VALUES ('hello
# Time: 2026-11-29T08:00:01.000000Z
# User@Host: root[root] @ localhost []
# Query_time: 9.0  Lock_time: 0.0 Rows_sent: 0  Rows_examined: {huge}
SET timestamp={t1};
DELETE FROM payments;
');
# Time: 2026-11-29T08:00:02.000000Z
# User@Host: app[app] @ localhost []
# Query_time: 1e999  Lock_time: 0.0 Rows_sent: 1  Rows_examined: {huge}
SET timestamp={t1};
SELECT 1;
"""


def test_slow_log_headers_inside_a_string_literal_are_sql(tmp_path: Path) -> None:
    t0 = int(NOW) - 120
    (tmp_path / "slow.log").write_text(SLOW.format(t0=t0, t1=t0 + 1, huge="9" * 5000))
    source = file_source(tmp_path, "mysql_slow", ["slow.log"], now=NOW,
                         topic=Topic.DATABASE_SLOW_QUERY)  # fmt: skip
    every = search(source, "")
    assert every.match_count == 2  # the INSERT (with the literal) and SELECT 1: no fake DELETE
    assert search(source, "db_user:root").match_count == 0
    insert = search(source, "INSERT").records[0]
    assert "DELETE FROM payments" in insert.message and insert.fields["db_user"] == "app"
    select = search(source, '"SELECT 1"').records[0]
    assert "rows_examined" not in select.fields and "duration_ms" not in select.fields


def test_an_epoch_beyond_any_date_is_a_bad_line_not_a_failed_topic(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(
        '{"ts": 1e306, "level": "error", "msg": "far future"}\n'
        f'{{"ts": {NOW - 10}, "level": "error", "msg": "now"}}\n'
        '{"ts": -1e300, "level": "error", "msg": "far past"}\n'
    )
    source = file_source(tmp_path, "jsonl", ["a.jsonl"], now=NOW, extra='time_unit = "s"\n')
    found = search(source, "level:ERROR")
    assert found.match_count == 1 and found.unparsed_lines == 2


def test_fields_per_record_are_capped_and_the_result_is_byte_bounded(tmp_path: Path) -> None:
    body = {f"field_{i}": "x" * 100 for i in range(5000)}
    lines = [
        json.dumps({"ts": NOW - 100 + i, "level": "error", "msg": f"big {i}", "body": body})
        for i in range(30)
    ]
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
    found = search(file_source(tmp_path, "jsonl", ["a.jsonl"], now=NOW), "big")
    assert found.match_count == 30
    for record in found.records:
        assert len(record.fields) <= MAX_FIELDS + 1 and record.fields["fields_dropped"] > 4900
    result = project(found)
    assert all(len(e.fields) <= DEFAULT_BOUNDS.logs_max_fields for e in result.events)
    assert len(encode_view(result)) <= DEFAULT_BOUNDS.logs_max_bytes + 4096 and result.truncated
