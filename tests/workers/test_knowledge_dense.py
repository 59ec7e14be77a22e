"""Issue 22: dense and fused retrieval over the embedded index, its cache, plain-text runbooks,
empty folders, and `indexed_chunks` in the Control View."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import msgspec
import numpy as np
import pytest

from contracts import project_rag
from contracts.bounds import DEFAULT_BOUNDS
from contracts.requests import LookupKnowledgeRequest
from contracts.results import RagResult
from contracts.status import ErrorCode, EvidenceStatus
from pipeline.settings import Settings
from workers.sources import SourceError
from workers.sources.knowledge.analysis import split_document
from workers.sources.knowledge.encoder import USE_MODEL_ID, shared_use_encoder
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings
from workers.sources.knowledge.ranking import dense_relevance
from workers.sources.knowledge.store import IndexFile, build_index
from workers.stage import build_outcome

INODES = """# Inode exhaustion

## Symptoms
Writes fail with No space left on device although df -h shows free gigabytes.

## Mitigation
Delete the millions of small session files and fix the job that leaks them.
"""
LOCKS = """# MySQL 锁等待超时

## 现象
更新语句等待约 50 秒后失败，报错 ERROR 1205 Lock wait timeout exceeded。

## 处理
找到长时间未提交的事务并结束它，为更新条件加索引。
"""  # noqa: RUF001


def _source(folder: Path, cache: Path, **kw: object) -> KnowledgeIndexSource:
    return KnowledgeIndexSource(
        KnowledgeSettings(folder=str(folder), cache_dir=str(cache), **kw)  # type: ignore[arg-type]
    )


def _ask(query: str) -> LookupKnowledgeRequest:
    return LookupKnowledgeRequest(query=query)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "kb"
    (folder / "zh").mkdir(parents=True)
    (folder / "inodes.md").write_text(INODES, encoding="utf-8")
    (folder / "zh" / "locks.zh.md").write_text(LOCKS, encoding="utf-8")
    (folder / "cron.txt").write_text(
        "The nightly report job did not run.\n\nCheck whether the CronJob is suspended.\n",
        encoding="utf-8",
    )
    return folder


async def test_a_paraphrase_and_a_cross_lingual_question_find_their_runbook(
    corpus: Path, tmp_path: Path
) -> None:
    source = _source(corpus, tmp_path / "cache")
    try:
        for query, expected in [
            ("cannot make new files although plenty of gigabytes remain free", "inodes.md"),
            ("磁盘明明还有空间却无法创建新文件", "inodes.md"),
            ("MySQL update blocked for 50 seconds then fails", "zh/locks.zh.md"),
            ("ERROR 1205", "zh/locks.zh.md"),
        ]:
            answer = await source.fetch(_ask(query))
            hits = answer["contextPack"]["hits"]
            assert hits and hits[0]["source"] == expected, query
            assert hits[0]["scores"]["dense"] is not None
            result = project_rag(_ask(query), "call_1", answer, DEFAULT_BOUNDS)
            assert isinstance(result, RagResult)
            assert result.evidence_status == EvidenceStatus.EVIDENCE_FOUND
            assert result.evidence[0].excerpt in (corpus / expected).read_text(encoding="utf-8")
    finally:
        await source.aclose()


@pytest.mark.parametrize("query", ["how to bake sourdough bread", "番茄炒蛋怎么做"])
async def test_off_topic_questions_stay_no_evidence(
    corpus: Path, tmp_path: Path, query: str
) -> None:
    source = _source(corpus, tmp_path / "cache")
    try:
        answer = await source.fetch(_ask(query))
    finally:
        await source.aclose()
    assert answer["contextPack"]["hits"] == []
    assert "relevanceLevel" not in answer["contextPack"]


async def test_vectors_are_stored_once_with_the_index(corpus: Path, tmp_path: Path) -> None:
    source = _source(corpus, tmp_path / "cache")
    try:
        await source.fetch(_ask("inode"))
    finally:
        await source.aclose()
    (path,) = (tmp_path / "cache").glob("*.sqlite3")
    index = IndexFile(path)
    try:
        assert index.model_id == USE_MODEL_ID and index.vectors is not None
        assert index.vectors.shape == (index.n, 512)
        assert np.allclose(np.linalg.norm(index.vectors, axis=1), 1.0, atol=1e-4)
    finally:
        index.conn.close()
    # A lexical-only source names another file: the two never remove each other's index.
    lexical = _source(corpus, tmp_path / "cache", retrieval="lexical")
    try:
        await lexical.fetch(_ask("inode"))
    finally:
        await lexical.aclose()
    assert len(list((tmp_path / "cache").glob("*.sqlite3"))) == 2


def test_build_refuses_vectors_of_the_wrong_shape(corpus: Path, tmp_path: Path) -> None:
    class Short:
        model_id, dim = "short", 4

        def encode(self, texts: object) -> np.ndarray:
            return np.ones((1, 4), dtype=np.float32)

    with pytest.raises(ValueError, match="wrong shape"):
        build_index(corpus, tmp_path / "x.sqlite3", Short())
    assert not list(tmp_path.glob("*.sqlite3")) and not list(tmp_path.glob(".*tmp"))


def test_plain_text_and_rst_runbooks_are_chunked_verbatim() -> None:
    text = "Disk cleanup\n============\n\nRemove old logs.\n\nRotate them weekly.\n"
    (chunk,) = split_document(text, "ops/disk.rst")
    assert (chunk.title, chunk.breadcrumb, chunk.content) == ("Disk cleanup",) * 2 + (text.strip(),)
    (plain,) = split_document("just text\n", "notes/cron.txt")
    assert plain.title == "cron" and plain.content == "just text"


async def test_a_txt_runbook_is_searched(corpus: Path, tmp_path: Path) -> None:
    source = _source(corpus, tmp_path / "cache")
    try:
        hits = (await source.fetch(_ask("the nightly report did not run")))["contextPack"]["hits"]
    finally:
        await source.aclose()
    assert hits[0]["source"] == "cron.txt"


@pytest.mark.parametrize("files", [[], ["notes.pdf", ".hidden.md"]])
async def test_a_folder_without_runbooks_is_unavailable_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, files: list[str]
) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    for name in files:
        (folder / name).write_text("# Not a runbook we read\n\nbody\n", encoding="utf-8")
    source = _source(folder, tmp_path / "cache")
    try:
        with caplog.at_level(logging.ERROR, logger="aci.knowledge"):
            for _ in range(2):
                with pytest.raises(SourceError) as caught:
                    await source.fetch(_ask("disk full"))
                assert caught.value.code == ErrorCode.UNAVAILABLE
                assert str(folder) not in caught.value.message
    finally:
        await source.aclose()
    logged = [r for r in caplog.records if "no indexable runbook" in r.getMessage()]
    assert len(logged) == 1  # once, not per call


async def test_an_unwritable_cache_is_unavailable_and_logged(
    corpus: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = tmp_path / "not-a-folder"
    cache.write_text("a file where the cache folder should be", encoding="utf-8")
    source = _source(corpus, cache)
    try:
        with caplog.at_level(logging.ERROR, logger="aci.knowledge"):
            with pytest.raises(SourceError) as caught:
                await source.fetch(_ask("disk full"))
    finally:
        await source.aclose()
    assert caught.value.code == ErrorCode.UNAVAILABLE
    assert any("ACI_CACHE_DIR must be writable" in r.getMessage() for r in caplog.records)


async def test_the_control_view_reports_the_index_size(corpus: Path, tmp_path: Path) -> None:
    source = _source(corpus, tmp_path / "cache")
    try:
        request = _ask("inode exhaustion")
        answer = await source.fetch(request)
    finally:
        await source.aclose()
    result = project_rag(request, "call_9", answer, DEFAULT_BOUNDS)
    outcome = build_outcome(
        result=result, raw=answer, tool="lookup_knowledge", session_id="s", settings=Settings()
    )
    assert outcome.control.indexed_chunks == answer["contextPack"]["indexedChunks"] > 0
    assert b"indexed_chunks" not in msgspec.json.encode(outcome.observation)
    odd = {"contextPack": {"indexedChunks": True}}  # not a count: left out
    control = build_outcome(
        result=result, raw=odd, tool="lookup_knowledge", session_id="s", settings=Settings()
    ).control
    assert control.indexed_chunks is msgspec.UNSET


def test_the_encoder_remembers_build_texts_not_queries() -> None:
    encoder = shared_use_encoder()
    texts = ["disk full on the database host", "replica lag keeps growing"]
    first = encoder.encode(texts)
    assert np.array_equal(encoder.encode(texts), first)
    query = encoder.encode(["a query, never remembered"])
    assert query.shape == (1, 512)
    assert "a query, never remembered" not in encoder._memo


def test_a_corrupt_vector_table_is_an_error_not_a_crash(corpus: Path, tmp_path: Path) -> None:
    target = tmp_path / "i.sqlite3"
    build_index(corpus, target, shared_use_encoder())
    conn = sqlite3.connect(target)
    conn.execute("UPDATE vectors SET data = x'00'")
    conn.commit()
    conn.close()
    with pytest.raises(ValueError):
        IndexFile(target)


@pytest.mark.parametrize(
    ("dense", "coverage", "level"),
    [
        (0.75, 0.0, "high"),
        (0.65, 0.0, "medium"),
        (0.50, 0.60, "high"),
        (0.31, 0.85, "medium"),
        (0.50, 0.10, "medium"),
        (0.31, 0.60, "medium"),
        (0.44, 0.54, "low"),
        (0.30, 0.0, "low"),
        (0.26, 0.0, "low"),
        (0.21, 0.0, None),
        (0.15, 0.40, "low"),
        (0.15, 0.10, None),
        (float("nan"), 0.0, None),
    ],
)
def test_relevance_needs_a_strong_cosine_or_lexical_support(
    dense: float, coverage: float, level: str | None
) -> None:
    assert dense_relevance(dense, coverage) == level
    if level == "high":  # not clearly ahead of the next runbook: medium
        assert dense_relevance(dense, coverage, margin=0.1) == "medium"
