"""RAG projector: noisy upstreams, relevance normalisation, verbatim bounded excerpts."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from contract_samples import rag_upstream
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import (
    DEFAULT_BOUNDS,
    Bounds,
    ErrorCode,
    ErrorResult,
    EvidenceStatus,
    LookupKnowledgeRequest,
    RagResult,
    RelevanceLevel,
    encode_result,
    normalise_relevance,
    project_rag,
)
from contracts.rag import find_hits

REQUEST = LookupKnowledgeRequest(query="pool timeout")
EVIDENCE_KEYS = {"document_id", "source", "title", "breadcrumb", "excerpt"}
RESULT_KEYS = {
    "evidence_status", "tool_call_id", "query", "evidence", "returned_count", "relevance_level",
    "truncated",
}  # fmt: skip
NOISE_WORDS = [
    "score", "Score", "trace", "Trace", "fallback", "metadata", "fullBody", "tokenCount",
    "requestId", "bge", "ap-shanghai", "owner",
]  # fmt: skip


def _rag(upstream: object, bounds: Bounds = DEFAULT_BOUNDS) -> RagResult:
    result = project_rag(REQUEST, "call_1", upstream, bounds)
    assert isinstance(result, RagResult), result
    return result


def test_noisy_upstream_keeps_only_the_evidence_fields() -> None:
    result = _rag(rag_upstream())
    encoded = msgspec.json.decode(encode_result(result))
    assert set(encoded) <= RESULT_KEYS
    for item in encoded["evidence"]:
        assert set(item) == EVIDENCE_KEYS
    text = encode_result(result).decode()
    for word in NOISE_WORDS:
        assert word not in text
    assert result.evidence_status is EvidenceStatus.EVIDENCE_FOUND
    assert result.returned_count == len(result.evidence) == 2
    assert result.relevance_level is RelevanceLevel.HIGH
    first, second = result.evidence
    assert first.document_id == "kb-db-017"
    assert first.breadcrumb == "Runbooks > Database > Connection pools"
    assert second.title == "Deploy checklist" and second.source == "runbooks/ops/deploy.md"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("high", RelevanceLevel.HIGH),
        ("HIGH", RelevanceLevel.HIGH),
        ("Medium", RelevanceLevel.MEDIUM),
        (" low ", RelevanceLevel.LOW),
        ("mEdIuM", RelevanceLevel.MEDIUM),
        ("very high", None),
        ("H", None),
        ("", None),
        (0.9, None),
        (None, None),
        (["HIGH"], None),
    ],
)
def test_relevance_is_normalised_or_dropped(value: object, expected: RelevanceLevel | None) -> None:
    assert normalise_relevance(value) is expected
    for key in ("relevanceLevel", "relevance_level"):
        result = _rag({key: value, "hits": [{"id": "d", "content": "text"}]})
        if expected is None:
            assert "relevance_level" not in msgspec.json.decode(encode_result(result))
        else:
            assert result.relevance_level is expected


def test_relevance_found_inside_a_container() -> None:
    upstream = {"data": {"result": {"relevance_level": "Medium", "chunks": [{"text": "t"}]}}}
    assert _rag(upstream).relevance_level is RelevanceLevel.MEDIUM


@pytest.mark.parametrize("relevance", ["HIGH", "high", "Medium"])
def test_high_relevance_without_usable_excerpt_is_no_evidence(relevance: str) -> None:
    upstream = {
        "relevanceLevel": relevance,
        "hits": [
            {"id": "a", "content": "   ", "score": 1.0},
            {"id": "b", "title": "only a title"},
            "not a hit",
            7,
            {"id": "c", "content": 42},
        ],
    }
    result = _rag(upstream)
    assert result.evidence_status is EvidenceStatus.NO_EVIDENCE
    assert result.evidence == [] and result.returned_count == 0
    assert "relevance_level" not in msgspec.json.decode(encode_result(result))
    assert result.query == REQUEST.query and result.tool_call_id == "call_1"


@pytest.mark.parametrize(
    "upstream",
    [
        {"hits": []},
        [],
        {"contextPack": {"hits": []}, "retrievalTrace": {"l0": []}},
        {"response": {"documents": []}},
    ],
)
def test_empty_hit_list_is_no_evidence(upstream: object) -> None:
    assert _rag(upstream).evidence_status is EvidenceStatus.NO_EVIDENCE


@pytest.mark.parametrize(
    "upstream",
    [
        None,
        "garbage",
        42,
        {"unexpected": "shape"},
        {"hits": "not a list"},
        {"data": {"data": {"data": {"data": {"data": {"data": {"hits": []}}}}}}},
    ],
)
def test_garbage_upstream_is_a_projection_error(upstream: object) -> None:
    result = project_rag(REQUEST, "call_1", upstream, DEFAULT_BOUNDS)
    assert isinstance(result, ErrorResult)
    assert result.error.code is ErrorCode.PROJECTION
    assert result.tool_call_id == "call_1"
    assert result.evidence_status is EvidenceStatus.ERROR


HIT = {"documentId": "d", "content": "pool exhausted"}


@pytest.mark.parametrize(
    "upstream",
    [
        {"status": "error", "error": {"code": 503, "message": "index unavailable"}, "hits": []},
        {"error": {"code": 503, "message": "index unavailable /srv/secret"}, "hits": []},
        {"error": "backend down at 10.0.0.7", "hits": [HIT]},
        {"error": True, "results": []},
        {"status": "error", "hits": []},
        {"status": " FAILED ", "contextPack": {"hits": [HIT]}},
        {"status": "fail", "data": {"hits": []}},
        {"status": "failure", "hits": []},
        {"success": False, "hits": []},
        {"success": False},
        {"status": "error"},
    ],
)
def test_an_answer_reporting_a_failure_is_an_error_never_no_evidence(upstream: object) -> None:
    result = project_rag(REQUEST, "call_1", upstream, DEFAULT_BOUNDS)
    assert isinstance(result, ErrorResult), result
    assert result.error.code is ErrorCode.EXECUTION
    assert result.evidence_status is EvidenceStatus.ERROR and result.tool_call_id == "call_1"
    # A fixed message: nothing the upstream wrote (paths, hosts, its own words) is passed on.
    assert result.error.message == "the knowledge service reported a failure"


@pytest.mark.parametrize(
    "upstream",
    [
        {"status": "ok", "hits": [HIT]},
        {"status": "success", "success": True, "hits": [HIT]},
        {"error": None, "hits": [HIT]},
        {"error": {}, "hits": [HIT]},
        {"error": "", "hits": [HIT]},
        {"error": False, "hits": [HIT]},
        {"status": 500, "hits": [HIT]},  # not a status word: only the words are markers
        {"success": 0, "hits": [HIT]},
        {"contextPack": {"status": "error", "hits": [HIT]}},  # markers count at the top only
    ],
)
def test_answers_without_a_failure_marker_are_projected(upstream: object) -> None:
    assert _rag(upstream).evidence_status is EvidenceStatus.EVIDENCE_FOUND


def test_hit_list_shapes() -> None:
    assert find_hits([1]) == [1]
    assert find_hits({"matches": [2]}) == [2]
    assert find_hits({"context_pack": {"items": [3]}}) == [3]
    assert find_hits({"result": "x"}) is None


@pytest.mark.parametrize("key", ["excerpt", "content", "text", "snippet", "chunk", "page_content"])
def test_excerpt_is_a_verbatim_substring_of_the_upstream_text(key: str) -> None:
    body = "  Restart the pod.\nThen check   the logs — 日志 — twice.  " * 40
    result = _rag({"hits": [{"id": "d", key: body}]})
    (item,) = result.evidence
    assert item.excerpt in body
    assert len(item.excerpt) == DEFAULT_BOUNDS.rag_excerpt_chars
    assert body.strip().startswith(item.excerpt)
    assert result.truncated


def test_fields_from_nested_document_and_numbers() -> None:
    hit = {
        "document": {"id": 17, "url": "u", "name": "N", "headings": ["A ", " B"]},
        "snippet": "s",
    }
    (item,) = _rag({"hits": [hit]}).evidence
    assert (item.document_id, item.source, item.title, item.breadcrumb) == ("17", "u", "N", "A > B")


def test_missing_fields_are_empty_strings() -> None:
    (item,) = _rag({"hits": [{"content": "c", "id": True, "title": [], "metadata": "x"}]}).evidence
    assert (item.document_id, item.source, item.title, item.breadcrumb) == ("", "", "", "")


def test_evidence_items_and_fields_are_bounded() -> None:
    bounds = Bounds(rag_max_evidence=2, rag_excerpt_chars=10, rag_field_chars=4)
    hits = [{"id": f"doc-{i}", "title": "long title", "content": f"text {i}"} for i in range(5)]
    result = _rag({"hits": hits}, bounds)
    assert result.returned_count == 2 and result.truncated
    assert all(len(e.title) <= 4 and len(e.document_id) <= 4 for e in result.evidence)


def test_repeated_passages_are_kept_once_and_not_a_cut() -> None:
    hit: dict[str, Any] = {"id": "d", "title": "t", "content": "same"}
    result = _rag({"hits": [hit, dict(hit), dict(hit)]}, Bounds(rag_max_evidence=1))
    assert result.returned_count == 1
    assert not result.truncated


def test_exactly_max_evidence_is_not_truncated() -> None:
    hits = [{"id": str(i), "content": f"c{i}"} for i in range(3)]
    result = _rag({"hits": hits}, Bounds(rag_max_evidence=3))
    assert result.returned_count == 3 and not result.truncated


def _reference_first_str(places: list[dict[str, Any]], keys: tuple[str, ...]) -> str:
    # The plain definition: first place, then first key, with a usable value.
    for where in places:
        for key in keys:
            value = where.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
            if isinstance(value, int | float) and not isinstance(value, bool):
                return str(value)
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                if any(v.strip() for v in value):  # a list of blanks is no value
                    return " > ".join(v.strip() for v in value)
    return ""


field_values = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(" ab", max_size=3)
    | st.lists(st.text("ab", max_size=2), max_size=2)
)
places_strategy = st.lists(
    st.dictionaries(
        st.sampled_from(
            ["id", "doc_id", "documentId", "document_id", "title", "name", "url", "path",
             "source", "breadcrumb", "section", "headings", "other"]
        ),
        field_values,
        max_size=6,
    ),
    min_size=1,
    max_size=3,
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(places_strategy)
def test_field_lookup_matches_its_plain_definition(places: list[dict[str, Any]]) -> None:
    from contracts.rag import (
        _BREADCRUMB_KEYS,
        _ID_KEYS,
        _SOURCE_KEYS,
        _TITLE_KEYS,
        _describe,
    )

    expected = [
        _reference_first_str(places, keys)
        for keys in (_ID_KEYS, _SOURCE_KEYS, _TITLE_KEYS, _BREADCRUMB_KEYS)
    ]
    assert _describe(list(places)) == expected  # type: ignore[arg-type]


def test_string_subclass_values_are_text() -> None:
    class Label(str):
        pass

    (item,) = _rag({"hits": [{"content": "c", "title": Label(" T ")}]}).evidence
    assert item.title == "T"
