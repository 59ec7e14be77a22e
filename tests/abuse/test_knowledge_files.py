"""`ACI_KNOWLEDGE_DIR` serves only the regular files inside it: a symlink out of the folder (a
file or a directory), a special file (fifo, /proc) or a file name that is not UTF-8 never
becomes an excerpt, and never makes the source UNAVAILABLE."""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from contracts.requests import LookupKnowledgeRequest
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings, build_index

SECRET = "zebraquartz outsider secret"
GOOD = "# Pool\n\n## Symptoms\nThe connection pool is exhausted; zebraquartz appears here too.\n"


def _folder(tmp_path: Path) -> Path:
    kb = tmp_path / "kb"
    (kb / "sub").mkdir(parents=True)
    (kb / "good.md").write_text(GOOD, encoding="utf-8")
    (kb / "sub" / "inner.md").write_text("# Inner\n\nzebraquartz inner page.\n", encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "secret.md").write_text(f"# Secret\n\n{SECRET}\n", encoding="utf-8")
    (outside / "leak.md").write_text(f"# Leak\n\n{SECRET} in a folder\n", encoding="utf-8")
    os.symlink("../secret.md", kb / "secret.md")  # relative, out of the folder
    os.symlink("/etc/passwd", kb / "passwd.md")
    os.symlink("/proc/self/environ", kb / "environ.md")
    os.symlink(outside, kb / "linked")  # a directory out of the folder
    os.symlink("good.md", kb / "alias.md")  # inside: fine
    os.symlink("sub", kb / "subalias")  # a directory inside: its files are indexed anyway
    os.mkfifo(kb / "fifo.md")
    with open(os.fsencode(kb) + b"/bad-\xff-name.md", "wb") as handle:
        handle.write(b"# Bad name\n\nzebraquartz under a name that is not UTF-8.\n")
    return kb


def _indexed(kb: Path, tmp_path: Path) -> list[tuple[str, str]]:
    target = tmp_path / "index.sqlite3"
    build_index(kb, target)
    conn = sqlite3.connect(target)
    try:
        return conn.execute("SELECT source, content FROM chunks ORDER BY source").fetchall()
    finally:
        conn.close()


def test_only_regular_files_inside_the_folder_are_indexed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kb = _folder(tmp_path)
    with caplog.at_level(logging.WARNING):
        rows = _indexed(kb, tmp_path)  # returns: the fifo is never opened
    sources = sorted({source for source, _ in rows})
    assert sources == ["good.md", "sub/inner.md"]  # alias.md is good.md, served once
    text = "\n".join(content for _, content in rows)
    assert SECRET not in text and "root:" not in text and "PATH=" not in text
    # The skipped name is logged escaped, never as raw bytes or a surrogate.
    assert "bad-\\xff-name.md" in caplog.text


async def test_the_source_answers_from_inside_only(tmp_path: Path) -> None:
    kb = _folder(tmp_path)
    source = KnowledgeIndexSource(
        KnowledgeSettings(folder=str(kb), cache_dir=str(tmp_path / "cache"), max_hits=20)
    )
    try:
        with anyio.fail_after(30):
            answer = await source.fetch(LookupKnowledgeRequest(query="zebraquartz"))
    finally:
        await source.aclose()
    hits = answer["contextPack"]["hits"]
    assert hits, "the inside pages still answer (a bad file name does not make it UNAVAILABLE)"
    assert {h["source"] for h in hits} <= {"good.md", "alias.md", "sub/inner.md"}
    assert all(SECRET not in h["content"] for h in hits)


def test_a_folder_that_is_itself_a_symlink_still_works(tmp_path: Path) -> None:
    kb = _folder(tmp_path)
    link = tmp_path / "kb-link"
    os.symlink(kb, link)
    sources = sorted({source for source, _ in _indexed(link, tmp_path)})
    assert sources == ["good.md", "sub/inner.md"]  # alias.md is good.md, served once


_FLIPPER = """
import os, sys, time
docs, outside, stop = sys.argv[1], sys.argv[2], sys.argv[3]
real, link = os.path.join(docs, "runbooks.real"), os.path.join(docs, "runbooks")
end = time.monotonic() + 60
while not os.path.exists(stop) and time.monotonic() < end:
    os.rename(link, real)
    os.symlink(outside, link)
    time.sleep(0.0002)
    os.unlink(link)
    os.rename(real, link)
    time.sleep(0.0002)
"""


def test_a_directory_swapped_for_a_symlink_mid_build_never_leaks(tmp_path: Path) -> None:
    # An attacker who can write in the folder swaps docs/runbooks between the real directory
    # and a symlink out of the folder while indexes are built: the scan may see the real
    # directory and the read the symlink; no build may index the outside file.
    docs = tmp_path / "kb" / "docs"
    (docs / "runbooks").mkdir(parents=True)
    (docs / "runbooks" / "pool.md").write_text(GOOD, encoding="utf-8")
    for n in range(8):  # read before runbooks/: the swap gets time to happen in between
        (docs / f"a{n}.md").write_text(GOOD.replace("Pool", f"Pool {n}"), encoding="utf-8")
    outside = tmp_path / "private" / "runbooks"
    outside.mkdir(parents=True)
    (outside / "pool.md").write_text(f"# Pool\n\n{SECRET}\n", encoding="utf-8")
    stop = tmp_path / "stop"
    flipper = subprocess.Popen([sys.executable, "-c", _FLIPPER, str(docs), str(outside), str(stop)])
    leaks = builds = 0
    try:
        # 200 builds in 6 s, or on a loaded machine (a CI run beside other work on two cores
        # managed fewer than 50 in 6 s) at least 50 within 30 s: the bound is a count.
        start = time.monotonic()
        while builds < 200 and (elapsed := time.monotonic() - start) < 30:
            if elapsed > 6 and builds >= 50:
                break
            try:
                rows = _indexed(docs, tmp_path)
            except OSError:  # the walk itself lost a race: no index, nothing leaked
                continue
            builds += 1
            leaks += any(SECRET in content for _, content in rows)
    finally:
        stop.touch()
        flipper.wait(10)
    assert builds >= 50 and leaks == 0, f"{leaks} of {builds} builds leaked"
