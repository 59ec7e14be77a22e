"""The RAG projector's one walk over an upstream (`contracts.rag._hits_and_level`) finds the
hit list and the relevance level exactly as the two separate searches it replaced did (kept
here as the reference), on generated upstreams of containers, hit lists and relevance keys."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import RelevanceLevel
from contracts.rag import _hits_and_level, find_hits, normalise_relevance

_CONTAINER_KEYS = ("contextPack", "context_pack", "data", "result", "response")
_HIT_LIST_KEYS = ("hits", "results", "documents", "chunks", "items", "matches")
_RELEVANCE_KEYS = ("relevanceLevel", "relevance_level")
_MAX_DEPTH = 4


def _reference_hits(upstream: object, depth: int = 0) -> list[Any] | None:
    # `find_hits` as it was before the one walk.
    if isinstance(upstream, list):
        return upstream
    if depth > _MAX_DEPTH or not isinstance(upstream, Mapping):
        return None
    for key in _HIT_LIST_KEYS:
        if isinstance(upstream.get(key), list):
            return list(upstream[key])
    for key in _CONTAINER_KEYS:
        hits = _reference_hits(upstream.get(key), depth + 1)
        if hits is not None:
            return hits
    return None


def _reference_normalise(value: object) -> RelevanceLevel | None:
    # `normalise_relevance` as it was before its table.
    if not isinstance(value, str):
        return None
    try:
        return RelevanceLevel(value.strip().upper())
    except ValueError:
        return None


def _reference_level(upstream: object, depth: int = 0) -> RelevanceLevel | None:
    # `_find_relevance` as it was before the one walk.
    if depth > _MAX_DEPTH or not isinstance(upstream, Mapping):
        return None
    for key in _RELEVANCE_KEYS:
        if key in upstream:
            return _reference_normalise(upstream[key])
    for key in _CONTAINER_KEYS:
        level = _reference_level(upstream.get(key), depth + 1)
        if level is not None:
            return level
    return None


_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-2, 2)
    | st.sampled_from(["high", " Medium ", "LOW", "h\u0131gh", "none", "", "HIGH"])
    | st.lists(st.integers(0, 3), max_size=2)
)
_KEYS = st.sampled_from(_CONTAINER_KEYS + _HIT_LIST_KEYS + _RELEVANCE_KEYS + ("other",))


def _mapping(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    plain = st.dictionaries(_KEYS, children, max_size=5)
    return plain | plain.map(MappingProxyType)  # a Mapping that is not a dict


_UPSTREAMS = st.recursive(
    _LEAVES, lambda children: _mapping(children) | st.lists(children, max_size=2), max_leaves=30
)


def _chain(depth: int, leaf: object) -> object:
    # `leaf` under `depth` nested containers, each also carrying an unusable relevance.
    node: object = leaf
    for _ in range(depth):
        node = {"relevance_level": "nope", "data": node}
    return node


@settings(max_examples=600, deadline=None)
@given(_UPSTREAMS)
def test_one_walk_finds_what_the_two_searches_found(upstream: object) -> None:
    hits, level = _hits_and_level(upstream)
    assert hits == _reference_hits(upstream)
    assert level is _reference_level(upstream)
    assert find_hits(upstream) == hits


@given(
    st.text()
    | st.sampled_from(["high", " h\u0131gh\t", "Medium", "LOW ", "\u017f", "low\x00"])
    | _LEAVES
)
def test_relevance_is_the_enum_lookup(value: object) -> None:
    assert normalise_relevance(value) is _reference_normalise(value)


def test_the_walk_stops_at_the_same_depth() -> None:
    for depth in range(8):
        deep = _chain(depth, {"relevanceLevel": "low", "hits": [depth], "data": [9]})
        assert _hits_and_level(deep) == (_reference_hits(deep), _reference_level(deep))
    # The first level named wins, even when it is no level: its containers are not looked in.
    named = {"relevanceLevel": "nope", "data": {"relevanceLevel": "high"}}
    assert _hits_and_level(named) == (None, None) == (None, _reference_level(named))
    later = {"data": {"relevanceLevel": "nope", "data": {"relevanceLevel": "high"}},
             "result": {"relevance_level": "Low", "hits": [1]}}  # fmt: skip
    assert _hits_and_level(later) == ([1], RelevanceLevel.LOW)
