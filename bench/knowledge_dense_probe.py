"""Dense-side variants for paraphrase recall, measured on the TUNING part of issue 22's set only.

What is embedded per chunk, several granularities, a runbook score aggregated over its chunks,
the query with and without stop words or with the synonym table's expansions, mean-centering
(the corpus mean, or one mean per language, subtracted from chunk and query vectors), a hubness
penalty (CSLS-like: a chunk's mean cosine to its nearest chunks of other runbooks), and the
fused lexical weight. Ranks are runbook ranks over every chunk of the folder (dense only, no
floor, so a rank past the answer's five hits still counts for MRR); the held-out part is never
scored here. The regression set (tests/workers/knowledge_eval.json, shipped runbooks) is
printed beside it as a second check. `top neg` is the highest top-runbook cosine of the
negatives (off-topic / uncovered, tuning part and regression set together): what a floor
would have to stay above.

    .venv/bin/python bench/knowledge_dense_probe.py [--lexical]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.knowledge_eval import (
    EVAL_FILE,
    KINDS,
    NEGATIVES,
    SET_DIR,
    evaluate,
    load_set,
    run_set,
)
from workers.sources.knowledge import ranking
from workers.sources.knowledge.analysis import CJK, Chunk, split_document, synonym_groups, terms_of
from workers.sources.knowledge.encoder import chunk_text, normalised, shared_use_encoder
from workers.sources.knowledge.files import runbook_files
from workers.sources.knowledge.index import DEFAULT_KNOWLEDGE_DIR
from workers.sources.knowledge.search import MIN_COVERAGE

Vectors = npt.NDArray[np.float32]
ENCODER = shared_use_encoder()


def _body(chunk: Chunk) -> str:
    return chunk.content.split("\n", 1)[-1] if chunk.content.startswith("#") else chunk.content


def _corpus(folder: Path) -> list[Chunk]:
    chunks: list[Chunk] = []
    for source, path in runbook_files(folder.resolve()):
        chunks.extend(split_document(path.read_text(encoding="utf-8"), source))
    return chunks


def _windows(text: str, size: int) -> list[str]:
    """Windows of whole sentences/lines of about `size` characters, overlapping by half."""
    parts = [p for p in re.split(r"(?<=[.!?\u3002\uff01\uff1f\n])\s*", text) if p.strip()]
    out: list[str] = []
    i = 0
    while i < len(parts):
        j, n = i, 0
        while j < len(parts) and n < size:
            n += len(parts[j])
            j += 1
        out.append(" ".join(parts[i:j]))
        if j >= len(parts):
            break
        k, moved = i, 0
        while k < j - 1 and moved < size // 2:
            moved += len(parts[k])
            k += 1
        i = max(k, i + 1)
    return out


def _units(chunks: list[Chunk], embed: str) -> tuple[list[str], list[int]]:
    """The texts embedded (several per chunk for windows) and the chunk each belongs to."""
    texts: list[str] = []
    owner: list[int] = []
    for ci, c in enumerate(chunks):
        body = _body(c)
        shipped = chunk_text(c.breadcrumb, body)
        if embed == "shipped":
            these = [shipped]
        elif embed.startswith("cut"):
            these = [f"{c.breadcrumb}\n{body}"[: int(embed[3:])]]
        elif embed == "body only":
            these = [body[:600] or c.breadcrumb]
        elif embed == "+ crumb alone":
            these = [shipped, c.breadcrumb]
        elif embed.startswith("+ windows"):
            size = int(embed.split()[-1])
            these = [shipped, *(chunk_text(c.breadcrumb, w) for w in _windows(body, size))]
        else:
            raise ValueError(embed)
        texts.extend(these)
        owner.extend([ci] * len(these))
    return texts, owner


def _no_stop(query: str) -> str:
    stop = set(terms_of(query)) - set(terms_of(query, keep_stop_words=False))
    return " ".join(w for w in query.split() if w.lower() not in stop) or query


def _with_synonyms(query: str) -> str:
    groups = synonym_groups()
    extra: list[str] = []
    for term in dict.fromkeys(terms_of(query, keep_stop_words=False)):
        extra += sorted(groups.get(term, frozenset()) - {term})
    return " ".join([query, *dict.fromkeys(extra)])


def _cases(part: str) -> list[dict[str, Any]]:
    if part == "tune":
        return [c for c in load_set() if c["part"] == "tune"]
    data = json.loads(EVAL_FILE.read_text(encoding="utf-8"))
    cases = [
        {"query": c["query"], "kind": "regression", "expect": c["expect"]} for c in data["labelled"]
    ]
    return cases + [{"query": q, "kind": k, "expect": None} for k in NEGATIVES for q in data[k]]


def probe(
    part: str,
    *,
    embed: str = "shipped",
    center: str = "none",
    alpha: float = 1.0,
    query: Callable[[str], str] = str,
    top_mean: float = 0.0,
    doc_mix: float = 0.0,
    hubness: float = 0.0,
) -> dict[str, dict[str, Any]]:
    """Runbook ranks of one part under one variant: per kind n, h1, h3, rr, tops."""
    folder = SET_DIR / "runbooks" if part == "tune" else DEFAULT_KNOWLEDGE_DIR
    chunks = _corpus(folder)
    texts, owner = _units(chunks, embed)
    units = ENCODER.encode(texts)
    sources = sorted({c.source for c in chunks})
    chunk_cjk = np.array([CJK.search(chunks[o].title) is not None for o in owner])
    means = {flag: units.mean(axis=0) for flag in (False, True)}
    if center == "language":
        for flag in (False, True):
            if (chunk_cjk == flag).any():
                means[flag] = units[chunk_cjk == flag].mean(axis=0)
    shift: Callable[[Vectors, bool], Vectors] = lambda v, _cjk: v  # noqa: E731
    if center != "none":
        shift = lambda v, cjk: normalised(np.atleast_2d(v - alpha * means[cjk]))  # noqa: E731
        units = np.vstack([shift(u, bool(z)) for u, z in zip(units, chunk_cjk, strict=True)])
    penalty = np.zeros(len(units), dtype=np.float32)
    if hubness:
        own = np.array([chunks[o].source for o in owner])
        sims = units @ units.T
        sims[own[:, None] == own[None, :]] = -1.0
        penalty = hubness * np.sort(sims, axis=1)[:, -10:].mean(axis=1)
    whole = None
    if doc_mix:
        by_source = {s: [c for c in chunks if c.source == s] for s in sources}
        docs = [
            chunk_text(cs[0].title, " ".join(_body(c) for c in cs)) for cs in by_source.values()
        ]
        whole = ENCODER.encode(docs)
    cases = _cases(part)
    queries = ENCODER.encode([query(c["query"]) for c in cases])
    tally: dict[str, dict[str, Any]] = {}
    for case, vector in zip(cases, queries, strict=True):
        qv = shift(vector, CJK.search(case["query"]) is not None).reshape(-1)
        cos = units @ qv - penalty
        per_source: dict[str, list[float]] = {s: [] for s in sources}
        for o, value in zip(owner, cos, strict=True):
            per_source[chunks[o].source].append(float(value))
        score = {}
        for s, values in per_source.items():
            values.sort(reverse=True)
            score[s] = values[0] + top_mean * float(np.mean(values[:3]))
        if whole is not None:
            for s, value in zip(sources, whole @ qv, strict=True):
                score[s] += doc_mix * float(value)
        ranked = sorted(score, key=lambda s: score[s], reverse=True)
        row = tally.setdefault(case["kind"], {"n": 0, "h1": 0, "h3": 0, "rr": 0.0, "tops": []})
        row["n"] += 1
        row["tops"].append(score[ranked[0]])
        expect = case["expect"]
        if expect is None:
            continue
        expect = expect if isinstance(expect, list) else [expect]
        rank = next((i for i, s in enumerate(ranked, 1) if s in expect), 0)
        row["h1"] += rank == 1
        row["h3"] += 1 <= rank <= 3
        row["rr"] += 1 / rank if rank else 0.0
    return tally


def _cell(row: dict[str, Any]) -> str:
    n = row["n"]
    return f"{row['h1'] / n:.2f} {row['h3'] / n:.2f} {row['rr'] / n:.2f}"


VARIANTS: Sequence[tuple[str, dict[str, Any]]] = (
    ("shipped: crumb + body[:600], max", {}),
    ("cut 300 chars", {"embed": "cut300"}),
    ("body only", {"embed": "body only"}),
    ("+ breadcrumb alone, max", {"embed": "+ crumb alone"}),
    ("+ windows 200 chars, max", {"embed": "+ windows 200"}),
    ("+ windows 300 chars, max", {"embed": "+ windows 300"}),
    ("max + 0.2 mean(top-3 chunks)", {"top_mean": 0.2}),
    ("max + 0.5 mean(top-3 chunks)", {"top_mean": 0.5}),
    ("+ 0.2 whole-runbook vector", {"doc_mix": 0.2}),
    ("+ 0.5 whole-runbook vector", {"doc_mix": 0.5}),
    ("query without stop words", {"query": _no_stop}),
    ("query + synonym expansions", {"query": _with_synonyms}),
    ("mean-centred (corpus)", {"center": "corpus"}),
    ("mean-centred (corpus) x0.5", {"center": "corpus", "alpha": 0.5}),
    ("mean-centred (per language)", {"center": "language"}),
    ("mean-centred (per language) x0.5", {"center": "language", "alpha": 0.5}),
    ("hubness penalty 0.3", {"hubness": 0.3}),
    ("hubness penalty 0.5", {"hubness": 0.5}),
)


def print_variants() -> None:
    """One line per variant: tuning part per kind, regression set, negatives' top cosine."""
    head = "  ".join(f"{k:>14s}" for k in (*KINDS, "regression"))
    print(f"{'variant (dense, runbook ranks)':34s} {head}  top neg off/unc")
    print(f"{'':34s} " + "  ".join(f"{'h@1  h@3  MRR':>14s}" for _ in range(4)))
    for name, options in VARIANTS:
        tune = probe("tune", **options)
        regression = probe("regression", **options)
        cells = [_cell(tune[k]) for k in KINDS] + [_cell(regression["regression"])]
        negatives = [max(tune[k]["tops"] + regression[k]["tops"]) for k in NEGATIVES]
        print(
            f"{name:34s} "
            + "  ".join(f"{c:>14s}" for c in cells)
            + f"  {negatives[0]:.2f} / {negatives[1]:.2f}",
            flush=True,
        )


def print_lexical_weights() -> None:
    """The fused lexical weight on the tuning part (the real pipeline) and the regression set."""
    cases = [c for c in load_set() if c["part"] == "tune"]
    default = ranking.LEXICAL_WEIGHT
    with tempfile.TemporaryDirectory() as cache:
        for weight in (0.0, 0.05, 0.1, 0.15, 0.2, 0.3):
            ranking.LEXICAL_WEIGHT = weight  # type: ignore[misc]
            tally = anyio.run(run_set, cache, "fused", cases, False)
            figures = anyio.run(evaluate, cache, MIN_COVERAGE, False, "fused")
            cells = "  ".join(
                f"{k} {t['h1'] / t['n']:.2f} {t['h3'] / t['n']:.2f} {t['rr'] / t['n']:.2f}"
                for k, t in ((k, tally[k]) for k in KINDS)
            )
            print(
                f"  tune, fused, lexical weight {weight:.2f}: {cells}; regression"
                f" hit@3 {figures['hit@3']:.3f} MRR {figures['mrr']:.3f}",
                flush=True,
            )
    ranking.LEXICAL_WEIGHT = default  # type: ignore[misc]


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lexical", action="store_true", help="also sweep the lexical weight")
    args = parser.parse_args()
    print_variants()
    if args.lexical:
        print_lexical_weights()


if __name__ == "__main__":
    main()
