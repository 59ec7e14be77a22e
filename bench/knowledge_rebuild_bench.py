"""What editing one runbook costs the embedded knowledge index: lookups during the rebuild and
the rebuild itself, in a running worker and in a fresh one.

    .venv/bin/python bench/knowledge_rebuild_bench.py [--chunks 2000] [--json]

Over a generated folder of about --chunks chunks (bench/knowledge_bench.py's generator), with a
fresh copy of the bundled encoder (nothing remembered from another build):
1. first build: seconds;
2. one section of one runbook edited, in the same (running) source: a lookup every 50 ms, each
   under a 10 s deadline like a worker's, until the edit is answered: seconds until then, how
   many lookups answered and how many hit the deadline, their p50/p99;
3. another section edited, read by a new source with a new encoder (a worker started after the
   edit): the first lookup's seconds (it builds), and how many chunks that build embedded.

It uses only `KnowledgeIndexSource`, so the same script measures an older commit (run it with
that commit's tree first on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from knowledge_bench import _generate

from contracts.requests import LookupKnowledgeRequest
from workers.sources.knowledge.encoder import UseEncoder
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings

DEADLINE_S = 10.0
EVERY_S = 0.05


class CountingEncoder:
    """A fresh bundled encoder that counts the texts builds embed (queries apart)."""

    def __init__(self) -> None:
        self.inner = UseEncoder()
        self.model_id, self.dim = self.inner.model_id, self.inner.dim
        self.embedded = 0

    def encode(self, texts: Sequence[str]) -> Any:
        if len(texts) > 1 or not texts[0].startswith("q:"):
            self.embedded += len(texts)
        return self.inner.encode(texts)


def _source(folder: Path, cache: Path, encoder: CountingEncoder) -> KnowledgeIndexSource:
    settings = KnowledgeSettings(folder=str(folder), cache_dir=str(cache))
    return KnowledgeIndexSource(settings, encoder)  # type: ignore[arg-type]


def _edit(path: Path, word: str) -> None:
    stamp = path.stat().st_mtime_ns + 10**9
    text = path.read_text(encoding="utf-8").replace("## Section 1", f"## Section 1 {word}", 1)
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(stamp, stamp))


async def _answers(source: KnowledgeIndexSource, word: str) -> bool:
    answer = await source.fetch(LookupKnowledgeRequest(query=f"q: {word}"))
    return any(word in h["breadcrumb"] for h in answer["contextPack"]["hits"])


async def run(chunks: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        folder, cache = tmp / "kb", tmp / "cache"
        folder.mkdir()
        _generate(folder, chunks)
        docs = sorted(folder.glob("*.md"))
        encoder = CountingEncoder()
        encoder.encode(["load the model first", "so loading is not timed"])
        encoder.embedded = 0
        source = _source(folder, cache, encoder)
        report: dict[str, Any] = {"chunks": 0}
        try:
            started = time.perf_counter()
            answer = await source.fetch(LookupKnowledgeRequest(query="q: warm up"))
            report["chunks"] = answer["contextPack"]["indexedChunks"]
            report["first_build_s"] = round(time.perf_counter() - started, 1)
            _edit(docs[len(docs) // 2], "zanzibar")
            await anyio.sleep(2.1)  # past the source's recheck interval
            times: list[float] = []
            timeouts = 0
            started = time.perf_counter()
            while time.perf_counter() - started < 600:
                began = time.perf_counter()
                try:
                    with anyio.fail_after(DEADLINE_S):
                        seen = await _answers(source, "zanzibar")
                except TimeoutError:
                    timeouts += 1
                    seen = False
                times.append((time.perf_counter() - began) * 1000)
                if seen:
                    break
                await anyio.sleep(EVERY_S)
            report["running_worker"] = {
                "edit_answered_after_s": round(time.perf_counter() - started, 1),
                "lookups": len(times),
                "timed_out": timeouts,
                "p50_ms": round(statistics.median(times), 1),
                "max_ms": round(max(times), 1),
            }
        finally:
            await source.aclose()
        _edit(docs[len(docs) // 3], "kilimanjaro")
        fresh = CountingEncoder()
        fresh.encode(["load the model first", "so loading is not timed"])
        fresh.embedded = 0
        source = _source(folder, cache, fresh)
        try:
            started = time.perf_counter()
            seen = await _answers(source, "kilimanjaro")
            report["fresh_worker"] = {
                "first_lookup_s": round(time.perf_counter() - started, 1),
                "answered_the_edit": seen,
                "chunks_embedded": fresh.embedded,
            }
        finally:
            await source.aclose()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = anyio.run(run, args.chunks)
    print(json.dumps(report) if args.json else "\n".join(f"{k}: {v}" for k, v in report.items()))


if __name__ == "__main__":
    main()
