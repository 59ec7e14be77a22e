"""Listing a FILE topic's folder honours the call's deadline and a bound on the names looked
at: a folder of 65,536 (empty) files no longer holds a lookup past its deadline (before:
1.3 s for a 0.05 s deadline, the whole folder listed and stat'ed)."""

from __future__ import annotations

import glob
import os
import time
from pathlib import Path

import pytest
from logs_helpers import file_source, search

import workers.sources.logs.files as files_module
from contracts import ErrorCode
from workers.sources import SourceError
from workers.sources.logs.deadline import StopFlag
from workers.sources.logs.files import find_files

NOW = time.time()


def fill(folder: Path, count: int, suffix: str = ".log") -> None:
    for i in range(count):
        os.close(os.open(folder / f"f{i:06d}{suffix}", os.O_CREAT | os.O_WRONLY, 0o644))


@pytest.mark.serial
def test_a_huge_folder_is_listed_within_the_deadline(tmp_path: Path) -> None:
    fill(tmp_path, 65_536)
    source = file_source(tmp_path, "jsonl", ["*.log"], now=NOW)
    started = time.monotonic()
    with pytest.raises(SourceError) as caught:
        search(source, "timeout", flag=StopFlag(0.05))
    elapsed = time.monotonic() - started
    # As a deadline anywhere else in the scan: stopped before a match, so TIMEOUT.
    assert caught.value.code is ErrorCode.TIMEOUT
    assert elapsed < 0.6, f"{elapsed:.2f} s for a 0.05 s deadline"
    files, cut, _ = find_files([f"{tmp_path}/*.log"], [str(tmp_path)], 0, 256, StopFlag(0.0))
    assert cut and len(files) < 65_536


def test_every_name_looked_at_counts_against_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(tmp_path, 3_000, ".other")  # none of them matches `*.log`
    monkeypatch.setattr(files_module, "MAX_NAMES", 1_000)
    files, cut, matched = find_files([f"{tmp_path}/*.log"], [str(tmp_path)], 0, 256)
    assert (files, cut, matched) == ([], True, 0)
    # A cut listing that found nothing is not "no such file" (UNAVAILABLE): it stopped early.
    with pytest.raises(SourceError) as caught:
        search(file_source(tmp_path, "jsonl", ["*.log"], now=NOW), "")
    assert caught.value.code is ErrorCode.EXECUTION
    assert "stopped at its size or time limit" in caught.value.message


def test_the_listing_matches_as_glob_does(tmp_path: Path) -> None:
    for name in ("a.log", "b.log", ".hidden.log", "c.log.1", "d.txt", "[x].log", "e.LOG"):
        (tmp_path / name).write_text("")
    (tmp_path / "sub.log").mkdir()
    patterns = ["*.log", ".*", "*.log*", "[ab].log", "?.log", "a.log", "missing.log", "*.LOG",
                "[[]x].log", "*", "sub.log/*"]  # fmt: skip
    for pattern in patterns:
        full = f"{tmp_path}/{pattern}"
        listed = [n for n in files_module._listing(full, [tmp_path]) if n is not None]
        assert sorted(listed) == sorted(glob.glob(full)), pattern
    assert list(files_module._listing(f"{tmp_path}/nowhere/*.log", [tmp_path])) == []
