"""The per-call paths made cheaper in issue 33's fourth round say exactly what the plainer
code they replaced said (kept here as the reference)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from pipeline.keys import is_valid_session_id

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
