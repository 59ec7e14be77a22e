"""A fifo, socket or device a topic's glob matches inside the log roots (a log shipper's named
pipe `app.log.pipe` matched by `app.log*` beside `app.log`) is skipped, never opened, and said:
the regular files answer as they would alone, the model hears that a matched path was
skipped and why (no path), the Control View counts it, `check` names it. Every match special:
a typed error, never NO_EVIDENCE. A match resolving outside the roots still refuses the source.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Generator
from pathlib import Path

import msgspec
import pytest
from logs_helpers import file_source, project, search

from contracts import (
    DEFAULT_BOUNDS,
    ErrorCode,
    InvocationMeta,
    LifecycleStatus,
    control_view,
    observe,
)
from workers.sources.base import SourceError
from workers.sources.logs.check import check_logs
from workers.sources.logs.config import parse_logs_config

NOW = 1_796_000_000.0


def jsonl(path: Path, count: int = 3) -> None:
    path.write_text(
        "".join(
            json.dumps({"ts": NOW - 600 + i, "level": "error", "msg": f"timed out {i}"}) + "\n"
            for i in range(count)
        )
    )
    os.utime(path, (NOW - 60, NOW - 60))


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> Generator[list[str], None, None]:
    """Every path `os.open` was given during the test (a fifo opened without O_NONBLOCK
    blocks; this one must never be opened at all)."""
    seen: list[str] = []
    real = os.open

    def spy(path: object, *args: object, **kwargs: object) -> int:
        seen.append(os.fsdecode(path))  # type: ignore[arg-type]
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", spy)
    yield seen


@pytest.fixture
def unix_socket(tmp_path: Path) -> Generator[Path, None, None]:
    path = tmp_path / "app.log.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    try:
        yield path
    finally:
        server.close()


def test_a_fifo_beside_a_log_is_skipped_and_the_log_answers(
    tmp_path: Path, opened: list[str]
) -> None:
    jsonl(tmp_path / "app.log")
    os.mkfifo(tmp_path / "app.log.pipe")
    found = search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "timed out")
    assert found.match_count == 3 and not found.match_count_lower_bound
    assert found.skipped_files == 1
    assert not any(p.endswith("app.log.pipe") for p in opened), opened
    assert found.notes, found.notes
    note = " ".join(found.notes)
    assert "not a regular file" in note and "a fifo" in note and "skipped" in note, note
    assert str(tmp_path) not in note and "pipe" not in note


def test_a_socket_beside_a_log_is_skipped(tmp_path: Path, unix_socket: Path) -> None:
    jsonl(tmp_path / "app.log")
    found = search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "")
    assert found.match_count == 3 and found.skipped_files == 1
    assert found.notes and "a socket" in " ".join(found.notes)


def test_the_skip_reaches_the_control_view_and_the_model_without_a_path(
    tmp_path: Path,
) -> None:
    jsonl(tmp_path / "app.log")
    os.mkfifo(tmp_path / "app.log.pipe")
    result = project(search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "timed"))
    assert result.skipped_files == 1 and result.match_count == 3
    meta = InvocationMeta(tool="query_logs", session_id="s", status=LifecycleStatus.READY)
    assert control_view(result, meta).skipped_files == 1
    seen = msgspec.json.encode(observe(result, DEFAULT_BOUNDS)).decode()
    assert "skipped" in seen and str(tmp_path) not in seen and "app.log" not in seen
    assert "skipped_files" not in seen  # a count is the Control View's, the note the model's


def test_only_special_files_matched_is_a_typed_error_naming_none(
    tmp_path: Path, unix_socket: Path, opened: list[str]
) -> None:
    os.mkfifo(tmp_path / "app.log.pipe")
    with pytest.raises(SourceError) as caught:
        search(file_source(tmp_path, "jsonl", ["app.log*"], now=NOW), "")
    assert caught.value.code is ErrorCode.AUTHORIZATION
    message = caught.value.message
    assert "not regular files" in message and "2" in message, message
    assert str(tmp_path) not in message and "pipe" not in message
    assert not any(p.startswith(str(tmp_path)) for p in opened), opened


def test_a_fifo_read_twice_by_two_globs_is_skipped_once(tmp_path: Path) -> None:
    jsonl(tmp_path / "app.log")
    os.mkfifo(tmp_path / "app.log.pipe")
    found = search(file_source(tmp_path, "jsonl", ["app.log*", "*.pipe"], now=NOW), "")
    assert found.match_count == 3 and found.skipped_files == 1


def test_a_symlink_to_a_fifo_outside_the_roots_still_refuses_the_source(
    tmp_path: Path,
) -> None:
    root = tmp_path / "logs"
    root.mkdir()
    jsonl(root / "app.log")
    os.mkfifo(tmp_path / "elsewhere.pipe")
    (root / "app.log.pipe").symlink_to(tmp_path / "elsewhere.pipe")
    with pytest.raises(SourceError) as caught:
        search(file_source(root, "jsonl", ["app.log*"], now=NOW), "")
    assert caught.value.code is ErrorCode.AUTHORIZATION
    assert "outside the configured log roots" in caught.value.message


def test_the_check_names_the_skipped_path_and_reads_the_log(tmp_path: Path) -> None:
    jsonl(tmp_path / "app.log")
    os.mkfifo(tmp_path / "app.log.pipe")
    config = parse_logs_config(
        f'roots = ["{tmp_path}"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "jsonl"\n'
        f'paths = ["{tmp_path}/app.log*"]\n'
    )
    (topic,) = check_logs(config, NOW)
    (source,) = topic.sources
    assert source.problem == "" and source.matched == 1
    assert [f.path for f in source.files] == [str(tmp_path / "app.log")]
    assert source.files[0].records == 3
    assert source.skipped == [f"{tmp_path / 'app.log.pipe'}: a fifo"]
    problems = topic.problems()
    assert any("app.log.pipe" in p and "skipped" in p and "a fifo" in p for p in problems)
