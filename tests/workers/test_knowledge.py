"""The embedded knowledge index: chunking, ids, index lifecycle, answers and their projection."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import workers.sources.knowledge.index as knowledge
from contracts import project_rag
from contracts.bounds import DEFAULT_BOUNDS
from contracts.requests import LookupKnowledgeRequest
from contracts.results import RagResult
from contracts.status import ErrorCode, EvidenceStatus, RelevanceLevel
from workers.sources import SourceError
from workers.sources.knowledge.index import (
    DEFAULT_KNOWLEDGE_DIR,
    KnowledgeIndexSource,
    KnowledgeSettings,
    knowledge_source_from_env,
    split_markdown,
)
from workers.sources.knowledge.rag_http import HttpRagSource

EVAL = json.loads((Path(__file__).with_name("knowledge_eval.json")).read_text(encoding="utf-8"))

DOC = """Intro line before the title is kept under the title.

# Disk full

What to do when a volume fills up.

## Symptoms
Writes fail with No space left on device.

## Diagnosis

### Find big files
```
# not a heading inside a fence
du -xh / | sort -h
```

## Empty section
## Mitigation
Rotate logs.
"""


def _source(folder: Path, cache: Path, **kw: object) -> KnowledgeIndexSource:
    return KnowledgeIndexSource(
        KnowledgeSettings(folder=str(folder), cache_dir=str(cache), **kw)  # type: ignore[arg-type]
    )


def _ask(query: str) -> LookupKnowledgeRequest:
    return LookupKnowledgeRequest(query=query)


def test_split_markdown_follows_heading_structure() -> None:
    chunks = split_markdown(DOC, "ops/disk.md")
    assert [c.breadcrumb for c in chunks] == [
        "Disk full",
        "Disk full",
        "Disk full > Symptoms",
        "Disk full > Diagnosis > Find big files",
        "Disk full > Mitigation",
    ]
    assert {c.title for c in chunks} == {"Disk full"}
    assert {c.source for c in chunks} == {"ops/disk.md"}
    assert all(c.content in DOC for c in chunks)
    assert "# not a heading inside a fence" in chunks[3].content
    assert [c.ordinal for c in chunks] == list(range(5))


def test_title_falls_back_to_file_name() -> None:
    (chunk,) = split_markdown("no headings here\n", "notes/pager-duty.md")
    assert chunk.title == "pager-duty" and chunk.breadcrumb == "pager-duty"


def test_document_id_is_stable_and_follows_content() -> None:
    first = split_markdown(DOC, "disk.md")
    assert [c.document_id for c in first] == [c.document_id for c in split_markdown(DOC, "disk.md")]
    changed = split_markdown(DOC.replace("Rotate logs.", "Rotate and compress logs."), "disk.md")
    assert [c.document_id for c in changed][:-1] == [c.document_id for c in first][:-1]
    assert changed[-1].document_id != first[-1].document_id
    assert split_markdown(DOC, "other.md")[0].document_id != first[0].document_id


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=1, max_value=4),
            st.text(alphabet="abc xyz数据库", min_size=1, max_size=12),
            st.text(alphabet="abc \n#`数据", max_size=2500),
        ),
        max_size=6,
    )
)
def test_chunks_are_verbatim_slices(sections: list[tuple[int, str, str]]) -> None:
    text = "\n".join(
        f"{'#' * level} {head.strip() or 'h'}\n{body}" for level, head, body in sections
    )
    chunks = split_markdown(text, "x.md")
    assert all(c.content and c.content in text for c in chunks)
    # Identical text under an identical heading path is the same document.
    assert len({c.document_id for c in chunks}) == len({(c.breadcrumb, c.content) for c in chunks})


async def test_answer_is_rag_shaped_and_projects_to_verbatim_evidence(tmp_path: Path) -> None:
    source = _source(DEFAULT_KNOWLEDGE_DIR, tmp_path)
    try:
        request = _ask("database connection pool exhausted")
        answer = await source.fetch(request)
    finally:
        await source.aclose()
    hits = answer["contextPack"]["hits"]
    # Medium, not high: the Chinese runbook on the same problem (zh/数据库连接池耗尽) is a close
    # second, and high promises a clear lead over the next runbook (issue 34's calibration).
    assert answer["contextPack"]["relevanceLevel"] == "medium"
    assert answer["retrievalTrace"] and answer["fallbackAttempts"] == []
    assert [h["rank"] for h in hits] == list(range(1, len(hits) + 1))
    assert {"bm25", "dense", "rerank"} <= set(hits[0]["scores"])
    assert hits[0]["source"] == "db-connection-pool-exhaustion.md"
    text = (DEFAULT_KNOWLEDGE_DIR / hits[0]["source"]).read_text(encoding="utf-8")
    assert hits[0]["content"] in text
    result = project_rag(request, "call_1", answer, DEFAULT_BOUNDS)
    assert isinstance(result, RagResult)
    assert result.evidence_status == EvidenceStatus.EVIDENCE_FOUND
    assert result.relevance_level == RelevanceLevel.MEDIUM
    first = result.evidence[0]
    assert first.document_id == hits[0]["documentId"]
    assert first.breadcrumb.startswith("Database connection pool exhaustion")
    assert first.excerpt in text


@pytest.mark.parametrize("query", ["the of and", "?!"])
async def test_a_question_with_nothing_to_look_up_is_an_error_not_no_evidence(
    tmp_path: Path, query: str
) -> None:
    # Until 2026-12-05 these answered NO_EVIDENCE, as if the runbooks held nothing on them.
    source = _source(DEFAULT_KNOWLEDGE_DIR, tmp_path)
    try:
        with pytest.raises(SourceError) as caught:
            await source.fetch(_ask(query))
    finally:
        await source.aclose()
    assert caught.value.code is ErrorCode.SCHEMA


@pytest.mark.parametrize("query", ["how to bake sourdough bread", "如何申请年假"])
async def test_unanswered_questions_give_no_evidence(tmp_path: Path, query: str) -> None:
    source = _source(DEFAULT_KNOWLEDGE_DIR, tmp_path)
    try:
        answer = await source.fetch(_ask(query))
    finally:
        await source.aclose()
    assert answer["contextPack"]["hits"] == []
    result = project_rag(_ask(query), "call_2", answer, DEFAULT_BOUNDS)
    assert isinstance(result, RagResult)
    assert result.evidence_status == EvidenceStatus.NO_EVIDENCE


async def test_chinese_term_is_found_inside_a_sentence(tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "a.md").write_text(
        "# 值班手册\n\n## 处理\n当订单服务的数据库连接池耗尽时，先回滚最近一次发布。\n",  # noqa: RUF001
        encoding="utf-8",
    )
    (folder / "b.md").write_text("# Other\n\n## Notes\nNothing about pools.\n", encoding="utf-8")
    # The lexical index alone finds the term; the default (fused) ranks it first.
    source = _source(folder, tmp_path / "cache", retrieval="lexical")
    fused = _source(folder, tmp_path / "cache")
    try:
        for query in ("连接池", "回滚", "订单服务"):
            hits = (await source.fetch(_ask(query)))["contextPack"]["hits"]
            assert [h["breadcrumb"] for h in hits] == ["值班手册 > 处理"], query
            hits = (await fused.fetch(_ask(query)))["contextPack"]["hits"]
            assert hits[0]["breadcrumb"] == "值班手册 > 处理", query
    finally:
        await source.aclose()
        await fused.aclose()


async def test_index_is_reused_and_rebuilt_only_on_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(knowledge, "_RECHECK_S", 0.0)
    folder, cache = tmp_path / "kb", tmp_path / "cache"
    folder.mkdir()
    doc = folder / "disk.md"
    doc.write_text(DOC, encoding="utf-8")
    first = _source(folder, cache)
    try:
        assert (await first.fetch(_ask("rotate logs")))["contextPack"]["hits"]
        (index_file,) = cache.glob("*.sqlite3")
        stamp = index_file.stat().st_mtime_ns
        second = _source(folder, cache)
        await second.fetch(_ask("rotate logs"))
        await second.aclose()
        assert list(cache.iterdir()) == [index_file] and index_file.stat().st_mtime_ns == stamp
        doc.write_text(DOC.replace("Rotate logs.", "Compress the journal."), encoding="utf-8")
        os.utime(doc, ns=(stamp + 10**9, stamp + 10**9))
        # The previous index answers while the new one is built; then the new one does.
        with anyio.fail_after(30):
            while True:
                hits = (await first.fetch(_ask("compress journal")))["contextPack"]["hits"]
                if any("Compress the journal" in h["content"] for h in hits):
                    break
                await anyio.sleep(0.05)
        assert [h["breadcrumb"] for h in hits] == ["Disk full > Mitigation"]
        hits = (await first.fetch(_ask("rotate logs")))["contextPack"]["hits"]
        assert not any("Rotate logs" in h["content"] for h in hits)
        (rebuilt,) = cache.iterdir()  # stale index removed, no temp files left
        assert rebuilt != index_file
    finally:
        await first.aclose()


async def test_concurrent_first_use_builds_one_consistent_index(tmp_path: Path) -> None:
    sources = [_source(DEFAULT_KNOWLEDGE_DIR, tmp_path) for _ in range(4)]
    answers: list[list[str]] = []

    async def ask(source: KnowledgeIndexSource) -> None:
        answer = await source.fetch(_ask("pod OOMKilled exit code 137"))
        answers.append([h["documentId"] for h in answer["contextPack"]["hits"]])

    try:
        async with anyio.create_task_group() as tg:
            for source in sources:
                tg.start_soon(ask, source)
    finally:
        for source in sources:
            await source.aclose()
    assert answers[0] and all(a == answers[0] for a in answers)
    assert [p.suffix async for p in anyio.Path(tmp_path).iterdir()] == [".sqlite3"]


async def test_unreadable_folder_is_an_error_not_no_evidence(tmp_path: Path) -> None:
    folder = tmp_path / "secret-kb"
    source = _source(folder, tmp_path / "cache")
    with pytest.raises(SourceError) as caught:
        await source.fetch(_ask("disk full"))
    assert caught.value.code == ErrorCode.UNAVAILABLE
    assert "secret-kb" not in caught.value.message and "/" not in caught.value.message


def test_from_env_and_source_selection(tmp_path: Path) -> None:
    env = {"ACI_CACHE_DIR": str(tmp_path), "ACI_KNOWLEDGE_MAX_HITS": "3"}
    source = knowledge_source_from_env(env)
    assert isinstance(source, KnowledgeIndexSource)
    assert source.settings.folder == str(DEFAULT_KNOWLEDGE_DIR) and source.settings.max_hits == 3
    http = knowledge_source_from_env({**env, "ACI_RAG_URL": "http://127.0.0.1:9/rag"})
    assert isinstance(http, HttpRagSource)
    anyio.run(http.aclose)
    # A missing folder is logged at start and answers UNAVAILABLE (docs/knowledge.md).
    missing = KnowledgeIndexSource.from_env({"ACI_KNOWLEDGE_DIR": str(tmp_path / "missing")})
    with pytest.raises(SourceError) as caught:
        anyio.run(missing.fetch, _ask("disk full"))
    assert caught.value.code == ErrorCode.UNAVAILABLE and "missing" not in caught.value.message
    with pytest.raises(ValueError, match="ACI_KNOWLEDGE_RETRIEVAL"):
        KnowledgeIndexSource.from_env({"ACI_KNOWLEDGE_RETRIEVAL": "magic"})
    default = KnowledgeIndexSource.from_env({"XDG_CACHE_HOME": str(tmp_path)})
    assert default.settings.cache_dir == str(tmp_path / "aci-evidence")


def test_shipped_corpus_covers_the_required_topics() -> None:
    files = sorted(DEFAULT_KNOWLEDGE_DIR.rglob("*.md"))
    assert 15 <= len(files) <= 25
    titles = {split_markdown(f.read_text(encoding="utf-8"), f.name)[0].title for f in files}
    for needed in ("High CPU usage", "Disk full", "Pod OOM kills and restart loops", "慢查询排查"):
        assert needed in titles
    assert sum(1 for t in titles if not t.isascii()) >= 3


async def test_retrieval_quality_on_the_labelled_set(tmp_path: Path) -> None:
    source = _source(DEFAULT_KNOWLEDGE_DIR, tmp_path)
    found = 0
    false_evidence = 0
    try:
        for case in EVAL["labelled"]:
            hits = (await source.fetch(_ask(case["query"])))["contextPack"]["hits"][:3]
            found += any(h["source"] in case["expect"] for h in hits)
        for query in EVAL["off_topic"]:
            false_evidence += bool((await source.fetch(_ask(query)))["contextPack"]["hits"])
        # In-domain questions no runbook answers: no hits, or hits at LOW at most (issue 22).
        for query in EVAL["uncovered"]:
            pack = (await source.fetch(_ask(query)))["contextPack"]
            assert pack.get("relevanceLevel", "low") == "low", query
    finally:
        await source.aclose()
    assert len(EVAL["labelled"]) >= 30 and len(EVAL["off_topic"]) + len(EVAL["uncovered"]) >= 15
    assert found / len(EVAL["labelled"]) >= 0.9
    assert false_evidence / len(EVAL["off_topic"]) <= 0.1
