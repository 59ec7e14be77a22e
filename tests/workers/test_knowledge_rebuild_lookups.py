"""Review of e2211c3: while a rebuild embeds many new chunks with the bundled encoder, lookups
still answer from the previous index (their query vector does not wait for the whole build)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

import workers.sources.knowledge.index as knowledge
from contracts.requests import LookupKnowledgeRequest
from workers.sources.knowledge.encoder import shared_use_encoder
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings

_DISK = (
    "# Disk full\n\n## Symptoms\nWrites fail: no space left on device.\n\n"
    "## Mitigation\nRotate logs and delete old core dumps.\n"
)


def _big_runbook(sections: int) -> str:
    return "# Replica catalogue\n" + "".join(
        f"\n## Replica {i} lag\nReplica {i} of shard {i % 7} falls behind the primary by"
        f" {i} seconds when the binlog of batch job {i} is applied in one transaction.\n"
        for i in range(sections)
    )


@pytest.mark.serial
async def test_lookups_answer_while_a_rebuild_embeds_many_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the build held the encoder's lock for its whole batch (~5 ms a chunk), so a
    # lookup "answering from the previous index" waited seconds to embed its query.
    monkeypatch.setattr(knowledge, "_RECHECK_S", 0.0)
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "disk.md").write_text(_DISK, encoding="utf-8")
    encoder = shared_use_encoder()
    source = KnowledgeIndexSource(
        KnowledgeSettings(folder=str(folder), cache_dir=str(tmp_path / "cache")), encoder
    )
    ask = LookupKnowledgeRequest(query="rotate logs")
    try:
        await source.fetch(ask)
        big = folder / "replicas.md"
        big.write_text(_big_runbook(500), encoding="utf-8")
        stamp = time.time_ns() + 10**9
        os.utime(big, ns=(stamp, stamp))
        slowest, answered = 0.0, 0
        with anyio.fail_after(60):
            while True:
                started = time.perf_counter()
                answer = await source.fetch(ask)
                took = time.perf_counter() - started
                if answer["contextPack"]["indexedChunks"] > 2:
                    break  # the new index is in
                slowest, answered = max(slowest, took), answered + 1
                await anyio.sleep(0.02)
        # The rebuild takes seconds: lookups keep answering meanwhile, each promptly.
        assert answered >= 3 and slowest < 0.6, f"{answered} lookups, slowest {slowest:.2f} s"
    finally:
        await source.aclose()
