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

import pytest
from logs_helpers import file_source, search

from workers.sources.base import SourceError
from workers.sources.logs.files import LogFile, Reader

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


# A rename rotation while a call reads the topic (logrotate's default `create`: `app.log.1`
# to `app.log.2`, `app.log` to `app.log.1`, a new `app.log`) between the listing and the
# open of a file. Before, each file listed was not found under its listed name (another
# inode there): its lines were not read, the count a lower bound with no word why, and with
# nothing else matched the answer was "stopped at its size or time limit ... try a shorter
# lookback_minutes".
def _rotate_at_first_open(monkeypatch: pytest.MonkeyPatch, folder: Path, then: str) -> None:
    real_open = Reader._open
    done: list[bool] = []

    def _open(self: Reader, file: LogFile) -> object:
        if not done:
            done.append(True)
            os.rename(folder / "app.log.1", folder / "app.log.2")
            os.rename(folder / "app.log", folder / "app.log.1")
            (folder / "app.log").write_bytes(b"")
            if then == "compressed":  # and compressed at once, the plain file removed
                rotated = folder / "app.log.1"
                (folder / "app.log.1.gz").write_bytes(gzip.compress(rotated.read_bytes()))
                rotated.unlink()
        return real_open(self, file)

    monkeypatch.setattr(Reader, "_open", _open)


def test_a_rotation_while_a_call_reads_loses_no_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rotated(tmp_path)
    _rotate_at_first_open(monkeypatch, tmp_path, "renamed")
    found = search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "failed")
    assert found.match_count == 52 and not found.match_count_lower_bound, found.match_count


def test_a_file_rotated_away_while_a_call_reads_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rotated(tmp_path)
    _rotate_at_first_open(monkeypatch, tmp_path, "compressed")
    found = search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "failed")
    assert found.match_count == 50 and found.match_count_lower_bound, found.match_count
    assert found.notes and any("rotated away" in n for n in found.notes), found.notes
    quiet = tmp_path / "quiet"  # the file rotated away held the only failures
    quiet.mkdir()
    put(quiet / "app.log.1", jsonl(1, 9), NOW - 600)
    put(quiet / "app.log", jsonl(500, 20), NOW - 10)
    _rotate_at_first_open(monkeypatch, quiet, "compressed")
    with pytest.raises(SourceError, match="rotated away") as caught:
        search(file_source(quiet, "jsonl", ["app.log*"], now=NOW), "failed")
    assert "size or time limit" not in caught.value.message


# logrotate's `copytruncate` while a call reads the live file (`app.log.1` renamed to
# `app.log.2`, `app.log` copied to a new `app.log.1`, then truncated): the reader's file ends
# where the truncation left it, and the copy was not listed. Before, the lines the live file
# held were silently not read: 50 of 52 failures, an exact count (and with the live file's
# lines the only matches, NO_EVIDENCE).
def _copytruncate_at_first_open(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    real_open = Reader._open
    done: list[bool] = []

    def _open(self: Reader, file: LogFile) -> object:
        opened = real_open(self, file)
        if not done:
            done.append(True)
            os.rename(folder / "app.log.1", folder / "app.log.2")
            live = folder / "app.log"
            (folder / "app.log.1").write_bytes(live.read_bytes())
            os.truncate(live, 0)
        return opened

    monkeypatch.setattr(Reader, "_open", _open)


def test_a_file_truncated_while_a_call_reads_it_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rotated(tmp_path)
    _copytruncate_at_first_open(monkeypatch, tmp_path)
    found = search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "failed")
    assert found.match_count == 50 and found.match_count_lower_bound, found.match_count
    assert found.notes and any("truncated" in n for n in found.notes), found.notes
    quiet = tmp_path / "quiet"  # the truncated file held the only failures
    quiet.mkdir()
    put(quiet / "app.log.1", jsonl(1, 9), NOW - 600)
    put(quiet / "app.log", jsonl(500, 20), NOW - 10)
    _copytruncate_at_first_open(monkeypatch, quiet)
    with pytest.raises(SourceError, match="truncated") as caught:
        search(file_source(quiet, "jsonl", ["app.log*"], now=NOW), "failed")
    assert "size or time limit" not in caught.value.message
