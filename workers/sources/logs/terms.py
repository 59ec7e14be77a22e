"""Where a query's text term matches a record's text: the one rule of every backend.

A term (a word, a quoted phrase, a `field:value` compared as text) matches where it is a
substring of the text, case-insensitively, with a **number boundary**: where the term starts
with a digit, the text before the match is no digit; where it ends with one, the text after
it is no digit. So `10.0.0.1` is not found inside `10.0.0.12` or `110.0.0.1` but is in
`ip=10.0.0.1,` and `10.0.0.1:5432`; `web-1` is not in `web-12`; `80` is not in `8080`. A side
that is a letter or a mark keeps substring semantics (`timeout` finds `timeouts`,
`SQLTransientConnectionException` finds `java.sql.SQLTransientConnectionException`). Digits
are ASCII `0`-`9`, as ClickHouse's `[0-9]`.

`contains` is the Python side (MOCK, FILE, and the rows CLICKHOUSE read, matched again after
masking); `boundary_pattern` is the same rule as an RE2 expression for ClickHouse's `match()`.
A substring search comes first in both, so a term no text holds costs what it did.
"""

from __future__ import annotations

import functools
import re
from typing import Final

__all__ = ["DIGITS", "boundary_pattern", "bounded", "contains"]

DIGITS: Final = frozenset("0123456789")


def bounded(term: str) -> bool:
    """Whether the term starts or ends with a digit (its matches then have a boundary)."""
    return term[:1] in DIGITS or term[-1:] in DIGITS


@functools.lru_cache(maxsize=1024)
def _pattern(term: str) -> re.Pattern[str]:
    # The term first, its head's boundary looked at behind it (`.{n}`: a jump, not a scan):
    # an expression opening with a literal is searched for it as for a substring, the text
    # read once; opening with `(?<![0-9])`, every position would be tried against the whole
    # term (a record of `1a1a...` and a term `1a1a...12`: the record's length times the term's).
    head = f"(?<![0-9].{{{len(term)}}})" if term[:1] in DIGITS else ""
    tail = "(?![0-9])" if term[-1:] in DIGITS else ""
    return re.compile("(?s)" + re.escape(term) + head + tail)


def contains(text: str, term: str) -> bool:
    """Whether the term (lowered) matches in the text (lowered), by the module's rule."""
    if term not in text:
        return False
    return not bounded(term) or _pattern(term).search(text) is not None


# RE2 takes `\` before any punctuation as that character (and nothing else as an escape).
_PUNCTUATION: Final = frozenset("\\.+*?()|[]{}^$-&~#!\"'%,/:;<=>@_`")


def boundary_pattern(term: str) -> str:
    """The RE2 expression (ClickHouse's `match`) of a bounded term: case-insensitive, the
    term's characters literal, a non-digit or the text's edge on its digit sides."""
    literal = "".join("\\" + c if c in _PUNCTUATION else c for c in term)
    head = "(?:^|[^0-9])" if term[:1] in DIGITS else ""
    tail = "(?:[^0-9]|$)" if term[-1:] in DIGITS else ""
    return "(?is)" + head + literal + tail
