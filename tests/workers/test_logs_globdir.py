"""Wildcards in a FILE topic's folders: Docker's `containers/*/*-json.log` (one folder per
container id) and the kubelet's `pods/*/*/*.log` cover every container, recreated or not
(before: a configuration error, "wildcards only in the file name", so each container id had
to be named and renamed whenever the container was recreated). Every guarantee of a listing
holds across folders: each folder is read lazily and every name looked at, folder or file,
counts against `MAX_NAMES`; the `StopFlag` is checked as before; a folder the glob matches
that resolves outside the roots refuses the source before it is listed; special files are
skipped; newest first and the window's pruning work across folders; `check` lists them."""

from __future__ import annotations

import glob
import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from logs_helpers import file_source, search

import workers.sources.logs.files as files_module
from contracts import ErrorCode
from workers.sources import SourceError
from workers.sources.logs.check import check_logs
from workers.sources.logs.config import LogsConfigError, parse_logs_config
from workers.sources.logs.deadline import StopFlag
from workers.sources.logs.files import RefusedFile, find_files

NOW = 1_796_413_700.0


def stamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z"


def container(root: Path, cid: str, message: str, at: float) -> Path:
    """A container's folder as Docker's json-file driver writes it, one line, mtime `at`."""
    folder = root / "containers" / cid
    folder.mkdir(parents=True)
    (folder / "config.v2.json").write_text("{}")  # what else the daemon keeps there
    (folder / "hostname").write_text("h\n")
    log = folder / f"{cid}-json.log"
    line = {"log": message + "\n", "stream": "stderr", "time": stamp(at)}
    log.write_text(json.dumps(line) + "\n")
    os.utime(log, (at, at))
    return log


def pod(root: Path, folder: str, name: str, message: str, at: float) -> Path:
    where = root / "pods" / folder / name
    where.mkdir(parents=True)
    log = where / "0.log"
    log.write_text(f"{stamp(at)} stderr F {message}\n")
    os.utime(log, (at, at))
    return log


def config(root: Path, glob_: str, fmt: str = "docker") -> str:
    return (
        f'roots = ["{root}"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "{fmt}"\n'
        f'paths = ["{root}/{glob_}"]\n'
    )


@pytest.mark.parametrize(
    ("glob_", "fmt"),
    [("containers/*/*-json.log*", "docker"), ("pods/*/*/*.log", "cri"),
     ("pods/shop_*/[a-z]?*/0.log", "cri"), ("containers/*/x/*.log", "docker")],
)  # fmt: skip
def test_wildcards_in_folders_are_accepted(glob_: str, fmt: str) -> None:
    parse_logs_config(config(Path("/var/lib/docker"), glob_, fmt))


@pytest.mark.parametrize(
    "glob_", ["**/*.log", "containers/**/*-json.log", "containers/**", "a**b/*.log"]
)
def test_any_depth_is_a_configuration_error_naming_the_key(glob_: str) -> None:
    with pytest.raises(LogsConfigError) as caught:
        parse_logs_config(config(Path("/var/lib/docker"), glob_))
    message = str(caught.value)
    assert message.startswith("ACI_LOGS_CONFIG: topics.APPLICATION.paths[0]: "), message
    assert "'**'" in message and "/var/log/pods/*/*/*.log" in message, message


def test_a_folder_wildcard_must_still_lie_under_a_root() -> None:
    with pytest.raises(LogsConfigError, match=r"paths\[0\]: not under any of roots"):
        parse_logs_config(
            'roots = ["/var/log/app"]\n[topics.APPLICATION]\nbackend = "file"\n'
            'format = "jsonl"\npaths = ["/var/log/ap*/x.log"]\n'
        )


def test_the_listing_of_folder_wildcards_matches_as_glob_does(tmp_path: Path) -> None:
    for folder in ("a1", "a2", "b1", ".hid", "[x]"):
        (tmp_path / folder / "in").mkdir(parents=True)
        for name in ("x.log", "y.log", ".z.log", "x.txt"):
            (tmp_path / folder / name).write_text("")
            (tmp_path / folder / "in" / name).write_text("")
    (tmp_path / "afile").write_text("")  # a file a folder wildcard matches: not descended
    (tmp_path / "a3").symlink_to(tmp_path / "a1")  # a folder symlink inside the roots
    patterns = ["*/*.log", "a?/*.log", "[ab]1/x.log", "*/in/*", ".*/*.log", "*/.*",
                "a*/in/x.log", "*/*/*.log", "[[]x]/*", "*/nowhere/*.log", "a*", "a*/in"]  # fmt: skip
    roots = [tmp_path]
    for pattern in patterns:
        full = f"{tmp_path}/{pattern}"
        listed = [n for n in files_module._listing(full, roots) if n is not None]
        assert sorted(listed) == sorted(glob.glob(full)), pattern


def test_docker_containers_are_read_across_folders_newest_first(tmp_path: Path) -> None:
    ids = ["a1" * 32, "b2" * 32, "c3" * 32]
    for n, cid in enumerate(ids):
        container(tmp_path, cid, f"timed out in {cid[:4]}", NOW - 600 + 60 * n)
    old = container(tmp_path, "d4" * 32, "timed out long ago", NOW - 86_400)
    files, cut, matched = find_files(
        [f"{tmp_path}/containers/*/*-json.log"], [str(tmp_path)], int((NOW - 3600) * 1000), 256
    )
    assert not cut and matched == 4
    # newest first across the folders; the container last written before the window pruned
    assert [Path(f.real).name for f in files] == [f"{c}-json.log" for c in reversed(ids)]
    assert str(old) not in [f.real for f in files]
    source = file_source(tmp_path, "docker", ["containers/*/*-json.log*"], now=NOW)
    found = search(source, '"timed out"')
    assert found.match_count == 3 and not found.match_count_lower_bound
    assert {r.fields["container_id"] for r in found.records} == {c[:12] for c in ids}


def test_the_kubelet_pod_folders_are_read_with_their_names(tmp_path: Path) -> None:
    pod(tmp_path, "shop_orders-7d9f_0a1b", "orders", "charge failed", NOW - 120)
    pod(tmp_path, "shop_cart-5c4d_9e8f", "cart", "charge failed", NOW - 60)
    pod(tmp_path, "kube-system_dns-1_2c3d", "coredns", "healthy", NOW - 30)
    source = file_source(tmp_path, "cri", ["pods/*/*/*.log"], now=NOW)
    found = search(source, '"charge failed" namespace:shop')
    assert found.match_count == 2
    assert {(r.fields["pod"], r.fields["container"]) for r in found.records} == {
        ("orders-7d9f", "orders"), ("cart-5c4d", "cart"),
    }  # fmt: skip


def test_every_folder_and_name_counts_against_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 3,000 container folders, empty, past a bound of 1,000 names: the listing stops there
    # (every folder looked at counts, even one without a match), the count is a lower bound
    for n in range(3_000):
        (tmp_path / "containers" / f"{n:064x}").mkdir(parents=True)
    newest = container(tmp_path, "f" * 64, "timed out", NOW - 60)
    monkeypatch.setattr(files_module, "MAX_NAMES", 1_000)
    looked: list[str] = []
    scandir = os.scandir

    def spy(path: object = ".") -> object:
        looked.append(os.fsdecode(path))  # type: ignore[arg-type]
        return scandir(path)  # type: ignore[call-overload]

    monkeypatch.setattr(files_module.os, "scandir", spy)
    pattern = f"{tmp_path}/containers/*/*-json.log"
    _, cut, _ = find_files([pattern], [str(tmp_path)], 0, 256)
    assert cut and len(looked) <= 1_001, len(looked)  # never every folder
    source = file_source(tmp_path, "docker", ["containers/*/*-json.log"], now=NOW)
    try:
        found = search(source, '"timed out"')
    except SourceError as exc:  # stopped before the one container that answers: said so
        assert exc.code is ErrorCode.EXECUTION
        assert "stopped at its size or time limit" in exc.message
    else:
        assert found.match_count_lower_bound, "a cut listing is a lower bound"
    assert newest.exists()


@pytest.mark.serial
def test_a_glob_over_many_folders_stops_at_the_deadline(tmp_path: Path) -> None:
    for n in range(20_000):
        (tmp_path / "containers" / f"{n:064x}").mkdir(parents=True)
    pattern = f"{tmp_path}/containers/*/*-json.log"
    started = time.monotonic()
    files, cut, matched = find_files([pattern], [str(tmp_path)], 0, 256, StopFlag(0.0))
    assert cut and (files, matched) == ([], 0)
    assert time.monotonic() - started < 0.3
    source = file_source(tmp_path, "docker", ["containers/*/*-json.log"], now=NOW)
    with pytest.raises(SourceError) as caught:
        search(source, "timeout", flag=StopFlag(0.02))
    assert caught.value.code is ErrorCode.TIMEOUT


def test_a_symlinked_container_folder_outside_the_roots_is_refused_unlisted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "docker"
    container(root, "a1" * 32, "timed out", NOW - 60)
    outside = tmp_path / "elsewhere" / ("e5" * 32)
    outside.mkdir(parents=True)
    (outside / f"{'e5' * 32}-json.log").write_text("secret\n")
    (root / "containers" / ("e5" * 32)).symlink_to(outside)
    looked: list[str] = []
    scandir = os.scandir

    def spy(path: object = ".") -> object:
        looked.append(os.path.realpath(os.fsdecode(path)))  # type: ignore[arg-type]
        return scandir(path)  # type: ignore[call-overload]

    monkeypatch.setattr(files_module.os, "scandir", spy)
    with pytest.raises(RefusedFile) as refused:
        find_files([f"{root}/containers/*/*-json.log"], [str(root)], 0, 256)
    assert refused.value.path == str(outside) and "outside the log roots" in refused.value.why
    assert str(outside) not in looked, looked  # nothing followed out of the roots
    with pytest.raises(SourceError) as caught:
        search(file_source(root, "docker", ["containers/*/*-json.log"], now=NOW), "")
    assert caught.value.code is ErrorCode.AUTHORIZATION
    assert str(tmp_path) not in caught.value.message


def test_a_folder_into_proc_is_refused(tmp_path: Path) -> None:
    (tmp_path / "containers").mkdir()
    (tmp_path / "containers" / "self").symlink_to("/proc/self")
    with pytest.raises(RefusedFile):
        find_files([f"{tmp_path}/containers/*/environ"], [str(tmp_path)], 0, 256)


def test_special_files_in_matched_folders_are_skipped(tmp_path: Path) -> None:
    log = container(tmp_path, "a1" * 32, "timed out", NOW - 60)
    os.mkfifo(log.parent / f"{'a1' * 32}-json.log.pipe")
    skipped: dict[str, str] = {}
    files, _, _ = find_files(
        [f"{tmp_path}/containers/*/*-json.log*"], [str(tmp_path)], 0, 256, skipped=skipped
    )
    assert [f.real for f in files] == [str(log)]
    assert list(skipped.values()) == ["a fifo"]


def test_check_lists_the_files_a_folder_glob_matches(tmp_path: Path) -> None:
    logs = [container(tmp_path, c * 32, "timed out", NOW - 60 * n)
            for n, c in enumerate(("a1", "b2"))]  # fmt: skip
    parsed = parse_logs_config(config(tmp_path, "containers/*/*-json.log"))
    (topic,) = check_logs(parsed, NOW)
    (source,) = topic.sources
    assert source.matched == 2 and [f.path for f in source.files] == [str(p) for p in logs]
    assert all(f.records == 1 for f in source.files) and topic.problems() == []


def test_check_says_when_the_listing_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(300):
        (tmp_path / "containers" / f"{n:064x}").mkdir(parents=True)
    monkeypatch.setattr(files_module, "MAX_NAMES", 100)
    parsed = parse_logs_config(config(tmp_path, "containers/*/*-json.log"))
    (topic,) = check_logs(parsed, NOW)
    (problem,) = topic.problems()
    assert "the listing stopped after 100 names" in problem, problem


def test_a_folder_is_refused_at_any_depth_however_it_leaves_the_roots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A folder's realpath is spared only when its parent lies inside the roots and it is no
    # symlink: a symlinked second level, and the literal folder a walk starts in symlinked
    # out, are both refused before anything out there is listed.
    root, outside = tmp_path / "logs", tmp_path / "elsewhere"
    (outside / "ctr").mkdir(parents=True)
    (outside / "ctr" / "0.log").write_text("secret\n")
    pod(root, "shop_a-1_0a", "a", "fine", NOW - 60)
    (root / "pods" / "shop_a-1_0a" / "b").symlink_to(outside / "ctr")
    (root / "away").symlink_to(outside)
    looked: list[str] = []
    scandir = os.scandir

    def spy(path: object = ".") -> object:
        looked.append(os.path.realpath(os.fsdecode(path)))  # type: ignore[arg-type]
        return scandir(path)  # type: ignore[call-overload]

    monkeypatch.setattr(files_module.os, "scandir", spy)
    for pattern, real in (("pods/*/*/*.log", outside / "ctr"), ("away/*/*.log", outside)):
        looked.clear()
        with pytest.raises(RefusedFile) as refused:
            find_files([f"{root}/{pattern}"], [str(root)], 0, 256)
        assert refused.value.path == str(real), pattern
        assert not any(Path(p).is_relative_to(outside) for p in looked), (pattern, looked)
