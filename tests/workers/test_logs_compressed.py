"""Compressed rotations cut short, corrupt or built to explode: never silent, always bounded.

A rotation interrupted or a full disk leaves a compressed file without its end: the lines
decoded before the cut are read and counted, the cut is said (the count a lower bound, the
file counted in `broken_files`, a note), whatever the codec. Files are written by the real
command-line tools (skipped where one is missing) and cut by the test.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import json
import lzma
import os
import shutil
import subprocess
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from logs_helpers import file_source, project, search

from contracts import LifecycleStatus
from contracts.views import InvocationMeta, control_view
from workers.sources.base import SourceError
from workers.sources.logs.config import ScanBudget
from workers.sources.logs.deadline import StopFlag
from workers.sources.logs.files import LogFile, Reader

NOW = 1_796_000_000.0
LINES = 10_000

# Small blocks, as a rotation of a busy log has many: the blocks before a cut decode.
TOOLS = {
    "gz": ["gzip", "-c"],
    "xz": ["xz", "-c", "--block-size=65536"],
    "bz2": ["bzip2", "-c", "-1"],
    "zst": ["zstd", "-q", "-c"],
    "lz4": ["lz4", "-q", "-c", "-B4"],
}


def jsonl(count: int, message: str = "upstream timed out") -> bytes:
    lines = (
        json.dumps({"ts": NOW - 3000 + i * 0.25, "level": "error", "msg": f"{message} {i}"}) + "\n"
        for i in range(count)
    )
    return "".join(lines).encode()


def compressed(suffix: str, data: bytes) -> bytes:
    command = TOOLS[suffix]
    if shutil.which(command[0]) is None:
        pytest.skip(f"{command[0]} is not installed")
    return subprocess.run(command, input=data, capture_output=True, check=True).stdout


def put(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    os.utime(path, (NOW - 60, NOW - 60))


@pytest.mark.parametrize("suffix", list(TOOLS))
def test_a_rotation_cut_short_keeps_its_lines_and_says_it_was_cut(
    tmp_path: Path, suffix: str
) -> None:
    whole = compressed(suffix, jsonl(LINES))
    put(tmp_path / f"app.log.1.{suffix}", whole[: len(whole) * 6 // 10])
    source = file_source(tmp_path, "jsonl", ["app.log*"], now=NOW)
    for query in ("", '"timed out"'):  # the text prefilter does not hide the cut
        found = search(source, query)
        assert 0 < found.match_count < LINES and found.match_count_lower_bound
        assert found.broken_files == 1
        assert found.notes and any("cut short" in note for note in found.notes)
    result = project(found)
    assert result.truncated and result.broken_files == 1
    meta = InvocationMeta(tool="query_logs", session_id="s", status=LifecycleStatus.READY)
    assert control_view(result, meta).broken_files == 1


@pytest.mark.parametrize("suffix", list(TOOLS))
def test_a_cut_before_any_whole_block_is_an_error_that_says_so(tmp_path: Path, suffix: str) -> None:
    whole = compressed(suffix, jsonl(40))
    put(tmp_path / f"app.log.1.{suffix}", whole[:24])  # its headers: not one line decodes
    source = file_source(tmp_path, "jsonl", ["app.log*"], now=NOW)
    with pytest.raises(SourceError, match="cut short") as caught:
        search(source, "")
    assert "size or time limit" not in caught.value.message
    # beside a whole file: its records, and the count a lower bound
    put(tmp_path / "app.log", jsonl(7))
    found = search(source, "")
    assert found.match_count == 7 and found.match_count_lower_bound and found.broken_files == 1


@pytest.mark.parametrize("suffix", list(TOOLS))
def test_a_whole_rotation_is_exact(tmp_path: Path, suffix: str) -> None:
    # two frames or members back to back (`cat a.gz b.gz`, pzstd, lz4 --content-size): whole
    put(tmp_path / f"app.log.1.{suffix}", compressed(suffix, jsonl(30)) * 2)
    found = search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "")
    assert found.match_count == 60 and not found.match_count_lower_bound
    assert not found.broken_files and not found.notes


@pytest.mark.parametrize("suffix", list(TOOLS))
def test_a_corrupt_rotation_keeps_what_it_read_and_says_corrupt(
    tmp_path: Path, suffix: str
) -> None:
    whole = bytearray(compressed(suffix, jsonl(LINES)))
    middle = len(whole) * 6 // 10
    whole[middle : middle + 64] = bytes(64)  # a disk's bad sector: zeros amid the data
    put(tmp_path / f"app.log.1.{suffix}", bytes(whole))
    found = search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "")
    assert found.match_count < LINES and found.match_count_lower_bound
    assert found.broken_files == 1
    assert found.notes and any("corrupt" in note for note in found.notes)


def _zstd(data: bytes) -> bytes:
    zstandard = pytest.importorskip("zstandard")
    return bytes(zstandard.ZstdCompressor().compress(data))


def _lz4(data: bytes) -> bytes:
    frame = pytest.importorskip("lz4.frame")
    return bytes(frame.compress(data))


BOMBS: dict[str, Callable[[bytes], bytes]] = {
    "gz": gzip.compress,
    "xz": lzma.compress,
    "bz2": bz2.compress,
    "zst": _zstd,
    "lz4": _lz4,
}


@pytest.mark.parametrize("kind", ["zeros", "lines"])
@pytest.mark.parametrize("suffix", list(BOMBS))
def test_a_decompression_bomb_stops_at_the_byte_budget(
    tmp_path: Path, suffix: str, kind: str
) -> None:
    # 1 GiB decompressed from a file of a few MiB at most: one long line of zeros, or log lines
    unit = b"\0" * (1 << 20) if kind == "zeros" else jsonl(1)[:-1].ljust(1023) + b"\n"
    one = BOMBS[suffix](unit * (1 if kind == "zeros" else 1024))
    path = tmp_path / f"bomb.{suffix}"
    put(path, one * 1024)
    budget = ScanBudget(max_bytes=8 << 20, max_line_bytes=1 << 20)
    reader = Reader(budget, StopFlag(30), [str(tmp_path)])
    tracemalloc.start()
    try:
        with contextlib.closing(reader.lines_of(LogFile(str(path), path.stat()))) as lines:
            count = sum(1 for _ in lines)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert reader.out_of_budget and reader.stopped and not reader.broken
    assert reader.bytes_read <= budget.max_bytes + budget.max_line_bytes + 1
    assert count <= budget.max_bytes // 1024 + 1
    assert peak < 48 << 20  # the 1 GiB never sits in memory


def test_the_prefilter_sees_decompressed_text_of_a_cut_file(tmp_path: Path) -> None:
    whole = compressed("gz", jsonl(LINES, "needle in a cut file"))
    put(tmp_path / "app.log.1.gz", whole[: len(whole) // 2])
    source = file_source(tmp_path, "jsonl", ["app.log*"], now=NOW)
    found = search(source, '"needle in a cut"')
    assert found.match_count > 0 and found.match_count_lower_bound and found.broken_files == 1


@pytest.mark.parametrize("suffix", list(TOOLS))
def test_a_rotation_copied_with_an_old_mtime_is_chosen_by_its_records_time(
    tmp_path: Path, suffix: str
) -> None:
    # A `cp -p` copy or a tarball keeps an old mtime over recent records: the file is chosen
    # by its first record's time, read through its codec (found by its magic bytes, not by a
    # `.gz` name: a zstd rotation was pruned by mtime, its records missing from the count).
    path = tmp_path / f"app.log.2.{suffix}"
    path.write_bytes(compressed(suffix, jsonl(100)))
    os.utime(path, (NOW - 7200, NOW - 7200))
    found = search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "")
    assert found.match_count == 100 and not found.match_count_lower_bound


def _empty_blocks(count: int) -> bytes:
    """A zstd frame of `count` empty raw blocks and a last one: legal, tiny, slow to walk."""
    header = (0xFD2FB528).to_bytes(4, "little") + bytes([0x00, 0x50])  # no size, a window
    return header + b"\0\0\0" * count + b"\1\0\0"


def test_a_walk_of_a_zstd_file_stopped_by_the_deadline_is_no_exact_count(tmp_path: Path) -> None:
    # 200,000 empty blocks (600 kB) after the lines, the file cut before its last block: the
    # walk at its end stopped at the deadline and called the file whole (5 lines, exact).
    path = tmp_path / "app.log.1.zst"
    put(path, compressed("zst", jsonl(5)) + _empty_blocks(200_000)[:-3])
    reader = Reader(ScanBudget(), StopFlag(0), [str(tmp_path)])
    assert len(list(reader.lines_of(LogFile(str(path), path.stat())))) == 5
    assert reader.stopped  # not read to its end: the count is a lower bound


def test_a_zstd_file_written_while_read_is_judged_by_the_bytes_decoded(tmp_path: Path) -> None:
    # logrotate compressing as a call reads: the file is judged as it was when opened (its
    # rest is the next call's); judged by its size after the decoder stopped at a cut, it was
    # whole and the cut silent.
    from workers.sources.logs.compression import decompressed

    whole = compressed("zst", jsonl(LINES))
    path = tmp_path / "app.log.1.zst"
    put(path, whole[: len(whole) // 2])
    with path.open("rb") as raw:
        stream = decompressed(raw, "zstd", lambda: False)
        assert stream.read(1000)
        with path.open("ab") as out:  # written on while read
            out.write(whole[len(whole) // 2 :])
        with pytest.raises(EOFError):
            stream.read()


def test_a_pzstd_rotation_that_starts_with_a_skippable_frame_is_read(tmp_path: Path) -> None:
    # pzstd (logrotate's `compresscmd pzstd`) starts its file with a skippable frame (each
    # frame's size), not zstd's magic: the file was read as text, 100 records answered "not in
    # the configured format".
    if shutil.which("pzstd") is None:
        pytest.skip("pzstd is not installed")
    data = subprocess.run(
        ["pzstd", "-q", "-c", "-p", "2"], input=jsonl(100), capture_output=True, check=True
    ).stdout
    assert data[:4] == b"\x50\x2a\x4d\x18"
    put(tmp_path / "app.log.1.zst", data)
    found = search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "")
    assert found.match_count == 100 and not found.match_count_lower_bound
    # lz4 frames may follow skippable ones too: the codec is the first real frame's
    put(tmp_path / "app.log.1.zst", data[:12] + compressed("lz4", jsonl(7)))
    found = search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "")
    assert found.match_count == 7 and not found.match_count_lower_bound


@pytest.mark.parametrize("count", [100, LINES])
@pytest.mark.parametrize("tail", [b"\0" * 4096, b"garbage!"])
def test_bytes_after_the_last_zstd_frame_lose_none_of_its_lines(
    tmp_path: Path, count: int, tail: bytes
) -> None:
    # A rotation followed by zeros (a crash after the file grew) or stray bytes: zstandard's
    # reader raised on them inside the read that held the last frame's end, and the newest
    # lines were lost: 100 of 100 (an error, nothing read), 66 of 10,000.
    put(tmp_path / "app.log.1.zst", compressed("zst", jsonl(count)) + tail)
    found = search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "")
    assert found.match_count == count and found.match_count_lower_bound
    assert found.broken_files == 1 and found.notes and "corrupt" in found.notes[0]


@pytest.mark.serial
def test_a_zstd_file_of_many_empty_frames_stops_at_the_deadline(tmp_path: Path) -> None:
    # 200,000 empty frames (1.8 MB), each with its own header: read a frame at a time, the
    # deadline was never asked (a million took 18 s, whatever the call's time limit).
    frame = (0xFD2FB528).to_bytes(4, "little") + b"\x20\x00\x01\x00\x00"
    path = tmp_path / "app.log.1.zst"
    put(path, compressed("zst", jsonl(5)) + frame * 200_000)
    reader = Reader(ScanBudget(), StopFlag(0), [str(tmp_path)])
    started = time.monotonic()
    assert len(list(reader.lines_of(LogFile(str(path), path.stat())))) == 5
    assert reader.stopped and time.monotonic() - started < 1.0


@pytest.mark.parametrize("suffix", list(TOOLS))
def test_a_copied_rotation_with_bytes_after_its_end_is_chosen_by_its_records(
    tmp_path: Path, suffix: str
) -> None:
    # `cp -p` of a rotation with zeros after its end (a crash after the file grew): the peek
    # at its first record raised on the zeros and lost what it had decoded, so the mtime
    # (2 h ago) ruled it out: zstd and xz answered 0 records, exact, over 100 in the window.
    path = tmp_path / f"app.log.2.{suffix}"
    path.write_bytes(compressed(suffix, jsonl(100)) + b"\0" * 512)
    os.utime(path, (NOW - 7200, NOW - 7200))
    found = search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "")
    assert found.match_count == 100


def with_dictionary(folder: Path, data: bytes, *, dict_id: bool = True) -> bytes:
    """`data` compressed by the zstd CLI with a dictionary it trained (`zstd --train`), its
    frame header naming the dictionary (`Dictionary_ID`) unless `dict_id` is False."""
    if shutil.which("zstd") is None:
        pytest.skip("zstd is not installed")
    samples = folder / "train"
    samples.mkdir(exist_ok=True)
    for k in range(200):
        (samples / f"{k}.log").write_bytes(jsonl(20, f"sample {k} upstream timed out"))
    dictionary = folder / "dictionary"
    subprocess.run(
        ["zstd", "--train", "-q", "--maxdict=4096", "-o", str(dictionary),
         *map(str, samples.iterdir())],
        check=True, capture_output=True,
    )  # fmt: skip
    command = ["zstd", "-q", "-c", "-D", str(dictionary), *([] if dict_id else ["--no-dictID"])]
    out = subprocess.run(command, input=data, capture_output=True, check=True).stdout
    assert (out[4] & 3 != 0) == dict_id  # the frame header's Dictionary_ID_flag
    return out


def test_a_zstd_rotation_compressed_with_a_dictionary_says_so(tmp_path: Path) -> None:
    # said "corrupt part way": the frame is whole, its header names a dictionary we lack
    put(tmp_path / "app.log.1.zst", with_dictionary(tmp_path, jsonl(100)))
    source = file_source(tmp_path, "jsonl", ["app.log*"], now=NOW)
    with pytest.raises(SourceError, match="dictionary this worker does not have") as caught:
        search(source, "")
    message = caught.value.message
    assert "corrupt" not in message and "size or time limit" not in message
    # beside a whole file: its records, the count a lower bound, the file counted and said
    put(tmp_path / "app.log", jsonl(7))
    found = search(source, "")
    assert found.match_count == 7 and found.match_count_lower_bound and found.broken_files == 1
    assert found.notes and any("dictionary this worker does not have" in n for n in found.notes)
    assert not any("corrupt" in note for note in found.notes)


def test_zstd_frames_before_one_with_a_dictionary_are_read(tmp_path: Path) -> None:
    data = compressed("zst", jsonl(30)) + with_dictionary(tmp_path, jsonl(100))
    put(tmp_path / "app.log.1.zst", data)
    found = search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "")
    assert found.match_count == 30 and found.match_count_lower_bound and found.broken_files == 1
    assert found.notes and "dictionary" in found.notes[0] and "corrupt" not in found.notes[0]


def test_the_check_says_a_zstd_file_needs_a_dictionary(tmp_path: Path) -> None:
    from workers.sources.logs.check import check_logs
    from workers.sources.logs.config import parse_logs_config

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "app.log.1").write_bytes(with_dictionary(tmp_path, jsonl(100)))
    config = parse_logs_config(
        f'roots = ["{logs}"]\n[topics.APPLICATION]\nbackend = "file"\n'
        f'format = "jsonl"\npaths = ["{logs}/*"]\n'
    )
    (topic,) = check_logs(config, NOW)
    (file,) = topic.sources[0].files
    assert "dictionary this worker does not have" in file.unread and "corrupt" not in file.unread
    assert any("not read" in p and "dictionary" in p for p in topic.problems())


def test_a_zstd_frame_compressed_with_a_dictionary_it_does_not_name_is_corrupt(
    tmp_path: Path,
) -> None:
    # `zstd --no-dictID`: nothing in the frame says a dictionary is needed; it does not decode
    put(tmp_path / "app.log.1.zst", with_dictionary(tmp_path, jsonl(100), dict_id=False))
    with pytest.raises(SourceError, match="corrupt part way"):
        search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "")


@pytest.mark.parametrize("seed", range(32))
def test_bytes_after_a_zstd_magic_are_corrupt_whatever_dictionary_they_seem_to_name(
    tmp_path: Path, seed: int
) -> None:
    # random bytes after the magic name a dictionary 3 times in 4: no frame, whole by its
    # blocks, holds them, so they are corrupt, not a frame that needs a dictionary
    import random

    tail = random.Random(seed).randbytes(200)
    put(tmp_path / "app.log.1.zst", b"\x28\xb5\x2f\xfd" + bytes([seed & 3 | 0x40]) + tail)
    with pytest.raises(SourceError, match="corrupt part way"):
        search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "")


def test_a_zstd_rotation_with_a_dictionary_cut_short_says_it_needs_the_dictionary(
    tmp_path: Path,
) -> None:
    # said "corrupt part way": its header names a dictionary and its first blocks are whole
    # (a real one's, at most 128 KiB each); the cut after them changes nothing of what it needs
    whole = with_dictionary(tmp_path, jsonl(6000))
    put(tmp_path / "app.log.1.zst", whole[: len(whole) * 2 // 3])
    source = file_source(tmp_path, "jsonl", ["app.log*"], now=NOW)
    with pytest.raises(SourceError, match="dictionary this worker does not have") as caught:
        search(source, "")
    assert "corrupt" not in caught.value.message
