"""Issue 22: an edited runbook folder is re-indexed without re-embedding what did not change (in
a fresh process too), and lookups keep answering from the previous index while the new one is
built; a rebuild that fails stops the previous index answering."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import anyio
import numpy as np
import numpy.typing as npt
import pytest

import workers.sources.knowledge.encoder as encoders
import workers.sources.knowledge.index as knowledge
from contracts.requests import LookupKnowledgeRequest
from contracts.status import ErrorCode
from workers.sources import SourceError
from workers.sources.knowledge.encoder import UseEncoder, shared_use_encoder
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings
from workers.sources.knowledge.store import IndexFile

RUNBOOKS = {
    "disk.md": "# Disk full\n\n## Symptoms\nWrites fail: no space left on device.\n\n"
    "## Mitigation\nRotate logs and delete old core dumps.\n",
    "pool.md": "# Connection pool exhausted\n\n## Symptoms\nRequests wait for a connection "
    "until they time out.\n\n## Mitigation\nFind the code path that leaks connections.\n",
    "oom.md": "# Pod OOMKilled\n\n## Symptoms\nThe container exits with code 137.\n\n"
    "## Mitigation\nRaise the memory limit or fix the leak.\n",
}


class RecordingEncoder:
    """The bundled encoder, recording every text a build asks it to embed (queries apart) and,
    while `gate` is clear, holding builds back (never queries)."""

    def __init__(self) -> None:
        self.inner = shared_use_encoder()
        self.model_id, self.dim = self.inner.model_id, self.inner.dim
        self.built: list[str] = []
        self.gate = threading.Event()
        self.gate.set()

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if threading.current_thread().name == "aci-knowledge-index":
            self.built.extend(texts)
            assert self.gate.wait(30), "the test never opened the gate"
        return self.inner.encode(texts)


def _source(folder: Path, cache: Path, encoder: RecordingEncoder) -> KnowledgeIndexSource:
    return KnowledgeIndexSource(
        KnowledgeSettings(folder=str(folder), cache_dir=str(cache)), encoder
    )


def _ask(query: str) -> LookupKnowledgeRequest:
    return LookupKnowledgeRequest(query=query)


async def _contents(source: KnowledgeIndexSource, query: str) -> str:
    answer = await source.fetch(_ask(query))
    return "\n".join(h["content"] for h in answer["contextPack"]["hits"])


async def _once(folder: Path, cache: Path, encoder: RecordingEncoder, query: str) -> str:
    """The hits' contents of one lookup by a source of its own (a worker process), closed."""
    source = _source(folder, cache, encoder)
    try:
        return await _contents(source, query)
    finally:
        await source.aclose()


def _edit(path: Path, old: str, new: str) -> None:
    stamp = path.stat().st_mtime_ns + 10**9
    path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    os.utime(path, ns=(stamp, stamp))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    kb = tmp_path / "kb"
    kb.mkdir()
    for name, text in RUNBOOKS.items():
        (kb / name).write_text(text, encoding="utf-8")
    return kb


def _vectors_by_crumb(cache: Path) -> dict[str, npt.NDArray[np.float32]]:
    (path,) = cache.glob("*.sqlite3")
    index = IndexFile(path)
    try:
        assert index.vectors is not None
        rows = index.conn.execute("SELECT rowid, breadcrumb FROM chunks").fetchall()
        return {crumb: index.vectors[rowid - 1].copy() for rowid, crumb in rows}
    finally:
        index.conn.close()


async def test_an_edit_re_embeds_only_the_chunks_it_changed_in_a_fresh_process(
    folder: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    first = RecordingEncoder()
    assert "Rotate logs" in await _once(folder, cache, first, "rotate logs")
    assert len(first.built) == 6  # two sections of each of the three runbooks
    before = _vectors_by_crumb(cache)
    _edit(folder / "disk.md", "Rotate logs", "Compress the journal")
    # A new source stands for a fresh worker process: nothing remembered in memory.
    fresh = RecordingEncoder()
    assert "Compress the journal" in await _once(folder, cache, fresh, "compress the journal")
    assert len(fresh.built) == 1 and "Compress the journal" in fresh.built[0]
    after = _vectors_by_crumb(cache)  # the stale index is gone: one file again
    assert after.keys() == before.keys()
    for crumb, vector in after.items():
        if crumb == "Disk full > Mitigation":
            assert not np.allclose(vector, before[crumb])
            expected = shared_use_encoder().encode([fresh.built[0], "x"])[0]
            assert np.allclose(vector, expected, atol=1e-5)
        else:
            assert np.array_equal(vector, before[crumb]), crumb


async def test_lookups_answer_from_the_previous_index_while_a_rebuild_runs(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(knowledge, "_RECHECK_S", 0.0)
    encoder = RecordingEncoder()
    source = _source(folder, tmp_path / "cache", encoder)
    try:
        assert "Rotate logs" in await _contents(source, "rotate logs")
        encoder.gate.clear()  # the next build waits until the gate opens
        _edit(folder / "disk.md", "Rotate logs", "Compress the journal")
        with caplog.at_level(logging.INFO, logger="aci.knowledge"):
            for _ in range(3):  # each lookup answers at once, from the previous index ...
                with anyio.fail_after(5):
                    assert "leaks connections" in await _contents(source, "pool exhausted")
                    # ... but never with text its runbook no longer holds (the edited section
                    # as it was: before, shown as a verbatim excerpt until the rebuild ended)
                    answer = await source.fetch(_ask("rotate logs"))
                shown = "\n".join(h["content"] for h in answer["contextPack"]["hits"])
                assert "Rotate logs" not in shown and answer["contextPack"]["indexRebuilding"]
            assert "rebuilding the knowledge index" in caplog.text
        encoder.gate.set()
        with anyio.fail_after(30):
            while True:
                if "Compress the journal" in await _contents(source, "compress the journal"):
                    break
                await anyio.sleep(0.05)
        assert "Rotate logs" not in await _contents(source, "rotate logs")
    finally:
        encoder.gate.set()
        await source.aclose()


async def test_a_rebuild_that_fails_stops_the_previous_index_answering(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(knowledge, "_RECHECK_S", 0.0)
    source = _source(folder, tmp_path / "cache", RecordingEncoder())
    try:
        assert "Rotate logs" in await _contents(source, "rotate logs")
        for name in RUNBOOKS:  # nothing indexable left: the rebuild fails (empty index)
            (folder / name).unlink()
        failures = 0
        with anyio.fail_after(30):
            while failures < 3:  # once failed, it keeps failing: no stale answer after it
                try:
                    answer = await source.fetch(_ask("rotate logs"))
                except SourceError as exc:
                    assert exc.code is ErrorCode.UNAVAILABLE
                    failures += 1
                else:
                    assert failures == 0, answer
                    await anyio.sleep(0.02)
    finally:
        await source.aclose()


def test_the_encoders_memory_bound_never_drops_a_row_it_still_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: a build of more than the bound (8,192 chunks) after an edit raised KeyError, so
    # every lookup failed until the worker restarted.
    monkeypatch.setattr(encoders, "_MEMO_ROWS", 4)
    encoder = UseEncoder()
    first = ["disk full", "replica lag", "pool exhausted", "pod evicted"]
    encoder.encode(first)
    again = [*first[:3], "inode exhaustion", "lock wait timeout"]
    rows = encoder.encode(again)
    alone = shared_use_encoder().encode([*again, "padding"])[: len(again)]
    assert rows.shape == (5, encoder.dim) and np.allclose(rows, alone, atol=1e-5)


async def test_vectors_a_damaged_previous_index_holds_are_not_reused(
    folder: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    await _once(folder, cache, RecordingEncoder(), "rotate logs")
    (path,) = cache.glob("*.sqlite3")
    conn = sqlite3.connect(path)  # damage SQLite does not see: a NaN in the vectors
    (blob,) = conn.execute("SELECT data FROM vectors").fetchone()
    damaged = np.frombuffer(blob, dtype="<f4").copy()
    damaged[3] = np.nan
    conn.execute("UPDATE vectors SET data = ?", (damaged.tobytes(),))
    conn.commit()
    conn.close()
    _edit(folder / "disk.md", "Rotate logs", "Compress the journal")
    fresh = RecordingEncoder()
    assert "Compress the journal" in await _once(folder, cache, fresh, "compress the journal")
    assert len(fresh.built) == 6  # every chunk embedded afresh, none taken from the damage
    assert all(np.isfinite(v).all() for v in _vectors_by_crumb(cache).values())
