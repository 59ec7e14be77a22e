"""Dense and fused ranking of the knowledge index, and the calibrated relevance level.

Dense: the query's unit vector against every chunk's (numpy, brute force: a few milliseconds
at 100k chunks, bench/knowledge_bench.py). Fused (the default): dense first, the lexical score
added as a small boost, min-max normalised over the lexical candidates (`LEXICAL_WEIGHT`):
exact terms (`ERROR 1205`, class names) reorder close dense scores, while BM25's noise across
languages cannot outvote the dense order. Reciprocal-rank fusion and a same-language-only
boost were measured and lost on the tuning part (docs/knowledge.md).

A chunk is evidence when its cosine reaches the encoder's low level or, in fused mode, its
lexical coverage reaches the lexical threshold. The answer's level (high / medium / low, see
`Levels` and docs/knowledge.md for what each promises) is its top hit's, from its cosine, its
coverage and its lead over the next runbook; only hits that reach that level on their own are
returned (no padding). The levels were set on the tuning parts of the evaluation sets
(bench/knowledge_calibrate.py) and are reported on the held-out parts (bench/knowledge_eval.py).

Lexical fallback (fused mode, LOW only): when the answer is LOW or nothing, the best BM25
chunk that shares at least two of the query's concepts (`FALLBACK_MIN_CONCEPTS`) and covers
at least a tenth of it, but is below the lexical evidence bar, takes the second place of a
LOW answer (a second one the fourth): a paraphrase the encoder misses often keeps two rare
words of its runbook. It never raises an answer above LOW (docs/knowledge.md, fourth round).

Named runbooks: a question that names runbooks by their alert name (`names.named_sources`:
`etcdNoLeader`, `KubePodCrashLooping what to do`) gets them first, each by its best chunk,
and the answer is HIGH; then the other runbooks that reach HIGH on their own, then the named
runbooks' other sections (`_named_answer`). A question that pastes a link to a section
(`…/checks/#l5d-identity-issuer-cert-is-time-valid`, a `{#id}` or generated heading id) is
answered by that section first, HIGH (`_linked_answer`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec

from workers.sources.knowledge.encoder import one_blas_thread
from workers.sources.knowledge.names import fragments, named_sources, names_section
from workers.sources.knowledge.search import (
    MEDIUM_COVERAGE,
    MIN_COVERAGE,
    Candidate,
    hits_of,
    lexical_candidates,
)
from workers.sources.knowledge.store import IndexFile

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "DENSE_FLOOR",
    "FALLBACK_MIN_CONCEPTS",
    "FALLBACK_MIN_COVERAGE",
    "HIGH_DENSE",
    "HIGH_MARGIN",
    "LEXICAL_WEIGHT",
    "MEDIUM_DENSE",
    "USE_LEVELS",
    "Levels",
    "Mode",
    "dense_relevance",
    "hit_level",
    "rank",
]

Mode = Literal["fused", "dense", "lexical"]

# Calibrated on the tuning parts of bench/knowledge_set (issue 22's set and the public
# prometheus-operator questions) and the regression set; reported on the held-out parts
# (docs/knowledge.md, bench/knowledge_eval.py). What each level promises:
#   high    the top runbook answers the question: a strong cosine (or a good one with most of
#           the query's terms) and clearly ahead of the next runbook;
#   medium  the top runbook probably answers it;
#   low     related runbooks, best first: the right one is often among them, the agent judges;
#   (no hit: NO_EVIDENCE) nothing is related.
DENSE_FLOOR: Final = 0.25  # low: off-topic questions top out at 0.20-0.25 (tuning), 0.36 once
MEDIUM_DENSE: Final = 0.50  # uncovered in-domain questions reach 0.47 on the public collection
HIGH_DENSE: Final = 0.70  # wrong top answers reached 0.68
HIGH_MARGIN: Final = 0.15  # high also needs this lead over the next runbook's score


class Levels(msgspec.Struct, frozen=True):
    """The cosine thresholds of one encoder: low (the evidence floor), medium, high, and the
    lead high needs over the next runbook. Cosines are not comparable across models: each
    encoder carries its own (`encoder.levels`; the bundled USE's are the defaults above)."""

    low: float = DENSE_FLOOR
    medium: float = MEDIUM_DENSE
    high: float = HIGH_DENSE
    margin: float = HIGH_MARGIN


USE_LEVELS: Final = Levels()
LEXICAL_WEIGHT: Final = 0.1
_LEVELS: Final = (None, "low", "medium", "high")
_DENSE_CANDIDATES: Final = 50
_PER_SOURCE: Final = 1  # one section per runbook: room for other runbooks among the hits
_RANKED: Final = 10  # runbooks ranked before the answer's bar is applied
# Lexical fallback into LOW (chosen on the tuning parts: bench/knowledge_eval.py --fallback):
# one matched concept let off-topic questions in ("write ... in Go" -> high-cpu.md); two kept
# them out; the coverage floor (0-0.2 were equal there) guards long queries.
FALLBACK_MIN_CONCEPTS: Final = 2
FALLBACK_MIN_COVERAGE: Final = 0.10
_FALLBACK_SLOTS: Final = (1, 3)  # places in a LOW answer: second, then fourth


def hit_level(
    dense: float,
    coverage: float,
    min_coverage: float = MIN_COVERAGE,
    levels: Levels = USE_LEVELS,
) -> int:
    """0 (no evidence) to 3 (high): the level one hit reaches on its own (NaN-safe)."""
    medium_lexical = coverage >= MEDIUM_COVERAGE
    if dense >= levels.high or (dense >= levels.medium and medium_lexical):
        return 3
    if dense >= levels.medium or (dense >= levels.low and medium_lexical):
        return 2
    return 1 if dense >= levels.low or coverage >= min_coverage else 0


def dense_relevance(
    dense: float, coverage: float, margin: float = 1.0, levels: Levels = USE_LEVELS
) -> str | None:
    """The relevance level of an answer from its top hit's cosine and lexical coverage, and
    its lead (`margin`) over the next runbook: high needs `levels.margin`, else it is medium."""
    level = hit_level(dense, coverage, levels=levels)
    if level == 3 and not margin >= levels.margin:
        level = 2
    return _LEVELS[level]


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
    levels: Levels = USE_LEVELS,
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
    trace.append({"step": "dense", "candidates": len(dense), "floor": levels.low})
    for rowid in dense:
        by_row.setdefault(rowid, Candidate(rowid=rowid))
    strong = [c.lexical for c in lexical if c.coverage >= min_coverage]
    top_lexical = max(strong, default=0.0) or 1.0
    kept: list[Candidate] = []
    for c in by_row.values():
        cosine = dense.get(c.rowid)
        c.dense = float(vectors[c.rowid - 1] @ query_vector) if cosine is None else cosine
        lexical_ok = c.coverage >= min_coverage
        if not (c.dense >= levels.low or lexical_ok):  # NaN-safe: a NaN cosine is no evidence
            continue
        c.final = c.dense + (LEXICAL_WEIGHT * c.lexical / top_lexical if lexical_ok else 0.0)
        kept.append(c)
    kept.sort(key=lambda c: c.final, reverse=True)
    trace.append({"step": "fuse", "mode": mode, "kept": len(kept)})
    if linked := _linked_rows(index, query):
        ranked = _linked_answer(index, kept, linked, query_vector, max_hits)
        level: str | None = "high"
        trace.append({"step": "linked", "chunks": len(linked)})
    elif named := named_sources(query, index.names):
        ranked = _named_answer(index, kept, named, query_vector, min_coverage, max_hits, levels)
        level = "high"
        trace.append({"step": "named", "runbooks": len(named)})
    else:
        level, ranked = _answer(_per_source(index, kept, _RANKED), min_coverage, max_hits, levels)
    trace.append({"step": "bar", "level": level, "kept": len(ranked)})
    if level in (None, "low") and lexical:
        before = len(ranked)
        ranked = _with_fallback(index, ranked, lexical, max_hits)
        level = "low" if ranked else None
        trace.append({"step": "lexicalFallback", "added": len(ranked) - before})
    hits, step = hits_of(index, ranked, concepts, started)
    return hits, level, [*trace, step]


def _answer(
    ranked: list[Candidate], min_coverage: float, max_hits: int, levels: Levels
) -> tuple[str | None, list[Candidate]]:
    """The answer's level (its top hit's, `dense_relevance`) and its hits: no padding, only
    hits that reach that level on their own (`hit_level`), at most `max_hits`."""
    if not ranked:
        return None, []
    top = ranked[0]
    # The lead over the next runbook (one below the floor: at least the top's lead over it).
    margin = top.final - (ranked[1].final if len(ranked) > 1 else levels.low)
    level = dense_relevance(top.dense or 0.0, top.coverage, margin, levels)
    bar = _LEVELS.index(level)
    hits = [c for c in ranked if hit_level(c.dense or 0.0, c.coverage, min_coverage, levels) >= bar]
    return level, hits[:max_hits]


def _named_chunks(
    index: IndexFile,
    kept: list[Candidate],
    named: list[str],
    query_vector: npt.NDArray[np.float32],
) -> tuple[list[Candidate], list[Candidate]]:
    """Every chunk of the named runbooks, scored as ranked (a chunk `kept` did not rank: its
    cosine): each runbook's best first (in `named` order), then the rest, best first."""
    vectors = index.vectors
    assert vectors is not None  # rank() checked
    scored = {c.rowid: c for c in kept}
    first: list[Candidate] = []
    more: list[Candidate] = []
    for source in named:
        rows = [r for (r,) in index.conn.execute(
            "SELECT rowid FROM chunks WHERE source = ? ORDER BY rowid", (source,))]  # fmt: skip
        chunks = [scored.get(r) or _cosine_only(r, vectors, query_vector) for r in rows]
        chunks.sort(key=lambda c: c.final, reverse=True)
        first += chunks[:1]
        more += chunks[1:]
    more.sort(key=lambda c: c.final, reverse=True)
    return first, more


def _cosine_only(
    rowid: int, vectors: npt.NDArray[np.float32], query_vector: npt.NDArray[np.float32]
) -> Candidate:
    cosine = float(vectors[rowid - 1] @ query_vector)
    return Candidate(rowid=rowid, dense=cosine, final=cosine)


def _named_answer(
    index: IndexFile,
    kept: list[Candidate],
    named: list[str],
    query_vector: npt.NDArray[np.float32],
    min_coverage: float,
    max_hits: int,
    levels: Levels,
) -> list[Candidate]:
    """The hits of a HIGH answer to a question that names runbooks: each named runbook's
    best chunk, the other runbooks that reach HIGH on their own (one chunk each), then the
    named runbooks' other chunks (no other runbook needs the room), at most `max_hits`."""
    first, more = _named_chunks(index, kept, named, query_vector)
    source_of = _sources(index, kept) if kept else {}
    others = [c for c in kept if source_of[c.rowid] not in named]
    strong = [
        c
        for c in _per_source(index, others, _RANKED)
        if hit_level(c.dense or 0.0, c.coverage, min_coverage, levels) == 3
    ]
    return (first + strong + more)[:max_hits]


def _linked_rows(index: IndexFile, query: str) -> list[int]:
    """The chunks of the sections a question links to by fragment (`names.fragments`), in
    order; [] without a fragment (the common case: no scan)."""
    wanted = fragments(query)
    if not wanted:
        return []
    rows = index.conn.execute("SELECT rowid, breadcrumb, anchor FROM chunks ORDER BY rowid")
    return [
        r for r, crumb, anchor in rows if names_section(crumb.rsplit(" > ", 1)[-1], anchor, wanted)
    ]


def _linked_answer(
    index: IndexFile,
    kept: list[Candidate],
    linked: list[int],
    query_vector: npt.NDArray[np.float32],
    max_hits: int,
) -> list[Candidate]:
    """A HIGH answer to a question that links to sections: their chunks first (in page
    order), then the other runbooks as ranked."""
    vectors = index.vectors
    assert vectors is not None  # rank() checked
    scored = {c.rowid: c for c in kept}
    first = [scored.get(r) or _cosine_only(r, vectors, query_vector) for r in linked]
    rest = _per_source(index, [c for c in kept if c.rowid not in set(linked)], _RANKED)
    return (first + rest)[:max_hits]


def _with_fallback(
    index: IndexFile, ranked: list[Candidate], lexical: list[Candidate], max_hits: int
) -> list[Candidate]:
    """A LOW (or empty) answer with the best BM25 runbooks that share at least two of the
    query's concepts put in at `_FALLBACK_SLOTS` (a runbook already there is not repeated)."""
    pool = [
        c
        for c in lexical
        if c.matched >= FALLBACK_MIN_CONCEPTS and c.coverage >= FALLBACK_MIN_COVERAGE
    ]
    pool.sort(key=lambda c: c.bm25, reverse=True)
    fallback = _per_source(index, pool, len(_FALLBACK_SLOTS))
    if not fallback:
        return ranked
    source_of = _sources(index, [*ranked, *fallback])
    taken = {source_of[c.rowid] for c in ranked}
    merged = list(ranked)
    for slot, c in zip(_FALLBACK_SLOTS, fallback, strict=False):
        if source_of[c.rowid] not in taken:
            taken.add(source_of[c.rowid])
            merged.insert(min(slot, len(merged)), c)
    return merged[:max_hits]


def _sources(index: IndexFile, candidates: list[Candidate]) -> dict[int, str]:
    marks = ",".join("?" * len(candidates))
    return dict(
        index.conn.execute(
            f"SELECT rowid, source FROM chunks WHERE rowid IN ({marks})",
            [c.rowid for c in candidates],
        ).fetchall()
    )


def _per_source(index: IndexFile, kept: list[Candidate], max_hits: int) -> list[Candidate]:
    if not kept:
        return []
    source_of = _sources(index, kept)
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
