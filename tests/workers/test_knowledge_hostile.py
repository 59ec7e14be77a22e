"""The knowledge index under hostile servers and folders: values beyond float32, a server that
drips its headers, a folder nested 1,000 deep, an oversized runbook, a symlink swapped while
the folder is listed, and an answer from the previous index while a rebuild runs."""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import anyio
import msgspec
import numpy as np
import pytest

from contracts.requests import LookupKnowledgeRequest
from contracts.status import ErrorCode
from workers.sources import SourceError
from workers.sources.knowledge import files
from workers.sources.knowledge.embeddings_http import EmbeddingsHttpSettings, HttpEncoder
from workers.sources.knowledge.encoder import query_vector
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings

DIM = 4


class _Handler(BaseHTTPRequestHandler):
    mode: ClassVar[str] = "ok"
    bodies: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append(body)
        if type(self).mode == "drip":  # one header byte every 0.1 s, for ever
            self.wfile.write(b"HTTP/1.1 200 OK\r\n")
            try:
                for _ in range(300):
                    self.wfile.write(b"X")
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                return
        value = "1e39" if type(self).mode == "beyond-float32" else "0.5"
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": json.loads(f"[{value}, 0.5, 0.5, 0.5]"),
            }
            for i in range(len(body["input"]))
        ]
        raw = json.dumps({"object": "list", "data": data, "model": "m"}).replace("1e+39", "1e39")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw.encode())


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    _Handler.mode, _Handler.bodies = "ok", []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1/embeddings"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _encoder(url: str, **kw: Any) -> HttpEncoder:
    return HttpEncoder(EmbeddingsHttpSettings(url=url, model="m", dim=DIM, **kw))


def test_a_value_finite_in_json_but_beyond_float32_is_refused(server: str) -> None:
    _Handler.mode = "beyond-float32"
    encoder = _encoder(server)
    try:
        for call in (lambda: encoder.encode(["a", "b"]), lambda: query_vector(encoder, "q")):
            with pytest.raises(SourceError) as caught:
                call()
            assert caught.value.code == ErrorCode.PROJECTION
    finally:
        encoder.close()


@pytest.mark.serial
def test_one_wall_clock_deadline_over_headers_that_drip(server: str) -> None:
    _Handler.mode = "drip"
    encoder = _encoder(server, timeout_s=1.0)
    threads = _ours()
    started = time.monotonic()
    try:
        with pytest.raises(SourceError) as caught:
            encoder.encode(["a"])
    finally:
        encoder.close()
    took = time.monotonic() - started
    assert caught.value.code == ErrorCode.TIMEOUT and caught.value.retryable
    assert took < 1.6, took  # each read waits at most what is left of the one deadline
    assert _ours() <= threads  # no thread of ours left behind (the server's still drips)


def _ours() -> set[str]:
    return {t.name for t in threading.enumerate() if "process_request" not in t.name}


def test_query_and_passage_views_reach_the_server(server: str) -> None:
    encoder = _encoder(
        server, query_prefix="query: ", passage_prefix="passage: ", input_types=("q", "p")
    )
    try:
        encoder.encode(["chunk text"])
        vector = query_vector(encoder, "question")
    finally:
        encoder.close()
    assert [b["input"] for b in _Handler.bodies] == [["passage: chunk text"], ["query: question"]]
    assert [b["input_type"] for b in _Handler.bodies] == ["p", "q"]
    assert vector.shape == (DIM,) and np.isclose(np.linalg.norm(vector), 1.0)
    plain = _encoder(server)
    assert plain.model_id.startswith("openai-compatible:m:4:")  # then the endpoint's digest
    assert plain.model_id != encoder.model_id  # views name the index
    plain.close()


def _source(folder: Path, cache: Path, **kw: Any) -> KnowledgeIndexSource:
    settings = KnowledgeSettings(folder=str(folder), cache_dir=str(cache), **kw)
    return KnowledgeIndexSource(settings)


@pytest.fixture
def deep_folder() -> Iterator[Path]:
    """A runbook folder with a chain of folders 1,000 deep, outside pytest's tmp_path (whose
    clean-up, shutil.rmtree, recurses once per level, in this and every later session of
    the machine) and removed afterwards without recursion."""
    folder = Path(tempfile.mkdtemp(prefix="aci-deep-")) / "kb"
    folder.mkdir()
    (folder / "disk.md").write_text("# Disk full\n\nNo space left on device.\n")
    try:
        fd = os.open(folder, os.O_RDONLY)
        try:
            for _ in range(1000):  # deeper than a path name may be: made relative to fds
                os.mkdir("d", dir_fd=fd)
                inner = os.open("d", os.O_RDONLY, dir_fd=fd)
                os.close(fd)
                fd = inner
        finally:
            os.close(fd)
        yield folder
    finally:
        _remove_chain(folder)
        shutil.rmtree(folder.parent)


async def test_a_folder_nested_a_thousand_deep_does_not_fail_lookups(
    deep_folder: Path, tmp_path: Path
) -> None:
    source = _source(deep_folder, tmp_path / "c", retrieval="lexical")
    try:
        answer = await source.fetch(LookupKnowledgeRequest(query="no space left on device"))
    finally:
        await source.aclose()
    assert answer["contextPack"]["hits"][0]["source"] == "disk.md"


def _remove_chain(folder: Path) -> None:
    fds = [os.open(folder, os.O_RDONLY)]
    try:
        while "d" in os.listdir(fds[-1]):
            fds.append(os.open("d", os.O_RDONLY, dir_fd=fds[-1]))
        for parent in reversed(fds[:-1]):
            os.close(fds.pop())
            os.rmdir("d", dir_fd=parent)
    finally:
        for fd in fds:
            os.close(fd)


async def _disk_lookup(source: KnowledgeIndexSource, caplog: pytest.LogCaptureFixture) -> Any:
    # One lookup of "disk", its warnings captured; the source closed after it.
    try:
        with caplog.at_level(logging.WARNING, logger="aci.knowledge"):
            return await source.fetch(LookupKnowledgeRequest(query="disk"))
    finally:
        await source.aclose()


async def test_an_oversized_runbook_is_skipped_and_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "disk.md").write_text("# Disk full\n\nNo space left on device.\n")
    (folder / "env-vars.md").write_text("# Env\n\n" + "- VAR: disk value\n" * 2000)
    source = _source(folder, tmp_path / "c", retrieval="lexical", max_file_bytes=4096)
    answer = await _disk_lookup(source, caplog)
    assert {h["source"] for h in answer["contextPack"]["hits"]} == {"disk.md"}
    assert answer["contextPack"]["skippedSources"] == ["env-vars.md"]
    assert any("env-vars.md" in r.getMessage() for r in caplog.records)


async def test_files_of_other_kinds_are_said_not_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A Confluence or Antora export beside the Markdown: passed over, but never silently.
    folder = tmp_path / "kb"
    (folder / "db").mkdir(parents=True)
    (folder / "disk.md").write_text("# Disk full\n\nNo space left on device.\n")
    (folder / "db" / "failover.adoc").write_text("= Failover\n\nPromote the replica.\n")
    (folder / "db" / "vacuum.adoc").write_text("= Vacuum\n")
    (folder / "pool.html").write_text("<h1>Pool</h1>")
    (folder / "Makefile").write_text("all:\n")
    (folder / ".hidden.adoc").write_text("= Hidden\n")
    answer = await _disk_lookup(_source(folder, tmp_path / "c", retrieval="lexical"), caplog)
    assert {h["source"] for h in answer["contextPack"]["hits"]} == {"disk.md"}
    said = [r.getMessage() for r in caplog.records if "not read" in r.getMessage()]
    assert said == [
        "knowledge: 4 files in the folder are not read (runbooks are .md, .markdown, .mdx, .txt,"
        " .rst): 2 .adoc, 1 .html, 1 no suffix"
    ]


def test_a_symlink_swapped_during_the_listing_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\ntext\n")
    (folder / "target.md").write_text("# T\n\ntext\n")
    (folder / "link.md").symlink_to(folder / "target.md")
    real_scandir = os.scandir

    def racing_scandir(path: Any) -> Any:  # the link's target vanishes right after listing
        entries = list(real_scandir(path))
        (folder / "target.md").unlink(missing_ok=True)
        return _Entries(entries)

    monkeypatch.setattr(files.os, "scandir", racing_scandir)
    found = [rel for rel, _ in files.runbook_files(folder)]
    assert "a.md" in found and "link.md" not in found
    assert files.files_fingerprint(folder, "salt")


class _Entries(list[Any]):
    def __enter__(self) -> _Entries:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class _SlowBuilds:
    """A deterministic encoder whose builds take a while (queries do not)."""

    model_id = "test-slow-builds"
    dim = 8

    def encode(self, texts: Any) -> Any:
        if len(texts) > 1:
            time.sleep(1.0)
        rows = np.ones((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            rows[i, hash(text) % self.dim] += 3.0
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


async def test_the_control_view_says_when_the_previous_index_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import workers.sources.knowledge.index as knowledge
    from contracts import project_rag
    from contracts.bounds import DEFAULT_BOUNDS
    from pipeline.settings import Settings
    from workers.stage import build_outcome

    monkeypatch.setattr(knowledge, "_RECHECK_S", 0.0)
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "disk.md").write_text("# Disk full\n\nNo space left on device.\n\n## B\nmore\n")
    (folder / "huge.md").write_text("# Huge\n\n" + "x " * 4000)
    settings = KnowledgeSettings(
        folder=str(folder), cache_dir=str(tmp_path / "c"), max_file_bytes=4096
    )
    source = KnowledgeIndexSource(settings, _SlowBuilds())
    ask = LookupKnowledgeRequest(query="no space left on device")

    def control(answer: dict[str, Any]) -> Any:
        result = project_rag(ask, "call_1", answer, DEFAULT_BOUNDS)
        return build_outcome(
            result=result, raw=answer, tool="lookup_knowledge", session_id="s", settings=Settings()
        ).control

    try:
        first = await source.fetch(ask)
        assert "indexRebuilding" not in first["contextPack"]
        assert control(first).index_rebuilding is msgspec.UNSET
        assert control(first).skipped_runbooks == ["huge.md"]
        new = folder / "lag.md"
        new.write_text("# Replica lag\n\nReplica behind.\n\n## C\nmore\n")
        stamp = time.time_ns() + 10**9
        os.utime(new, ns=(stamp, stamp))
        during = await source.fetch(ask)
        assert during["contextPack"]["indexRebuilding"] is True
        assert control(during).index_rebuilding is True
        assert b"rebuilding" not in msgspec.json.encode(
            project_rag(ask, "call_1", during, DEFAULT_BOUNDS)
        )
        deadline = time.monotonic() + 30
        while "indexRebuilding" in (await source.fetch(ask))["contextPack"]:
            assert time.monotonic() < deadline
            await anyio.sleep(0.05)
    finally:
        await source.aclose()


async def test_a_file_name_cannot_write_lines_into_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Review: a file of another kind is counted by its suffix, which was logged as it was
    # named: a newline or an escape sequence in it forged log lines or drove the terminal;
    # a link to a folder was counted as a file.
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "disk.md").write_text("# Disk full\n\nNo space left on device.\n")
    (folder / "a.x\nERROR forged").write_text("")
    (folder / "b.\x1b[2J").write_text("")
    (folder / "c.pdf").write_text("")
    (folder / "elsewhere").symlink_to(tmp_path)  # a link to a folder: not followed, no file
    await _disk_lookup(_source(folder, tmp_path / "c", retrieval="lexical"), caplog)
    said = [r.getMessage() for r in caplog.records if "not read" in r.getMessage()]
    assert said == [
        "knowledge: 3 files in the folder are not read (runbooks are .md, .markdown, .mdx, .txt,"
        " .rst): 2 other suffix, 1 .pdf"
    ]
