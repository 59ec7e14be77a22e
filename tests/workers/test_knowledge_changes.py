"""Runbooks edited, added or deleted under a running worker: a lookup never shows text the
folder no longer holds, and an answer from an index older than the folder says so.

Found by the day-two drill: `rm high-cpu.md`, then `lookup_knowledge("high cpu usage
throttling")` answered EVIDENCE_FOUND with that runbook's excerpts, first with no word at all
(within the 2 s between two looks at the folder) and then with `index_rebuilding` in the
Control View only, while the previous index answered during the rebuild; an edited section's
old text was shown as a verbatim excerpt the same way.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

from contracts.requests import LookupKnowledgeRequest
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings

CPU = "# High CPU\n\n## Throttling\nCPU throttling of the pod: raise the cpu limit of the pod.\n"
DISK = "# Disk full\n\n## Space\nNo space left on device: find what uses the space.\n"


class _SlowBuilds:
    """A deterministic encoder whose builds take a while (queries do not): a rebuild runs
    while the lookups after a change are answered."""

    model_id = "test-slow-builds-changes"
    dim = 8

    def encode(self, texts: Any) -> Any:
        if len(texts) > 1:
            time.sleep(0.5)
        rows = np.ones((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            rows[i, sum(map(ord, text)) % self.dim] += 3.0
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _source(tmp_path: Path) -> tuple[KnowledgeIndexSource, Path]:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "high-cpu.md").write_text(CPU)
    (folder / "disk-full.md").write_text(DISK)
    settings = KnowledgeSettings(folder=str(folder), cache_dir=str(tmp_path / "cache"))
    return KnowledgeIndexSource(settings, _SlowBuilds()), folder


def _sources(answer: dict[str, Any]) -> list[str]:
    return [hit["source"] for hit in answer["contextPack"]["hits"]]


@pytest.mark.parametrize("wait_s", [0.0, 0.3])  # within the time between looks, and after
async def test_a_deleted_runbook_is_never_shown(
    tmp_path: Path, wait_s: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    import workers.sources.knowledge.index as knowledge

    monkeypatch.setattr(knowledge, "_RECHECK_S", 0.25)  # 2 s in production
    source, folder = _source(tmp_path)
    ask = LookupKnowledgeRequest(query="cpu throttling of the pod")
    try:
        assert "high-cpu.md" in _sources(await source.fetch(ask))
        (folder / "high-cpu.md").unlink()
        await anyio.sleep(wait_s)
        answer = await source.fetch(ask)
        assert "high-cpu.md" not in _sources(answer), answer["contextPack"]["hits"]
        assert answer["contextPack"].get("indexRebuilding") is True  # the index is older
    finally:
        await source.aclose()


async def test_an_edited_section_is_never_shown_as_it_was(tmp_path: Path) -> None:
    source, folder = _source(tmp_path)
    ask = LookupKnowledgeRequest(query="cpu throttling of the pod")
    try:
        first = await source.fetch(ask)
        assert any("raise the cpu limit" in h["content"] for h in first["contextPack"]["hits"])
        (folder / "high-cpu.md").write_text(CPU.replace("raise the cpu limit", "scale out"))
        answer = await source.fetch(ask)
        shown = " ".join(h["content"] for h in answer["contextPack"]["hits"])
        assert "raise the cpu limit" not in shown, shown
        assert answer["contextPack"].get("indexRebuilding") is True
    finally:
        await source.aclose()
