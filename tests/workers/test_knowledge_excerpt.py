"""A hit of the embedded index reaches the model whole: no chunk is longer than the contract's
excerpt bound, so the projection never cuts the text a lookup matched.

Chunks were packed up to 1,000 characters and the Model Observation shows 700 of each hit
(`Bounds.rag_excerpt_chars`): on openshift/runbooks and gitlab-com/runbooks 68 of 263 hits
were cut, some matched only on words past the cut ("block a project causing high load" ->
its Steps section, "block" only after character 700). The section below is written here in
the shape of those runbooks' long Diagnosis sections.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contracts import project_rag
from contracts.bounds import DEFAULT_BOUNDS
from contracts.requests import LookupKnowledgeRequest
from contracts.status import EvidenceStatus
from workers.sources.knowledge.analysis import MAX_CHUNK_CHARS, split_markdown
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings

_FILLER = (
    "Check the pods of the namespace with `oc get pods` and read the events of the ones that"
    " are not ready; compare their restart counts with the ones of the day before, and look at"
    " the node each one runs on. "
)
RUNBOOK = (
    "# GitalyLatencyTooHigh\n\n## Diagnosis\n\n"
    + "\n\n".join(_FILLER * 2 for _ in range(2))
    + "\n\nIf one project causes the load, block the project in the admin area: set its"
    " repository read-only and tell the owner.\n"
)


def test_no_chunk_is_longer_than_the_excerpt_the_model_sees() -> None:
    assert MAX_CHUNK_CHARS <= DEFAULT_BOUNDS.rag_excerpt_chars
    chunks = split_markdown(RUNBOOK, "gitaly/latency.md")
    assert len(chunks) >= 2 and all(len(c.content) <= MAX_CHUNK_CHARS for c in chunks)


async def test_the_matched_words_are_in_the_excerpt(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "latency.md").write_text(RUNBOOK, encoding="utf-8")
    source = KnowledgeIndexSource(KnowledgeSettings(folder=str(kb), cache_dir=str(tmp_path / "c")))
    request = LookupKnowledgeRequest(query="block the project read-only and tell the owner")
    try:
        answer: dict[str, Any] = await source.fetch(request)
    finally:
        await source.aclose()
    result: Any = project_rag(request, "call-1", answer, DEFAULT_BOUNDS)
    assert result.evidence_status == EvidenceStatus.EVIDENCE_FOUND
    assert "block the project" in result.evidence[0].excerpt
    assert not result.truncated
