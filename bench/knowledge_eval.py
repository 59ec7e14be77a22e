"""Retrieval quality of the embedded knowledge index over the shipped runbooks.

Reads tests/workers/knowledge_eval.json and prints hit@3 and MRR on the labelled queries and
the false-evidence rate on the off-topic ones (a query counts as false evidence when the
contract projector turns the answer into EVIDENCE_FOUND). With --sweep it also prints the
figures for a range of coverage thresholds, which is how MIN_COVERAGE was calibrated.

    .venv/bin/python bench/knowledge_eval.py [--sweep] [--verbose]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contracts import project_rag
from contracts.bounds import DEFAULT_BOUNDS
from contracts.requests import LookupKnowledgeRequest
from contracts.status import EvidenceStatus
from workers.sources.knowledge.index import (
    DEFAULT_KNOWLEDGE_DIR,
    MIN_COVERAGE,
    KnowledgeIndexSource,
    KnowledgeSettings,
)

EVAL_FILE = Path(__file__).resolve().parents[1] / "tests" / "workers" / "knowledge_eval.json"


async def evaluate(cache: str, min_coverage: float, verbose: bool) -> dict[str, float]:
    """Run every eval query once; return hit@3, MRR and the false-evidence rate."""
    data = json.loads(EVAL_FILE.read_text(encoding="utf-8"))
    settings = KnowledgeSettings(
        folder=str(DEFAULT_KNOWLEDGE_DIR), cache_dir=cache, min_coverage=min_coverage
    )
    source = KnowledgeIndexSource(settings)
    hits3 = rr = 0.0
    levels: dict[str, int] = {}
    try:
        for case in data["labelled"]:
            answer = await source.fetch(LookupKnowledgeRequest(query=case["query"]))
            sources = [h["source"] for h in answer["contextPack"]["hits"]]
            rank = next((i for i, s in enumerate(sources, 1) if s in case["expect"]), 0)
            hits3 += 1 <= rank <= 3
            rr += 1 / rank if rank else 0.0
            level = answer["contextPack"].get("relevanceLevel", "none")
            levels[level] = levels.get(level, 0) + 1
            if verbose and not 1 <= rank <= 3:
                print(f"  MISS {case['query']!r}: got {sources[:3]}")
        false_evidence = 0
        for query in data["off_topic"]:
            request = LookupKnowledgeRequest(query=query)
            answer = await source.fetch(request)
            result: Any = project_rag(request, "call-eval", answer, DEFAULT_BOUNDS)
            if result.evidence_status == EvidenceStatus.EVIDENCE_FOUND:
                false_evidence += 1
                if verbose:
                    print(
                        f"  FALSE EVIDENCE {query!r}: {answer['contextPack']['hits'][0]['source']}"
                    )
    finally:
        await source.aclose()
    n = len(data["labelled"])
    return {
        "labelled": n,
        "off_topic": len(data["off_topic"]),
        "hit@3": hits3 / n,
        "mrr": rr / n,
        "false_evidence_rate": false_evidence / len(data["off_topic"]),
        **{f"level_{k}": v for k, v in sorted(levels.items())},
    }


def main() -> None:
    """Print the figures (and the threshold sweep with --sweep)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", action="store_true", help="also sweep the coverage threshold")
    parser.add_argument("--verbose", action="store_true", help="print misses and false evidence")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        figures = anyio.run(evaluate, cache, MIN_COVERAGE, args.verbose)
        print(
            f"knowledge eval: {figures['labelled']} labelled, {figures['off_topic']} off-topic, "
            f"min_coverage={MIN_COVERAGE}"
        )
        print(
            f"hit@3={figures['hit@3']:.3f} MRR={figures['mrr']:.3f} "
            f"false_evidence_rate={figures['false_evidence_rate']:.3f}"
        )
        print(
            "relevance levels of labelled answers:",
            {k[6:]: v for k, v in figures.items() if k.startswith("level_")},
        )
        if args.sweep:
            for step in range(30, 95, 5):
                f = anyio.run(evaluate, cache, step / 100, False)
                print(
                    f"  min_coverage={step / 100:.2f} hit@3={f['hit@3']:.3f} "
                    f"MRR={f['mrr']:.3f} false_evidence={f['false_evidence_rate']:.3f}"
                )


if __name__ == "__main__":
    main()
