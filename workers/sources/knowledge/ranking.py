"""Dense and fused ranking of the knowledge index, and the calibrated relevance level.

Dense: the query's unit vector against every chunk's (numpy, brute force: a few milliseconds
at 100k chunks, bench/knowledge_bench.py). Fused (the default): dense first, the lexical score
added as a small boost, min-max normalised over the lexical candidates (`LEXICAL_WEIGHT`):
exact terms (`ERROR 1205`, class names) reorder close dense scores, while BM25's noise across
languages cannot outvote the dense order. Reciprocal-rank fusion and a same-language-only
boost were measured and lost on the tuning part (docs/knowledge.md).

A chunk is evidence when its cosine reaches `DENSE_FLOOR` or, in fused mode, its lexical
coverage reaches the lexical threshold. The relevance level comes from the top hit's cosine
and coverage together. All thresholds were set on the tuning part of
bench/knowledge_set and are reported on its held-out part (bench/knowledge_eval.py).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

from workers.sources.knowledge.encoder import one_blas_thread
from workers.sources.knowledge.search import (
    HIGH_COVERAGE,
    MEDIUM_COVERAGE,
    Candidate,
    hits_of,
    lexical_candidates,
)
from workers.sources.knowledge.store import IndexFile

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["DENSE_FLOOR", "LEXICAL_WEIGHT", "Mode", "dense_relevance", "rank"]

Mode = Literal["fused", "dense", "lexical"]

# Calibrated on the tuning part of bench/knowledge_set (see docs/knowledge.md).
DENSE_FLOOR: Final = 0.30  # the highest floor that kept every tuning answer (off-topic <= 0.20)
LEXICAL_WEIGHT: Final = 0.1
HIGH_DENSE: Final = 0.6
MEDIUM_DENSE: Final = 0.45
_DENSE_CANDIDATES: Final = 50
_PER_SOURCE: Final = 1  # one section per runbook: room for other runbooks among the hits


def dense_relevance(dense: float, coverage: float) -> str:
    """The relevance level of a top hit from its cosine and its lexical coverage."""
    medium_lexical = coverage >= MEDIUM_COVERAGE
    if (
        dense >= HIGH_DENSE
        or (dense >= MEDIUM_DENSE and medium_lexical)
        or coverage >= HIGH_COVERAGE
    ):
        return "high"
    return "medium" if dense >= MEDIUM_DENSE or medium_lexical else "low"


def _dense_top(
    vectors: npt.NDArray[np.float32], query_vector: npt.NDArray[np.float32]
) -> dict[int, float]:
    import numpy as np

    with one_blas_thread():
        cosines = vectors @ query_vector
    k = min(_DENSE_CANDIDATES, len(cosines))
    top = np.argpartition(-cosines, k - 1)[:k] if k else np.zeros(0, dtype=np.int64)
    return {int(i) + 1: float(cosines[i]) for i in top}


def rank(
    index: IndexFile,
    query: str,
    query_vector: npt.NDArray[np.float32],
    groups: Mapping[str, frozenset[str]],
    *,
    mode: Mode,
    min_coverage: float,
    max_hits: int,
) -> tuple[list[dict[str, Any]], str | None, list[dict[str, Any]]]:
    """Hits of `query` best first (one chunk per runbook), the relevance level of
    the top hit (None without hits), and the trace."""
    started = time.perf_counter()
    vectors = index.vectors
    if vectors is None:
        raise ValueError("dense ranking needs an index built with an encoder")
    lexical, concepts, trace = lexical_candidates(index, query, groups)
    if mode == "dense":
        lexical = []
    by_row: dict[int, Candidate] = {c.rowid: c for c in lexical}
    dense = _dense_top(vectors, query_vector)
    trace.append({"step": "dense", "candidates": len(dense), "floor": DENSE_FLOOR})
    for rowid in dense:
        by_row.setdefault(rowid, Candidate(rowid=rowid))
    strong = [c.lexical for c in lexical if c.coverage >= min_coverage]
    top_lexical = max(strong, default=0.0) or 1.0
    kept: list[Candidate] = []
    for c in by_row.values():
        cosine = dense.get(c.rowid)
        c.dense = float(vectors[c.rowid - 1] @ query_vector) if cosine is None else cosine
        lexical_ok = c.coverage >= min_coverage
        if not (c.dense >= DENSE_FLOOR or lexical_ok):  # NaN-safe: a NaN cosine is no evidence
            continue
        c.final = c.dense + (LEXICAL_WEIGHT * c.lexical / top_lexical if lexical_ok else 0.0)
        kept.append(c)
    kept.sort(key=lambda c: c.final, reverse=True)
    ranked = _per_source(index, kept, max_hits)
    trace.append({"step": "fuse", "mode": mode, "kept": len(kept)})
    hits, step = hits_of(index, ranked, concepts, started)
    level = None
    if ranked:
        level = dense_relevance(ranked[0].dense or 0.0, ranked[0].coverage)
    return hits, level, [*trace, step]


def _per_source(index: IndexFile, kept: list[Candidate], max_hits: int) -> list[Candidate]:
    if not kept:
        return []
    marks = ",".join("?" * len(kept))
    source_of = dict(
        index.conn.execute(
            f"SELECT rowid, source FROM chunks WHERE rowid IN ({marks})", [c.rowid for c in kept]
        ).fetchall()
    )
    taken: dict[str, int] = {}
    ranked: list[Candidate] = []
    for c in kept:
        source = source_of[c.rowid]
        if taken.get(source, 0) < _PER_SOURCE:
            taken[source] = taken.get(source, 0) + 1
            ranked.append(c)
            if len(ranked) == max_hits:
                break
    return ranked
