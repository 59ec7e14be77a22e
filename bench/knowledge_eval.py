"""Retrieval quality of the embedded knowledge index: lexical vs dense vs fused, in one run.

Two sets:
- the regression set, tests/workers/knowledge_eval.json over the shipped runbooks: hit@3 and
  MRR (chunk ranks) on its labelled queries, false evidence on its off-topic ones;
- issue 22's set, bench/knowledge_set (32 runbooks written for it, 96 queries of three kinds:
  `symptom`, `paraphrase`, `cross`-lingual; `off_topic` and `uncovered` negatives), split into
  a tuning part and a held-out part. Thresholds and fusion weights were set on `tune`; the
  figures to quote are `held_out`. Ranks are document ranks (distinct runbooks in hit order).
  A negative is false evidence when the contract projector makes it EVIDENCE_FOUND; "above
  LOW" counts MEDIUM or HIGH answers.

    .venv/bin/python bench/knowledge_eval.py [--part held_out|tune|all] [--sweep] [--verbose]
    .venv/bin/python bench/knowledge_eval.py --queries bench/knowledge_set/queries_fresh.json
    .venv/bin/python bench/knowledge_eval.py --queries bench/knowledge_set/queries_fresh.json \
        --overlap

--queries reads another query file of the same layout over the same 32 runbooks, every case of
it held out (queries_fresh.json was written blind, after the tuning, and is never tuned on).
--overlap prints, without running any retrieval, each paraphrase's content words found in its
runbook and in its runbook's title (the paraphrase check), then exits.
--sweep prints, on the tuning part only, the fused figures for a range of dense floors (how
DENSE_FLOOR was chosen) and the lexical coverage sweep on the regression set.
"""

from __future__ import annotations

import argparse
import json
import statistics
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
from workers.sources.knowledge import ranking
from workers.sources.knowledge.analysis import terms_of
from workers.sources.knowledge.index import (
    DEFAULT_KNOWLEDGE_DIR,
    KnowledgeIndexSource,
    KnowledgeSettings,
)
from workers.sources.knowledge.search import MIN_COVERAGE

ROOT = Path(__file__).resolve().parents[1]
EVAL_FILE = ROOT / "tests" / "workers" / "knowledge_eval.json"
SET_DIR = ROOT / "bench" / "knowledge_set"
MODES = ("lexical", "dense", "fused")
KINDS = ("symptom", "paraphrase", "cross")
NEGATIVES = ("off_topic", "uncovered")


def load_set(queries: Path | None = None) -> list[dict[str, Any]]:
    """Issue 22's cases: every third runbook's queries and every other negative are `tune`.
    Another file (`queries`) of the same layout is held out whole: nothing was tuned on it."""
    path = queries or SET_DIR / "queries.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    cases: list[dict[str, Any]] = []
    for i, (source, texts) in enumerate(data["answerable"].items()):
        part = "tune" if queries is None and i % 3 == 0 else "held_out"
        for kind, query in zip(KINDS, texts, strict=True):
            cases.append({"query": query, "kind": kind, "expect": source, "part": part})
    for kind in NEGATIVES:
        for j, query in enumerate(data[kind]):
            part = "tune" if queries is None and j % 2 == 0 else "held_out"
            cases.append({"query": query, "kind": kind, "expect": None, "part": part})
    return cases


def _overlap(query: str, source: str) -> float:
    # Share of the query's content words found in its runbook (the paraphrase check).
    text = (SET_DIR / "runbooks" / source).read_text(encoding="utf-8")
    words = set(terms_of(query, keep_stop_words=False))
    return len(words & set(terms_of(text, keep_stop_words=False))) / max(len(words), 1)


def shared_words(query: str, source: str) -> tuple[list[str], list[str]]:
    """The query's content words (lower-cased, stemmed, stop words out) found in its runbook's
    text, and those of them found in the runbook's title (its first heading)."""
    text = (SET_DIR / "runbooks" / source).read_text(encoding="utf-8")
    title = next((line.lstrip("#").strip() for line in text.splitlines() if line.strip()), "")
    words = dict.fromkeys(terms_of(query, keep_stop_words=False))
    in_text = set(terms_of(text, keep_stop_words=False))
    in_title = set(terms_of(title, keep_stop_words=False))
    return [w for w in words if w in in_text], [w for w in words if w in in_title]


def print_overlap(queries: Path) -> None:
    """The paraphrase check: each paraphrase's words shared with its runbook, and a summary."""
    rows = [c for c in load_set(queries) if c["kind"] == "paraphrase"]
    at_most_one = title_free = 0
    for case in rows:
        shared, titled = shared_words(case["query"], case["expect"])
        at_most_one += len(shared) <= 1
        title_free += not titled
        flag = "  <-- over" if len(shared) > 1 or titled else ""
        print(f"  {case['expect']:42s} text {shared} title {titled}{flag}")
    print(
        f"paraphrases: {len(rows)}; at most one content word shared with the runbook:"
        f" {at_most_one}; none shared with its title: {title_free}"
    )


async def run_set(
    cache: str, mode: str, cases: list[dict[str, Any]], verbose: bool
) -> dict[str, dict[str, float]]:
    """Per kind: hit@1, hit@3, MRR (answerable) or false evidence and above-LOW (negatives)."""
    settings = KnowledgeSettings(
        folder=str(SET_DIR / "runbooks"),
        cache_dir=cache,
        retrieval=mode,  # type: ignore[arg-type]
    )
    source = KnowledgeIndexSource(settings)
    tally: dict[str, dict[str, float]] = {}
    try:
        for case in cases:
            request = LookupKnowledgeRequest(query=case["query"])
            answer = await source.fetch(request)
            pack = answer["contextPack"]
            empty = dict.fromkeys(("n", "h1", "h3", "rr", "fe", "hi"), 0.0)
            row = tally.setdefault(case["kind"], empty)
            row["n"] += 1
            if case["expect"] is None:
                result: Any = project_rag(request, "call-eval", answer, DEFAULT_BOUNDS)
                found = result.evidence_status == EvidenceStatus.EVIDENCE_FOUND
                row["fe"] += found
                row["hi"] += found and pack.get("relevanceLevel") in ("high", "medium")
                if verbose and found:
                    top = pack["hits"][0]
                    print(
                        f"  [{mode}] {case['kind']} {case['query']!r}: {top['source']}"
                        f" {pack.get('relevanceLevel')} dense={top['scores']['dense']}"
                    )
                continue
            ranked = list(dict.fromkeys(h["source"] for h in pack["hits"]))
            rank = ranked.index(case["expect"]) + 1 if case["expect"] in ranked else 0
            row["h1"] += rank == 1
            row["h3"] += 1 <= rank <= 3
            row["rr"] += 1 / rank if rank else 0.0
            if verbose and rank != 1:
                print(f"  [{mode}] {case['kind']} rank={rank} {case['query']!r}: {ranked[:3]}")
    finally:
        await source.aclose()
    return tally


def print_set(cache: str, part: str, verbose: bool, queries: Path | None = None) -> None:
    """The one-run table of issue 22's set (or of another query file) for one part."""
    cases = [c for c in load_set(queries) if part == "all" or c["part"] == part]
    answerable = [c for c in cases if c["expect"] is not None]
    per_kind = ", ".join(f"{k} {sum(c['kind'] == k for c in cases)}" for k in KINDS)
    name = "issue-22 set" if queries is None else f"{queries.name} (all held out)"
    print(
        f"{name}, part={part}: {len(answerable)} answerable ({per_kind}),"
        f" {sum(c['kind'] == 'off_topic' for c in cases)} off-topic,"
        f" {sum(c['kind'] == 'uncovered' for c in cases)} uncovered"
    )
    for kind in KINDS:
        shares = [_overlap(c["query"], c["expect"]) for c in answerable if c["kind"] == kind]
        mean = statistics.mean(shares)
        print(f"  content-word overlap with its runbook, {kind}: mean {mean:.2f}")
    print(
        f"  {'mode':8s} "
        + "  ".join(f"{k:>19s}" for k in KINDS)
        + "  "
        + "  ".join(f"{k:>18s}" for k in NEGATIVES)
    )
    print(
        f"  {'':8s} "
        + "  ".join(f"{'hit@1 hit@3  MRR':>19s}" for _ in KINDS)
        + "  "
        + "  ".join(f"{'false-ev >LOW':>18s}" for _ in NEGATIVES)
    )
    for mode in MODES:
        tally = anyio.run(run_set, cache, mode, cases, verbose)
        cells = []
        for kind in KINDS:
            t = tally[kind]
            cells.append(f"{t['h1'] / t['n']:5.2f} {t['h3'] / t['n']:5.2f} {t['rr'] / t['n']:5.2f}")
        negs = []
        for kind in NEGATIVES:
            t = tally[kind]
            negs.append(f"{t['fe'] / t['n']:8.2f} {t['hi'] / t['n']:5.2f}")
        print(
            f"  {mode:8s} "
            + "  ".join(f"{c:>19s}" for c in cells)
            + "  "
            + "  ".join(f"{c:>18s}" for c in negs)
        )


async def evaluate(
    cache: str, min_coverage: float, verbose: bool, retrieval: str = "lexical"
) -> dict[str, float]:
    """The regression set once: hit@3, MRR (chunk ranks) and the false-evidence rates."""
    data = json.loads(EVAL_FILE.read_text(encoding="utf-8"))
    settings = KnowledgeSettings(
        folder=str(DEFAULT_KNOWLEDGE_DIR),
        cache_dir=cache,
        min_coverage=min_coverage,
        retrieval=retrieval,  # type: ignore[arg-type]
    )
    source = KnowledgeIndexSource(settings)
    hits3 = rr = 0.0
    levels: dict[str, int] = {}
    negatives: dict[str, list[int]] = {}
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
                print(f"  MISS [{retrieval}] {case['query']!r}: got {sources[:3]}")
        for kind in NEGATIVES:
            counts = negatives.setdefault(kind, [0, 0])
            for query in data.get(kind, []):
                request = LookupKnowledgeRequest(query=query)
                answer = await source.fetch(request)
                result: Any = project_rag(request, "call-eval", answer, DEFAULT_BOUNDS)
                if result.evidence_status == EvidenceStatus.EVIDENCE_FOUND:
                    counts[0] += 1
                    level = answer["contextPack"].get("relevanceLevel")
                    counts[1] += level in ("high", "medium")
                    if verbose:
                        top = answer["contextPack"]["hits"][0]["source"]
                        print(f"  FALSE EVIDENCE [{retrieval}] {kind} {query!r}: {top} {level}")
    finally:
        await source.aclose()
    n = len(data["labelled"])
    figures = {"labelled": n, "hit@3": hits3 / n, "mrr": rr / n}
    for kind in NEGATIVES:
        total = max(len(data.get(kind, [])), 1)
        figures[kind] = len(data.get(kind, []))
        figures[f"{kind}_false_evidence"] = negatives[kind][0] / total
        figures[f"{kind}_above_low"] = negatives[kind][1] / total
    figures.update({f"level_{k}": v for k, v in sorted(levels.items())})
    return figures


def print_regression(cache: str, verbose: bool) -> None:
    """The regression set, every mode."""
    for mode in MODES:
        f = anyio.run(evaluate, cache, MIN_COVERAGE, verbose, mode)
        print(
            f"regression set [{mode:7s}]: {f['labelled']} labelled hit@3={f['hit@3']:.3f}"
            f" MRR={f['mrr']:.3f}; off-topic {f['off_topic']} false evidence"
            f" {f['off_topic_false_evidence']:.2f}; uncovered {f['uncovered']} false evidence"
            f" {f['uncovered_false_evidence']:.2f}, above LOW {f['uncovered_above_low']:.2f};"
            f" levels { ({k[6:]: v for k, v in f.items() if k.startswith('level_')}) }"
        )


def sweep(cache: str) -> None:
    """Calibration views: the dense floor on the tuning part, coverage on the regression set."""
    cases = [c for c in load_set() if c["part"] == "tune"]
    default = ranking.DENSE_FLOOR
    for floor in (0.18, 0.20, 0.22, 0.25, 0.28, 0.30, 0.32, 0.35):
        ranking.DENSE_FLOOR = floor  # type: ignore[misc]
        tally = anyio.run(run_set, cache, "fused", cases, False)
        h3 = " ".join(f"{k} {tally[k]['h3'] / tally[k]['n']:.2f}" for k in KINDS)
        fe = " ".join(
            f"{k} {tally[k]['fe'] / tally[k]['n']:.2f}/{tally[k]['hi'] / tally[k]['n']:.2f}"
            for k in NEGATIVES
        )
        print(f"  tune, fused, dense_floor={floor:.2f}: hit@3 {h3}; false-ev/>LOW {fe}")
    ranking.DENSE_FLOOR = default  # type: ignore[misc]
    for step in range(30, 95, 10):
        f = anyio.run(evaluate, cache, step / 100, False)
        print(
            f"  regression, lexical, min_coverage={step / 100:.2f} hit@3={f['hit@3']:.3f}"
            f" MRR={f['mrr']:.3f} off-topic false evidence={f['off_topic_false_evidence']:.3f}"
        )


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("held_out", "tune", "all"), default="held_out")
    parser.add_argument("--sweep", action="store_true", help="also print the calibration sweeps")
    parser.add_argument("--verbose", action="store_true", help="print misses and false evidence")
    parser.add_argument(
        "--queries", type=Path, help="another query file of queries.json's layout, all held out"
    )
    parser.add_argument(
        "--overlap", action="store_true", help="only print the paraphrase overlap check"
    )
    args = parser.parse_args()
    if args.overlap:
        print_overlap(args.queries or SET_DIR / "queries.json")
        return
    with tempfile.TemporaryDirectory() as cache:
        print_regression(cache, args.verbose)
        print_set(cache, "all" if args.queries else args.part, args.verbose, args.queries)
        if args.sweep:
            sweep(cache)


if __name__ == "__main__":
    main()
