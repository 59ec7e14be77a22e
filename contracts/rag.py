"""Projection of any upstream RAG answer into a bounded, verbatim `RagResult`.

Upstreams differ: hits under a context pack or a flat list, text under `content`, `text` or
`snippet`, relevance under `relevanceLevel` or `relevance_level`. Everything else they send
(traces, scores, fallback attempts, metadata, full bodies) is dropped here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from msgspec import UNSET

from contracts.bounds import Bounds
from contracts.requests import LookupKnowledgeRequest
from contracts.results import ErrorResult, Evidence, RagResult, error_result
from contracts.status import ErrorCode, EvidenceStatus, RelevanceLevel
from contracts.text import cut

__all__ = ["find_hits", "normalise_relevance", "project_rag"]

# Where upstreams put their hit lists, and where they put a hit's fields, in preference order.
_CONTAINER_KEYS: Final = ("contextPack", "context_pack", "data", "result", "response")
_HIT_LIST_KEYS: Final = ("hits", "results", "documents", "chunks", "items", "matches")
_TEXT_KEYS: Final = ("excerpt", "content", "text", "snippet", "chunk", "page_content")
_ID_KEYS: Final = ("document_id", "documentId", "doc_id", "docId", "id")
_SOURCE_KEYS: Final = ("source", "path", "uri", "url", "file")
_TITLE_KEYS: Final = ("title", "doc_title", "docTitle", "name")
_BREADCRUMB_KEYS: Final = ("breadcrumb", "heading_path", "headingPath", "section", "headings")
_RELEVANCE_KEYS: Final = ("relevanceLevel", "relevance_level")
_MAX_DEPTH: Final = 4


def normalise_relevance(value: object) -> RelevanceLevel | None:
    """`high`, `HIGH`, ` Medium ` → the level; anything unrecognised → None (never guessed)."""
    if not isinstance(value, str):
        return None
    try:
        return RelevanceLevel(value.strip().upper())
    except ValueError:
        return None


def find_hits(upstream: object, depth: int = 0) -> list[Any] | None:
    """The upstream's hit list, or None when it has no recognisable one (garbage)."""
    if isinstance(upstream, list):
        return upstream
    if not isinstance(upstream, Mapping) or depth > _MAX_DEPTH:
        return None
    for key in _HIT_LIST_KEYS:
        if isinstance(upstream.get(key), list):
            return list(upstream[key])
    for key in _CONTAINER_KEYS:
        hits = find_hits(upstream.get(key), depth + 1)
        if hits is not None:
            return hits
    return None


def _find_relevance(upstream: object, depth: int = 0) -> RelevanceLevel | None:
    if not isinstance(upstream, Mapping) or depth > _MAX_DEPTH:
        return None
    for key in _RELEVANCE_KEYS:
        if key in upstream:
            return normalise_relevance(upstream[key])
    for key in _CONTAINER_KEYS:
        level = _find_relevance(upstream.get(key), depth + 1)
        if level is not None:
            return level
    return None


def _first_str(hit: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    for where in (hit, hit.get("metadata"), hit.get("document"), hit.get("doc")):
        if not isinstance(where, Mapping):
            continue
        for key in keys:
            value = where.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
            if isinstance(value, int | float) and not isinstance(value, bool):
                return str(value)
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                return " > ".join(v.strip() for v in value)
    return ""


def _excerpt_text(hit: Mapping[str, Any]) -> str:
    for key in _TEXT_KEYS:
        value = hit.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def project_rag(
    request: LookupKnowledgeRequest, tool_call_id: str, upstream: object, bounds: Bounds
) -> RagResult | ErrorResult:
    """Project an upstream RAG answer; `NO_EVIDENCE` when no hit has a usable excerpt."""
    hits = find_hits(upstream)
    if hits is None:
        return error_result(
            ErrorCode.PROJECTION,
            "the knowledge source returned an answer without a recognisable list of results",
            tool_call_id,
        )
    evidence: list[Evidence] = []
    seen: set[tuple[str, str]] = set()
    truncated = False
    for hit in hits:
        if not isinstance(hit, Mapping):
            continue
        text = _excerpt_text(hit)
        if not text:
            continue
        excerpt, cut_excerpt = cut(text, bounds.rag_excerpt_chars)
        fields = [
            cut(_first_str(hit, keys), bounds.rag_field_chars)
            for keys in (_ID_KEYS, _SOURCE_KEYS, _TITLE_KEYS, _BREADCRUMB_KEYS)
        ]
        key = (fields[0][0], excerpt)
        if key in seen:
            continue  # a repeated passage is not lost evidence
        if len(evidence) == bounds.rag_max_evidence:
            truncated = True
            break
        seen.add(key)
        truncated = truncated or cut_excerpt or any(was_cut for _, was_cut in fields)
        evidence.append(
            Evidence(
                document_id=fields[0][0],
                source=fields[1][0],
                title=fields[2][0],
                breadcrumb=fields[3][0],
                excerpt=excerpt,
            )
        )
    level = _find_relevance(upstream)
    status = EvidenceStatus.EVIDENCE_FOUND if evidence else EvidenceStatus.NO_EVIDENCE
    return RagResult(
        evidence_status=status,
        tool_call_id=tool_call_id,
        query=request.query,
        evidence=evidence,
        returned_count=len(evidence),
        # A relevance level without an excerpt is not evidence: it is not passed on alone.
        relevance_level=level if level is not None and evidence else UNSET,
        truncated=truncated,
    )
