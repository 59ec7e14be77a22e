"""The per-call paths made cheaper in issue 33's fourth round say exactly what the plainer
code they replaced said (kept here as the reference)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.keys import Keys, is_valid_session_id
from workers.stage import _index_notes, _ms3

_SESSION_RE = re.compile(r"[A-Za-z0-9._-]{1,128}")
_SESSION_TEXT = st.text(st.sampled_from("aZ09._-") | st.characters(), max_size=6) | st.integers(
    125, 131
).map(lambda n: "a" * n)


@given(_SESSION_TEXT | st.none() | st.integers() | st.binary(max_size=3))
def test_a_session_id_is_what_the_pattern_matches(value: object) -> None:
    expected = isinstance(value, str) and _SESSION_RE.fullmatch(value) is not None
    assert is_valid_session_id(value) is expected


def test_session_ids_at_the_edges() -> None:
    for value in ("", "a" * 128, "s1\n", " s1", "s 1", "s\u0130", "\u212a", "a.b_c-D9"):
        expected = _SESSION_RE.fullmatch(value) is not None
        assert is_valid_session_id(value) is expected


@pytest.mark.parametrize("partitions", [1, 4])
def test_a_finish_names_the_keys_one_by_one_would(partitions: int) -> None:
    for part in Keys("hp", partitions).parts:
        assert part.finished("s-1", "call_9") == [
            part.call("s-1", "call_9"),
            part.model("s-1"),
            part.control("s-1"),
            part.result("s-1", "call_9"),
            part.raw("s-1", "call_9"),
        ]


def _reference_notes(raw: Any) -> dict[str, Any]:
    # `_indexed_chunks` and `_index_state` of workers.stage before they were one pass.
    pack = raw.get("contextPack") if isinstance(raw, dict) else None
    notes: dict[str, Any] = {}
    count = pack.get("indexedChunks") if isinstance(pack, dict) else None
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        notes["indexed_chunks"] = count
    if not isinstance(pack, dict):
        return notes
    if pack.get("indexRebuilding") is True:
        notes["index_rebuilding"] = True
    skipped = pack.get("skippedSources")
    if isinstance(skipped, list):
        names = [s[:256] for s in skipped[:20] if isinstance(s, str)]
        if names:
            notes["skipped_runbooks"] = names
    return notes


_VALUES = (
    st.none() | st.booleans() | st.integers(-2, 3) | st.text("ab", max_size=300)
    | st.lists(st.text("ab", max_size=300) | st.integers(), max_size=25)
)  # fmt: skip
_PACKS = st.dictionaries(
    st.sampled_from(["indexedChunks", "indexRebuilding", "skippedSources", "hits"]), _VALUES
)


@given(st.dictionaries(st.sampled_from(["contextPack", "hits"]), _PACKS | _VALUES) | _VALUES)
def test_index_notes_are_what_the_two_helpers_said(raw: Any) -> None:
    assert _index_notes(raw) == _reference_notes(raw)


_TIES = st.integers(0, 10**9).map(lambda n: n / 1000 + 0.0005)


@given(st.floats(allow_nan=False) | _TIES | st.floats(0, 1e6) | st.integers(0, 10**12).map(float))
def test_timings_are_rounded_as_round_rounds(ms: float) -> None:
    assert _ms3(ms) == round(ms, 3)
