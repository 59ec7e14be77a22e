"""Lexical search of the knowledge index: BM25 candidates kept only when they cover the query.

A query is expanded through the synonym table into concepts; candidates come from FTS5 BM25,
and a candidate is only evidence when the IDF-weighted share of the query's concepts it
contains reaches `MIN_COVERAGE`, so off-topic questions give no hits, hence `NO_EVIDENCE`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from workers.sources.knowledge.analysis import CJK, terms_of
from workers.sources.knowledge.store import IndexFile

__all__ = [
    "HIGH_COVERAGE",
    "MEDIUM_COVERAGE",
    "MIN_COVERAGE",
    "NOTHING_TO_SEARCH",
    "Candidate",
    "hits_of",
    "lexical_candidates",
    "relevance_of",
    "search",
    "searchable",
]

# Calibrated on tests/workers/knowledge_eval.json (see docs/knowledge.md).
MIN_COVERAGE: Final = 0.33
HIGH_COVERAGE: Final = 0.8
MEDIUM_COVERAGE: Final = 0.55
_CANDIDATES: Final = 30
_ORDER: Final = ("low", "medium", "high")


NOTHING_TO_SEARCH: Final = (
    "query: it holds only common words (how, what, is, it); name the symptom, alert, service"
    " or error message to look up"
)


def searchable(query: str) -> bool:
    """Whether the query holds a term the index searches (a word that is not a stop word)."""
    return bool(terms_of(query, keep_stop_words=False))


def _concepts(query: str, groups: Mapping[str, frozenset[str]]) -> list[frozenset[str]]:
    concepts: list[frozenset[str]] = []
    for term in dict.fromkeys(terms_of(query, keep_stop_words=False)):
        concept = groups.get(term, frozenset()) | {term}
        if concept not in concepts:
            concepts.append(concept)
    return concepts


def _match_expression(concepts: Iterable[frozenset[str]]) -> str:
    terms = sorted({t for concept in concepts for t in concept})
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def _concept_weight(index: IndexFile, concept: frozenset[str]) -> float:
    # The commonest known spelling sets the weight; a concept the corpus never uses weighs most.
    known = [index.df[t] for t in concept if t in index.df]
    return index.idf(max(known, default=0))


def relevance_of(coverage: float) -> str:
    """The lexical relevance level of a hit with this coverage (lexical-only retrieval)."""
    if coverage >= HIGH_COVERAGE:
        return "high"
    return "medium" if coverage >= MEDIUM_COVERAGE else "low"


@dataclass(slots=True)
class Candidate:
    """One chunk's scores while it is ranked; `rowid` names it in the index file."""

    rowid: int
    bm25: float = 0.0
    coverage: float = 0.0
    lexical: float = 0.0  # coverage² x bm25 x language: the lexical ranking score
    matched: int = 0
    dense: float | None = None
    final: float = 0.0


def lexical_candidates(
    index: IndexFile, query: str, groups: Mapping[str, frozenset[str]]
) -> tuple[list[Candidate], int, list[dict[str, Any]]]:
    """The BM25 candidates of `query` with their coverage (unfiltered), the number of query
    concepts, and the trace steps."""
    concepts = _concepts(query, groups)
    trace: list[dict[str, Any]] = [
        {"step": "analyse", "concepts": [sorted(c) for c in concepts], "stopWordsRemoved": True}
    ]
    if not concepts or index.n == 0:
        return [], len(concepts), trace
    weights = [_concept_weight(index, c) for c in concepts]
    rows = index.conn.execute(
        "SELECT rowid, bm25(chunks, 2.0, 1.0), crumb_terms, body_terms, title FROM chunks"
        " WHERE chunks MATCH ? ORDER BY bm25(chunks, 2.0, 1.0) LIMIT ?",
        (_match_expression(concepts), _CANDIDATES),
    ).fetchall()
    trace.append({"step": "bm25", "candidates": len(rows), "limit": _CANDIDATES})
    query_is_cjk = CJK.search(query) is not None
    found: list[Candidate] = []
    for rowid, bm25, crumb_terms, body_terms, title in rows:
        present = set(crumb_terms.split()) | set(body_terms.split())
        matched = [i for i, concept in enumerate(concepts) if concept & present]
        coverage = sum(weights[i] for i in matched) / sum(weights)
        # Same-language runbooks first when both languages answer (synonyms cross over).
        language = 1.0 if (CJK.search(title) is not None) == query_is_cjk else 0.7
        found.append(
            Candidate(
                rowid=rowid,
                bm25=-bm25,
                coverage=coverage,
                lexical=coverage * coverage * -bm25 * language,
                matched=len(matched),
            )
        )
    return found, len(concepts), trace


def hits_of(
    index: IndexFile, ranked: list[Candidate], concepts: int, started: float
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The RAG-shaped hits of the ranked candidates (in order) and the trace's last step."""
    rows: dict[int, tuple[Any, ...]] = {}
    if ranked:
        marks = ",".join("?" * len(ranked))
        for row in index.conn.execute(
            "SELECT rowid, document_id, source, title, breadcrumb, content, ordinal FROM chunks"
            f" WHERE rowid IN ({marks})",
            [c.rowid for c in ranked],
        ):
            rows[row[0]] = row
    hits = [
        {
            "documentId": rows[c.rowid][1],
            "source": rows[c.rowid][2],
            "title": rows[c.rowid][3],
            "breadcrumb": rows[c.rowid][4],
            "content": rows[c.rowid][5],
            "scores": {
                "bm25": round(c.bm25, 4),
                "coverage": round(c.coverage, 4),
                "dense": None if c.dense is None else round(c.dense, 4),
                "rerank": None,
                "final": round(c.final, 4),
            },
            "rank": rank,
            "metadata": {
                "chunkOrdinal": rows[c.rowid][6],
                "matchedConcepts": c.matched,
                "queryConcepts": concepts,
            },
        }
        for rank, c in enumerate(ranked, start=1)
    ]
    step = {
        "step": "assemble",
        "hits": len(hits),
        "elapsedMs": round((time.perf_counter() - started) * 1000, 3),
    }
    return hits, step


def search(
    index: IndexFile,
    query: str,
    groups: Mapping[str, frozenset[str]],
    *,
    min_coverage: float,
    max_hits: int,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Lexical-only retrieval: BM25 candidates that cover the query, best first."""
    started = time.perf_counter()
    found, concepts, trace = lexical_candidates(index, query, groups)
    kept = [c for c in found if c.coverage >= min_coverage]
    for c in kept:
        c.final = c.lexical
    kept.sort(key=lambda c: c.final, reverse=True)
    trace.append({"step": "coverageFilter", "threshold": min_coverage, "kept": len(kept)})
    if kept:  # no padding: only hits at the answer's (its top hit's) level
        bar = _ORDER.index(relevance_of(kept[0].coverage))
        kept = [c for c in kept if _ORDER.index(relevance_of(c.coverage)) >= bar]
    hits, step = hits_of(index, kept[:max_hits], concepts, started)
    return hits, [*trace, step]
