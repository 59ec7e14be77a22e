"""Log files rotated while a worker runs: nothing read twice, nothing missed without a word.

logrotate's `compress` writes `app.log.1.gz` beside `app.log.1` and removes the plain file
only when the compressed one is whole: for as long as the compression runs (seconds for a
large log) both are in the glob `app.log*`, the compressed one growing. Before, a call in that
window read the lines twice (an exact count of double the truth), or once and again from the
partial copy (said as cut short, a lower bound that was over the truth).
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

from logs_helpers import file_source, search

NOW = 1_796_000_000.0


def jsonl(first: int, count: int) -> bytes:
    lines = (
        json.dumps({"ts": NOW - 1800 + i, "level": "error" if i % 10 == 0 else "info",
                    "msg": f"request {i} failed" if i % 10 == 0 else f"request {i} ok"})
        + "\n"
        for i in range(first, first + count)
    )  # fmt: skip
    return "".join(lines).encode()


def put(path: Path, data: bytes, mtime: float) -> None:
    path.write_bytes(data)
    os.utime(path, (mtime, mtime))


def rotated(tmp_path: Path) -> None:
    """`app.log.1` holds requests 0-499 (50 failures), `app.log` 500-519 (2)."""
    put(tmp_path / "app.log.1", jsonl(0, 500), NOW - 600)
    put(tmp_path / "app.log", jsonl(500, 20), NOW - 10)


def test_a_rotation_compressed_beside_its_plain_file_is_read_once(tmp_path: Path) -> None:
    rotated(tmp_path)
    whole = gzip.compress((tmp_path / "app.log.1").read_bytes())
    put(tmp_path / "app.log.1.gz", whole, NOW - 600)  # done, the plain file not removed yet
    found = search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "failed")
    assert found.match_count == 52 and not found.match_count_lower_bound, found.match_count


def test_a_rotation_being_compressed_is_read_once_and_whole(tmp_path: Path) -> None:
    rotated(tmp_path)
    whole = gzip.compress((tmp_path / "app.log.1").read_bytes(), compresslevel=1)
    put(tmp_path / "app.log.1.gz", whole[: len(whole) // 2], NOW - 1)  # gzip still writing
    found = search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "failed")
    assert found.match_count == 52 and not found.match_count_lower_bound, found.match_count
    assert not found.broken_files and not found.notes, found.notes


def test_an_older_compressed_file_of_the_same_name_is_its_own(tmp_path: Path) -> None:
    # `app.log.gz` written before `app.log`'s last line is no copy of it: both are read.
    put(tmp_path / "app.log.gz", gzip.compress(jsonl(0, 100)), NOW - 900)
    put(tmp_path / "app.log", jsonl(100, 100), NOW - 10)
    found = search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "failed")
    assert found.match_count == 20, found.match_count


# logrotate's `copytruncate` copies `app.log` to `app.log.1` (or `app.log-20261205`), then
# truncates `app.log`: until the truncation (the copy's duration, seconds for a large log) the
# copy's lines are in both files, the live one still growing. Before, a call in that window
# counted them twice.
def test_a_copy_being_made_for_copytruncate_is_read_once(tmp_path: Path) -> None:
    put(tmp_path / "app.log.2", jsonl(0, 500), NOW - 900)  # an older rotation of its own
    live = jsonl(500, 300)
    put(tmp_path / "app.log", live, NOW - 5)
    for name in ("app.log.1", "app.log-20261205"):
        copy = tmp_path / name
        put(copy, live[: len(live) * 2 // 3], NOW - 1)  # the copy so far, or whole
        found = search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "failed")
        assert found.match_count == 80 and not found.match_count_lower_bound, found.match_count
        copy.unlink()


def test_a_rotation_of_the_same_size_but_other_lines_is_its_own(tmp_path: Path) -> None:
    put(tmp_path / "app.log", jsonl(500, 100), NOW - 5)
    put(tmp_path / "app.log.1", jsonl(600, 100), NOW - 600)  # as long, other lines
    found = search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "failed")
    assert found.match_count == 20, found.match_count
