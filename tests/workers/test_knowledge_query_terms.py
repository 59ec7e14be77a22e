"""A knowledge query with nothing to search for is a typed error, never "no evidence"."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.requests import LookupKnowledgeRequest
from contracts.status import ErrorCode
from workers.sources.base import SourceError
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings


def _source(tmp_path: Path) -> KnowledgeIndexSource:
    folder = tmp_path / "kb"
    folder.mkdir(exist_ok=True)
    (folder / "disk.md").write_text("# Disk full\n\nHow to free space on the node.\n")
    return KnowledgeIndexSource(
        KnowledgeSettings(folder=str(folder), cache_dir=str(tmp_path / "c"), retrieval="lexical")
    )


@pytest.mark.parametrize("query", ["how do I", "what is this?", "Why?", "怎么办\uff1f", "is it up"])
async def test_a_query_of_common_words_only_is_a_schema_error(tmp_path: Path, query: str) -> None:
    # Before: answered NO_EVIDENCE, as if the runbooks had been searched for something.
    source = _source(tmp_path)
    try:
        with pytest.raises(SourceError) as caught:
            await source.fetch(LookupKnowledgeRequest(query=query))
    finally:
        await source.aclose()
    assert caught.value.code is ErrorCode.SCHEMA
    assert caught.value.message.startswith("query: ")
    assert "symptom" in caught.value.message and not caught.value.retryable


async def test_a_query_with_one_searchable_word_is_searched(tmp_path: Path) -> None:
    source = _source(tmp_path)
    try:
        answer = await source.fetch(LookupKnowledgeRequest(query="how do I free disk?"))
    finally:
        await source.aclose()
    assert answer["contextPack"]["hits"][0]["source"] == "disk.md"


def test_a_status_code_in_the_plural_is_the_code() -> None:
    # "users getting 503s" shared no term with a runbook's "HTTP 500/502/503 rate": "503s"
    # was a term of its own (the stemmer leaves non-words alone), so it answered NO_EVIDENCE.
    from workers.sources.knowledge.analysis import terms_of

    assert terms_of("users getting 503s, 502S from nginx") == [
        "user", "get", "503", "502", "from", "nginx"
    ]  # fmt: skip
    assert terms_of("in 30s, 1000s of rows, 600s") == ["in", "30s", "1000s", "of", "row", "600s"]


@pytest.mark.parametrize("query", ["no space left on device", "write failed: ENOSPC"])
async def test_the_kernel_s_words_for_a_full_disk_find_the_runbook(
    tmp_path: Path, query: str
) -> None:
    # A team's "Disk full on /var" runbook never says "no space left on device", the words
    # every tool prints: before, the error pasted at 3 a.m. answered NO_EVIDENCE.
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "var.rst").write_text(
        "Disk full on /var\n=================\n\nWhen /var fills up, journald stops writing.\n"
    )
    (folder / "cert.md").write_text("# Certificate expiry\n\nRenew the TLS certificate.\n")
    source = KnowledgeIndexSource(
        KnowledgeSettings(folder=str(folder), cache_dir=str(tmp_path / "c"), retrieval="lexical")
    )
    try:
        answer = await source.fetch(LookupKnowledgeRequest(query=query))
    finally:
        await source.aclose()
    assert [h["source"] for h in answer["contextPack"]["hits"]] == ["var.rst"]
