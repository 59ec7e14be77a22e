"""Lexical search of the knowledge index: BM25 candidates kept only when they cover the query.

A query is expanded through the synonym table into concepts; candidates come from FTS5 BM25,
and a candidate is only evidence when the IDF-weighted share of the query's concepts it
contains reaches `MIN_COVERAGE`, so off-topic questions give no hits, hence `NO_EVIDENCE`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any, Final

from workers.sources.knowledge.analysis import CJK, terms_of
from workers.sources.knowledge.store import IndexFile

__all__ = ["HIGH_COVERAGE", "MEDIUM_COVERAGE", "MIN_COVERAGE", "relevance_of", "search"]

# Calibrated on tests/workers/knowledge_eval.json (see docs/knowledge.md).
MIN_COVERAGE: Final = 0.33
HIGH_COVERAGE: Final = 0.8
MEDIUM_COVERAGE: Final = 0.55
_CANDIDATES: Final = 30


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
    if coverage >= HIGH_COVERAGE:
        return "high"
    return "medium" if coverage >= MEDIUM_COVERAGE else "low"


def search(
    index: IndexFile,
    query: str,
    groups: Mapping[str, frozenset[str]],
    *,
    min_coverage: float,
    max_hits: int,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    started = time.perf_counter()
    concepts = _concepts(query, groups)
    trace: list[dict[str, Any]] = [
        {"step": "analyse", "concepts": [sorted(c) for c in concepts], "stopWordsRemoved": True}
    ]
    if not concepts or index.n == 0:
        return [], trace
    weights = [_concept_weight(index, c) for c in concepts]
    rows = index.conn.execute(
        "SELECT bm25(chunks, 2.0, 1.0), crumb_terms, body_terms, document_id, source, title,"
        " breadcrumb, content, ordinal FROM chunks WHERE chunks MATCH ?"
        " ORDER BY bm25(chunks, 2.0, 1.0) LIMIT ?",
        (_match_expression(concepts), _CANDIDATES),
    ).fetchall()
    trace.append({"step": "bm25", "candidates": len(rows), "limit": _CANDIDATES})
    query_is_cjk = CJK.search(query) is not None
    scored: list[tuple[float, float, list[int], tuple[Any, ...]]] = []
    for row in rows:
        present = set(row[1].split()) | set(row[2].split())
        matched = [i for i, concept in enumerate(concepts) if concept & present]
        coverage = sum(weights[i] for i in matched) / sum(weights)
        if coverage >= min_coverage:
            # Same-language runbooks first when both languages answer (synonyms cross over).
            language = 1.0 if (CJK.search(row[5]) is not None) == query_is_cjk else 0.7
            scored.append((coverage * coverage * -row[0] * language, coverage, matched, row))
    scored.sort(key=lambda item: item[0], reverse=True)
    trace.append({"step": "coverageFilter", "threshold": min_coverage, "kept": len(scored)})
    hits = [
        {
            "documentId": row[3],
            "source": row[4],
            "title": row[5],
            "breadcrumb": row[6],
            "content": row[7],
            "scores": {
                "bm25": round(-row[0], 4),
                "coverage": round(cov, 4),
                "dense": None,
                "rerank": None,
                "final": round(score, 4),
            },
            "rank": rank,
            "metadata": {
                "chunkOrdinal": row[8],
                "matchedConcepts": len(matched),
                "queryConcepts": len(concepts),
            },
        }
        for rank, (score, cov, matched, row) in enumerate(scored[:max_hits], start=1)
    ]
    trace.append(
        {
            "step": "assemble",
            "hits": len(hits),
            "elapsedMs": round((time.perf_counter() - started) * 1000, 3),
        }
    )
    return hits, trace
