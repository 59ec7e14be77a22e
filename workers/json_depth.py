"""JSON nesting measured without recursion, for recordings that may be hostile.

A decoder recurses once per nesting level: a recorded body 10,000 levels deep raises
`RecursionError` in msgspec (and in every recursive walk after it). Replay measures a body's
depth first, with regular expressions and a running sum (no recursion, one pass), and refuses a
body deeper than `MAX_DEPTH` as a typed outcome; and an export line too deep to decode whole is
split into its top-level members so each body can be judged on its own.
"""

from __future__ import annotations

import re
from itertools import accumulate
from typing import Final

__all__ = ["MAX_DEPTH", "nesting_depth", "too_deep", "top_level_members"]

# Far below the interpreter's recursion limit (1000), so a body within it decodes, diffs,
# renders and encodes at any reasonable call depth; far above any real answer's nesting.
MAX_DEPTH: Final = 256
_STRING: Final = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_TOKEN: Final = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)
_SPACE: Final = re.compile(rb"[ \t\r\n]*")
_SCALAR: Final = re.compile(rb"[^,}\] \t\r\n]+")
_NOT_BRACKET: Final = bytes(b for b in range(256) if b not in b"[]{}")
_STEP: Final = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1


def nesting_depth(data: bytes) -> int:
    """The deepest nesting of arrays and objects in JSON text (brackets inside strings do
    not count); for text that is not JSON, the depth its brackets suggest."""
    brackets = _STRING.sub(b'""', data).translate(None, _NOT_BRACKET)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def too_deep(data: bytes) -> bool:
    """Whether JSON text nests deeper than `MAX_DEPTH` levels."""
    if len(data) <= 2 * MAX_DEPTH or data.count(b"[") + data.count(b"{") <= MAX_DEPTH:
        return False  # the common case: too few brackets to nest that deep, however placed
    return nesting_depth(data) > MAX_DEPTH


def _skip(data: bytes, pos: int) -> int:
    """The first position at or after `pos` that is not JSON whitespace."""
    match = _SPACE.match(data, pos)
    return match.end() if match else pos


def _value_end(data: bytes, pos: int) -> int | None:
    """Where the JSON value starting at `pos` ends, found iteratively."""
    first = data[pos : pos + 1]
    if first == b'"':
        match = _STRING.match(data, pos)
        return match.end() if match else None
    if first not in (b"[", b"{"):
        match = _SCALAR.match(data, pos)
        return match.end() if match else None
    depth = 0
    for token in _TOKEN.finditer(data, pos):
        step = _STEP[token.group()[0]] if len(token.group()) == 1 else 0
        depth += step
        if depth == 0:
            return token.end()
    return None


def top_level_members(data: bytes) -> list[tuple[bytes, bytes]] | None:
    """The members of a JSON object as (key text, value text) pairs, however deep the values
    nest; None when `data` is not one JSON object."""
    pos = _skip(data, 0)
    if data[pos : pos + 1] != b"{":
        return None
    members: list[tuple[bytes, bytes]] = []
    pos = _skip(data, pos + 1)
    if data[pos : pos + 1] == b"}":
        return members if not data[pos + 1 :].strip() else None
    while True:
        key = _STRING.match(data, pos)
        if key is None:
            return None
        pos = _skip(data, key.end())
        if data[pos : pos + 1] != b":":
            return None
        start = _skip(data, pos + 1)
        end = _value_end(data, start)
        if end is None:
            return None
        members.append((key.group(), data[start:end]))
        pos = _skip(data, end)
        sep = data[pos : pos + 1]
        pos = _skip(data, pos + 1)
        if sep == b"}":
            return members if not data[pos:].strip() else None
        if sep != b",":
            return None
