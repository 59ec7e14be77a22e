"""`workers.sources.knowledge.rag_http.decode_answer`: upstream bytes to a JSON value, pure (no server)."""

from __future__ import annotations

import json

import pytest

from contracts.status import ErrorCode
from workers.sources import SourceError
from workers.sources.knowledge.rag_http import decode_answer


def test_lone_surrogates_become_replacement_characters_pairs_stay() -> None:
    body = b'{"a\\udc00":["x \\ud800 y",{"k":"\\ud83d\\ude00 \\udfff"}],"n":1,"s":"\\\\ud800"}'
    assert decode_answer(body) == {
        "a\ufffd": ["x \ufffd y", {"k": "\U0001f600 \ufffd"}],
        "n": 1,
        "s": "\\ud800",  # an escaped backslash, not a surrogate: kept as text
    }
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
    try:
        value = decode_answer(body)
    except SourceError as exc:
        assert exc.code is ErrorCode.PROJECTION
    else:
        for _ in range(depth):
            value = value[0]
        assert value == "\ufffd"
