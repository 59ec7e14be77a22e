"""Projection of any upstream RAG answer into a bounded, verbatim `RagResult`.

Upstreams differ: hits under a context pack or a flat list, text under `content`, `text` or
`snippet`, relevance under `relevanceLevel` or `relevance_level`. Everything else they send
(traces, scores, fallback attempts, metadata, full bodies) is dropped here.

A hit's `source` is a citation, not a copy of the upstream's reference (`safe_source`): a URL
loses its credentials, query string, fragment and `;params`; a file URL or an absolute server
path (POSIX, `~`, Windows drive or UNC) keeps only its file name; a relative path that climbs
(`..`) likewise; anything else loses what follows a `?` or `#`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Final, TypeGuard
from urllib.parse import urlsplit, urlunsplit

from msgspec import UNSET

from contracts.bounds import Bounds
from contracts.requests import LookupKnowledgeRequest
from contracts.results import ErrorResult, Evidence, RagResult, error_result
from contracts.status import ErrorCode, EvidenceStatus, RelevanceLevel
from contracts.text import cut

__all__ = ["find_hits", "normalise_relevance", "project_rag", "safe_source"]

# Where upstreams put their hit lists, and where they put a hit's fields, in preference order.
_CONTAINER_KEYS: Final = ("contextPack", "context_pack", "data", "result", "response")
_HIT_LIST_KEYS: Final = ("hits", "results", "documents", "chunks", "items", "matches")
_TEXT_KEYS: Final = ("excerpt", "content", "text", "snippet", "chunk", "page_content")
_ID_KEYS: Final = ("document_id", "documentId", "doc_id", "docId", "id")
_SOURCE_KEYS: Final = ("source", "path", "uri", "url", "file")
_TITLE_KEYS: Final = ("title", "doc_title", "docTitle", "name")
_BREADCRUMB_KEYS: Final = ("breadcrumb", "heading_path", "headingPath", "section", "headings")
_RELEVANCE_KEYS: Final = ("relevanceLevel", "relevance_level")
_NESTED_KEYS: Final = ("metadata", "document", "doc")  # where a hit nests its fields
_MAX_DEPTH: Final = 4
# How an upstream says, with HTTP 200, that it failed: never read as "nothing found".
_FAILED_STATUSES: Final = frozenset({"error", "failed", "fail", "failure"})
_FAILURE_MESSAGE: Final = "the knowledge service reported a failure"
_SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_DRIVE: Final = re.compile(r"[A-Za-z]:[\\/]")
_REMOTE_PATH: Final = re.compile(r"[^/\\\s:]+:[/\\~]")  # host:/srv/x.md, file:/x
_SCP_USERINFO: Final = re.compile(r"[^/\\@\s]+@(?=[^/\\@\s]+:)")  # user:pw@host:path
_LEVELS: Final[dict[str, RelevanceLevel]] = {level.value: level for level in RelevanceLevel}


def normalise_relevance(value: object) -> RelevanceLevel | None:
    """`high`, `HIGH`, ` Medium ` → the level; anything unrecognised → None (never guessed)."""
    if not isinstance(value, str):
        return None
    return _LEVELS.get(value.strip().upper())  # the enum's own lookup, without its call


def _is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    # `type(...) is dict` first: an ABC isinstance check costs several times more.
    return type(value) is dict or isinstance(value, Mapping)


def find_hits(upstream: object) -> list[Any] | None:
    """The upstream's hit list, or None when it has no recognisable one (garbage): the list
    itself, else under a hit list key (`_HIT_LIST_KEYS`, in preference order), else the first
    found under a container key (`_CONTAINER_KEYS`, in order, at most `_MAX_DEPTH` deep)."""
    return _hits_and_level(upstream, level_wanted=False)[0]


def _hits_and_level(
    upstream: object, depth: int = 0, hits_wanted: bool = True, level_wanted: bool = True
) -> tuple[list[Any] | None, RelevanceLevel | None]:
    """`find_hits` and the relevance level in one walk over the containers (each of the two
    searches alone: the first in the same order; `None` where not wanted or not found).

    The level is that of the first mapping, in the order `find_hits` looks, that names a
    relevance key (`_RELEVANCE_KEYS`, in preference order), if it is a level: a mapping
    that names one that is not does not look further down for the level."""
    if isinstance(upstream, list):
        return (upstream if hits_wanted else None), None
    if depth > _MAX_DEPTH or not _is_mapping(upstream):
        return None, None
    hits: list[Any] | None = None
    level: RelevanceLevel | None = None
    if hits_wanted:
        for key in _HIT_LIST_KEYS:
            value = upstream.get(key)
            if isinstance(value, list):
                hits, hits_wanted = list(value), False
                break
    if level_wanted:
        for key in _RELEVANCE_KEYS:
            if key in upstream:
                level, level_wanted = normalise_relevance(upstream[key]), False
                break
    for key in _CONTAINER_KEYS:
        if not (hits_wanted or level_wanted):
            break
        found, named = _hits_and_level(upstream.get(key), depth + 1, hits_wanted, level_wanted)
        if found is not None:
            hits, hits_wanted = found, False
        if named is not None:
            level, level_wanted = named, False
    return hits, level


def _places(hit: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    # Where a hit keeps its descriptive fields, in preference order.
    places = [hit]
    for key in _NESTED_KEYS:
        where = hit.get(key)
        if where is not None and _is_mapping(where):
            places.append(where)
    return places


# key -> (which evidence field it names, its preference among that field's keys)
_FIELD_SLOTS: Final = {
    key: (field, rank)
    for field, keys in enumerate((_ID_KEYS, _SOURCE_KEYS, _TITLE_KEYS, _BREADCRUMB_KEYS))
    for rank, key in enumerate(keys)
}
_NO_RANK: Final = len(_FIELD_SLOTS)  # above every rank: no key of the field seen yet


def _usable_text(value: object) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, list) and value:
        parts = [v.strip() for v in value if isinstance(v, str)]
        if len(parts) == len(value) and any(parts):
            return " > ".join(parts)
    return ""


def _describe(places: list[Mapping[str, Any]]) -> list[str]:
    """document_id, source, title, breadcrumb of a hit: per field, the first usable value in
    place order, then key preference order; "" when none."""
    found = ["", "", "", ""]
    for where in places:
        best = [_NO_RANK] * 4
        for key, value in where.items():
            slot = _FIELD_SLOTS.get(key)
            if slot is None:
                continue
            field, rank = slot
            # A field settled at an earlier place stays; within a place, the preferred key wins.
            if rank >= best[field] or (best[field] == _NO_RANK and found[field]):
                continue
            text = value.strip() if type(value) is str else _usable_text(value)
            if text:
                found[field], best[field] = text, rank
        if all(found):
            break
    return found


def _basename(path: str) -> str:
    return _not_a_name(re.split(r"[\\/]", path)[-1])


def _not_a_name(text: str) -> str:
    text = text.strip()
    return "" if text in ("~", ".", "..") else text


def _clean_url(text: str) -> str:
    """A hierarchical URL without userinfo, query, fragment or `;params` ("" if unparsable)."""
    try:
        parts = urlsplit(text)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return ""
    if parts.scheme.lower() == "file":
        return _basename(parts.path)
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None else f"{host}:{port}"
    path = "/".join(segment.split(";", 1)[0] for segment in parts.path.split("/"))
    return urlunsplit((parts.scheme.lower(), netloc, path, "", ""))


def safe_source(value: str) -> str:
    """The `source` of a hit as the model may see it (see the module docstring); pure."""
    # A worker sees the same few sources again and again: short ones are remembered (at most
    # 4,096 of at most 512 characters, so an upstream cannot make the memo large).
    return _safe_source_cached(value) if len(value) <= 512 else _safe_source(value)


@lru_cache(maxsize=4096)
def _safe_source_cached(value: str) -> str:
    return _safe_source(value)


def _safe_source(value: str) -> str:
    text = value.strip()
    if _DRIVE.match(text):  # a Windows drive path, before `C:` is read as a URL scheme
        return _basename(text)
    scheme = _SCHEME.match(text)
    if text.startswith("//") or (scheme and text[scheme.end() :].startswith("//")):
        return _clean_url(text)
    text = _SCP_USERINFO.sub("", re.split(r"[?#]", text, maxsplit=1)[0])
    if (scheme and scheme.group().lower() == "file:") or _REMOTE_PATH.match(text):
        return _basename(text)  # file:/srv/x.md, host:/srv/x.md
    if text.startswith(("/", "~", "\\")) or ".." in re.split(r"[\\/]", text):
        return _basename(text)
    return _not_a_name(text)


def _excerpt_text(hit: Mapping[str, Any]) -> str:
    for key in _TEXT_KEYS:
        value = hit.get(key)
        if isinstance(value, str):
            text = value.strip()
            if text:
                return text
    return ""


def _reports_failure(upstream: object) -> bool:
    """Whether the answer's top level carries a failure marker: an `error` that is a non-empty
    object or string (or `true`), a `status` of error/failed/fail/failure, or `success: false`."""
    if not _is_mapping(upstream):
        return False
    error = upstream.get("error")
    if error is True or (isinstance(error, str | Mapping) and bool(error)):
        return True
    status = upstream.get("status")
    if isinstance(status, str) and status.strip().lower() in _FAILED_STATUSES:
        return True
    return upstream.get("success") is False


def project_rag(
    request: LookupKnowledgeRequest, tool_call_id: str, upstream: object, bounds: Bounds
) -> RagResult | ErrorResult:
    """Project an upstream RAG answer; `NO_EVIDENCE` when no hit has a usable excerpt, ERROR
    (EXECUTION) when the answer says the service failed, whatever hits it carries."""
    if _reports_failure(upstream):
        # The upstream's own words (hosts, paths, stack text) are not passed on.
        return error_result(ErrorCode.EXECUTION, _FAILURE_MESSAGE, tool_call_id)
    hits, level = _hits_and_level(upstream)
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
        if not _is_mapping(hit):
            continue
        text = _excerpt_text(hit)
        if not text:
            continue
        excerpt, was_cut = cut(text, bounds.rag_excerpt_chars)
        limit = bounds.rag_field_chars
        document_id, source, title, breadcrumb = _describe(_places(hit))
        source = safe_source(source)
        if (
            len(document_id) > limit
            or len(source) > limit
            or len(title) > limit
            or len(breadcrumb) > limit
        ):
            document_id, source = document_id[:limit], source[:limit]
            title, breadcrumb, was_cut = title[:limit], breadcrumb[:limit], True
        if (document_id, excerpt) in seen:
            continue  # a repeated passage is not lost evidence
        if len(evidence) == bounds.rag_max_evidence:
            truncated = True
            break
        seen.add((document_id, excerpt))
        truncated = truncated or was_cut
        evidence.append(
            Evidence(
                document_id=document_id,
                source=source,
                title=title,
                breadcrumb=breadcrumb,
                excerpt=excerpt,
            )
        )
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
