"""A plain log file the system cannot read to its end is said as unreadable, never as a
compressed file, never as corrupt, and never as "no evidence".

A disk's bad sector reads as EIO; the tests need a read(2) that fails for real, on a file the
reader has opened and checked. After the file is opened (its first read to come, or some of
its lines read), its descriptor is made a directory's (`dup2`): every read(2) of it from then
on fails with the kernel's EISDIR, an `OSError` with its errno as EIO's would be. (The path
swapped for a directory is refused before the open: the inode is checked.)
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Generator
from pathlib import Path

import pytest
from logs_helpers import file_source, search

from workers.sources.base import SourceError
from workers.sources.logs.check import check_logs
from workers.sources.logs.config import parse_logs_config
from workers.sources.logs.files import LogFile, Reader

NOW = 1_796_000_000.0
LINES = 3000


def jsonl(count: int) -> bytes:
    lines = (
        json.dumps({"ts": NOW - 3000 + i * 0.25, "level": "error", "msg": f"timed out {i}"}) + "\n"
        for i in range(count)
    )
    return "".join(lines).encode()


def put(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    os.utime(path, (NOW - 60, NOW - 60))


def reads_fail(monkeypatch: pytest.MonkeyPatch, name: str, after: int, folder: Path) -> None:
    """Every read(2) of the file `name` fails once `after` of its lines were given (0: its
    first read, the magic bytes'), its descriptor then a directory's."""
    opened: dict[str, int] = {}
    real_open, real_lines = Reader._open, Reader.lines_of

    def fail(fd: int) -> None:
        directory = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        os.dup2(directory, fd)
        os.close(directory)

    def _open(self: Reader, file: LogFile) -> object:
        raw = real_open(self, file)
        if raw is not None and file.real.endswith(name):
            opened[file.real] = raw.fileno()
            if after == 0:
                fail(raw.fileno())
        return raw

    def lines_of(self: Reader, file: LogFile) -> Generator[str, None, None]:
        for count, line in enumerate(real_lines(self, file), 1):
            yield line
            if count == after and file.real in opened:
                fail(opened[file.real])

    monkeypatch.setattr(Reader, "_open", _open)
    monkeypatch.setattr(Reader, "lines_of", lines_of)


def said_as_unreadable(texts: list[str]) -> bool:
    return any("could not be read" in t for t in texts) and not any(
        "compress" in t or "corrupt" in t for t in texts
    )


def test_a_plain_file_unreadable_part_way_keeps_its_lines_and_says_unreadable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(tmp_path / "app.log", jsonl(LINES))
    reads_fail(monkeypatch, "app.log", 10, tmp_path)
    found = search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "")
    assert 10 <= found.match_count < LINES and found.match_count_lower_bound
    assert found.broken_files == 1
    assert found.notes and said_as_unreadable(found.notes), found.notes


def test_a_plain_file_unreadable_from_its_start_is_an_error_that_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(tmp_path / "app.log.1", jsonl(40))
    reads_fail(monkeypatch, "app.log.1", 0, tmp_path)
    source = file_source(tmp_path, "jsonl", ["app.log*"], now=NOW)
    with pytest.raises(SourceError, match="could not be read") as caught:
        search(source, "")
    assert said_as_unreadable([caught.value.message]), caught.value.message
    assert "size or time limit" not in caught.value.message
    # beside a whole file: its records, and the count a lower bound
    put(tmp_path / "app.log", jsonl(7))
    found = search(source, "")
    assert found.match_count == 7 and found.match_count_lower_bound and found.broken_files == 1
    assert found.notes and said_as_unreadable(found.notes), found.notes


@pytest.mark.parametrize("after", [0, 10])
def test_the_check_says_a_plain_file_is_unreadable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after: int
) -> None:
    (tmp_path / "app.log").write_text("2026-12-04 19:00:00 INFO x\n" * 2000)
    reads_fail(monkeypatch, "app.log", after, tmp_path)
    config = parse_logs_config(
        f'roots = ["{tmp_path}"]\n[topics.APPLICATION]\nbackend = "file"\n'
        f'format = "plain"\npaths = ["{tmp_path}/*"]\n'
    )
    (topic,) = check_logs(config, NOW)
    (file,) = topic.sources[0].files
    assert 0 < file.lines < 2000 if after else file.lines == 0
    assert file.unread.startswith("could not be read"), file.unread
    assert said_as_unreadable(topic.problems()), topic.problems()


def test_a_file_peeked_for_its_records_time_that_cannot_be_read_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # written after the window's end: its first record's time is read to choose it
    (tmp_path / "app.log").write_bytes(jsonl(40))
    os.utime(tmp_path / "app.log", (NOW + 3600, NOW + 3600))
    reads_fail(monkeypatch, "app.log", 0, tmp_path)
    source = file_source(tmp_path, "jsonl", ["app.log*"], now=NOW)
    assert source.clock_warning() == ""
    with pytest.raises(SourceError, match="could not be read") as caught:
        search(source, "")
    assert said_as_unreadable([caught.value.message]), caught.value.message


# A file in the glob the worker may not open (a log `root:adm 0640`, the worker not in `adm`):
# a real EACCES from open(2). The tests run as root, whom no mode refuses: the search runs
# with the effective user `nobody` (root's saved user id takes it back), over a folder outside
# pytest's own (those are 0700).
@pytest.fixture
def public_folder() -> Generator[Path, None, None]:
    folder = Path(tempfile.mkdtemp(prefix="aci-eacces-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


@contextlib.contextmanager
def as_nobody() -> Generator[None, None, None]:
    if os.geteuid() != 0:
        yield  # not root: the file's mode refuses this user already
        return
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def refused(path: Path, data: bytes) -> None:
    put(path, data)
    path.chmod(0o000)


def said_as_refused(texts: list[str]) -> bool:
    return said_as_unreadable(texts) and any("EACCES" in t for t in texts)


def test_a_file_the_worker_may_not_open_is_said_as_unreadable_beside_whole_ones(
    public_folder: Path,
) -> None:
    refused(public_folder / "app.log", jsonl(40))
    put(public_folder / "app.log.1", jsonl(7))
    (public_folder / "app.log.1").chmod(0o644)
    source = file_source(public_folder, "jsonl", ["app.log*"], now=NOW)
    with as_nobody():
        found = search(source, "")
    assert found.match_count == 7 and found.match_count_lower_bound
    assert found.broken_files == 1
    assert found.notes and said_as_refused(found.notes), found.notes


def test_a_file_the_worker_may_not_open_alone_is_an_error_that_says_so(
    public_folder: Path,
) -> None:
    refused(public_folder / "app.log", jsonl(40))
    source = file_source(public_folder, "jsonl", ["app.log*"], now=NOW)
    with as_nobody(), pytest.raises(SourceError, match="could not be read") as caught:
        search(source, "")
    assert said_as_refused([caught.value.message]), caught.value.message
    assert "size or time limit" not in caught.value.message


def test_the_check_says_a_file_the_worker_may_not_open_is_unreadable(
    public_folder: Path,
) -> None:
    refused(public_folder / "app.log", b"2026-12-04 19:00:00 INFO x\n" * 20)
    config = parse_logs_config(
        f'roots = ["{public_folder}"]\n[topics.APPLICATION]\nbackend = "file"\n'
        f'format = "plain"\npaths = ["{public_folder}/*"]\n'
    )
    with as_nobody():
        (topic,) = check_logs(config, NOW)
    (file,) = topic.sources[0].files
    assert file.lines == 0
    assert file.unread.startswith("could not be read") and "EACCES" in file.unread, file.unread
    assert said_as_refused(topic.problems()), topic.problems()


def test_a_file_refused_at_its_open_is_said_as_never_opened_with_what_to_change(
    public_folder: Path,
) -> None:
    # A new user's on-call pass (mosquitto's log is mosquitto:mosquitto 0600, PostgreSQL's
    # postgres:adm 0640): a file the worker may not open was said as one failing part way,
    # "could not be read to their end ...; the lines before the failure were read" and "ended
    # in an error part way", though none was read; check did not say whose file it is.
    refused(public_folder / "app.log", jsonl(40))
    put(public_folder / "app.log.1", jsonl(7))
    (public_folder / "app.log.1").chmod(0o644)
    source = file_source(public_folder, "jsonl", ["app.log*"], now=NOW)
    with as_nobody():
        found = search(source, "")
    (note,) = [n for n in found.notes or [] if "EACCES" in n]
    assert "may not open" in note and "before the failure" not in note, note
    (public_folder / "app.log.1").unlink()
    with as_nobody(), pytest.raises(SourceError) as caught:
        search(source, "")
    message = caught.value.message
    assert "may not open" in message and "part way" not in message, message
    assert "read access" in message and str(public_folder) not in message
    config = parse_logs_config(
        f'roots = ["{public_folder}"]\n[topics.APPLICATION]\nbackend = "file"\n'
        f'format = "jsonl"\npaths = ["{public_folder}/*"]\n'
    )
    with as_nobody():
        (topic,) = check_logs(config, NOW)
    (file,) = topic.sources[0].files
    assert file.unread == (
        "could not be read: the worker may not open it (EACCES, permission denied; owner root, "
        "group root, mode 0000): give the worker's user read access (its group, or an ACL)"
    ), file.unread


def test_two_files_failing_differently_are_both_named(
    public_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One refused at its open (EACCES), one failing part way (EISDIR): the note named only the
    # last failure met, as if both files had failed alike.
    refused(public_folder / "app.log", jsonl(40))
    put(public_folder / "app.log.1", jsonl(LINES))
    (public_folder / "app.log.1").chmod(0o644)
    reads_fail(monkeypatch, "app.log.1", 10, public_folder)
    source = file_source(public_folder, "jsonl", ["app.log*"], now=NOW)
    with as_nobody():
        found = search(source, "")
    assert found.broken_files == 2 and found.match_count_lower_bound
    text = " ".join(found.notes)
    assert "EACCES, permission denied" in text and "EISDIR, is a directory" in text, text


# A log folder the worker may not list (`chmod 000`, or `0700` of another user: a day-2
# permission change under a running fleet). Before, `_names` took the refused listing for a
# folder of no file: beside a readable folder the count was exact with no word (a query for a
# line only the refused folder held answered NO_EVIDENCE), and alone it was "no log file of
# topic ... exists", which sends an operator to check paths that exist.
def _two_folders(public_folder: Path) -> tuple[Path, Path]:
    readable, refused_dir = public_folder / "app", public_folder / "db"
    for folder in (readable, refused_dir):
        folder.mkdir()
        folder.chmod(0o755)
    put(readable / "app.log", jsonl(7))
    (readable / "app.log").chmod(0o644)
    line = json.dumps({"ts": NOW - 120, "level": "error", "msg": "deadlock pelican"}) + "\n"
    put(refused_dir / "db.log", line.encode())
    (refused_dir / "db.log").chmod(0o644)
    refused_dir.chmod(0o000)
    return readable, refused_dir


def test_a_folder_the_worker_may_not_list_beside_a_readable_one_is_never_no_evidence(
    public_folder: Path,
) -> None:
    _two_folders(public_folder)
    source = file_source(public_folder, "jsonl", ["app/*.log", "db/*.log"], now=NOW)
    with as_nobody(), pytest.raises(SourceError, match="could not be listed") as caught:
        search(source, "pelican")
    assert "EACCES" in caught.value.message and "no log file" not in caught.value.message
    with as_nobody():
        found = search(source, "timed")
    assert found.match_count == 7 and found.match_count_lower_bound
    assert found.notes and any("could not be listed" in n and "EACCES" in n for n in found.notes), (
        found.notes
    )


def test_a_folder_the_worker_may_not_list_alone_is_said_as_such(public_folder: Path) -> None:
    _two_folders(public_folder)
    for glob in ("db/*.log", "db/db.log"):  # a wildcard lists the folder; a plain name stats in it
        source = file_source(public_folder, "jsonl", [glob], now=NOW)
        with as_nobody(), pytest.raises(SourceError, match="could not be listed") as caught:
            search(source, "pelican")
        message = caught.value.message
        assert "EACCES" in message and "exists" not in message, message
        assert str(public_folder) not in message, message


def test_the_check_says_a_folder_the_worker_may_not_list(public_folder: Path) -> None:
    _two_folders(public_folder)
    config = parse_logs_config(
        f'roots = ["{public_folder}"]\n[topics.APPLICATION]\nbackend = "file"\n'
        f'format = "jsonl"\npaths = ["{public_folder}/db/*.log"]\n'
    )
    with as_nobody():
        (topic,) = check_logs(config, NOW)
    problems = topic.problems()
    assert any("could not be listed" in p and "EACCES" in p for p in problems), problems
    assert not any("no file matches" in p for p in problems), problems
