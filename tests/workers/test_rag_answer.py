"""`workers.sources.knowledge.rag_http.decode_answer`: upstream bytes to a JSON value, pure (no server)."""

from __future__ import annotations

import json

import pytest

from contracts.status import ErrorCode
from workers.sources import SourceError
from workers.sources.knowledge.rag_http import decode_answer


@pytest.mark.parametrize(
    "body",
    [
        b'{"a\\udc00": 1}',
        b'["x \\ud800 y"]',
        b'{"k": "\\ud83d\\ude00 \\udfff"}',  # a pair is fine, the lone one after it is not
    ],
)
def test_a_lone_surrogate_is_a_projection_error_never_a_guess(body: bytes) -> None:
    # An excerpt is the document's text verbatim: a lone surrogate cannot be carried, and a
    # replacement character would be a guess.
    with pytest.raises(SourceError) as info:
        decode_answer(body)
    assert info.value.code is ErrorCode.PROJECTION


def test_surrogate_pairs_and_escaped_backslashes_stay_text() -> None:
    body = b'{"k":"\\ud83d\\ude00","s":"\\\\ud800"}'
    assert decode_answer(body) == {"k": "\U0001f600", "s": "\\ud800"}
    assert decode_answer(b'\xef\xbb\xbf{"bom": true}') == {"bom": True}


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"content": "pool \xff\xfe"}',
        b'{"content": "\xed\xa0\x80"}',  # a surrogate encoded as UTF-8 bytes
        b"<html></html>",
        b"",
        b'{"hits":[{"documentId":NaN,"content":"x","score":Infinity}]}',  # not JSON
        b'{"hits":[{"content":"x","score":-Infinity}]}',
        b'{"hits":[{"content":"x","score":1e999}]}',  # JSON, but no finite number
    ],
)
def test_bodies_that_are_not_utf8_json_are_projection_errors(body: bytes) -> None:
    with pytest.raises(SourceError) as info:
        decode_answer(body)
    assert info.value.code is ErrorCode.PROJECTION


def test_a_deep_answer_with_surrogates_is_refused_not_raised() -> None:
    depth = 900  # parses, but a walk through it may hit the recursion limit
    body = ("[" * depth + json.dumps("\ud800") + "]" * depth).encode()
    with pytest.raises(SourceError) as info:
        decode_answer(body)
    assert info.value.code is ErrorCode.PROJECTION
