"""Reading the text of a log query: quoted phrases (with `\\"` escapes) and the unquoted forms
refused because read literally they would be a false "no evidence" (source.py parses).
"""

from __future__ import annotations

from typing import Final

from contracts.status import ErrorCode
from workers.sources.base import SourceError

__all__ = ["bad_query", "check_unquoted", "read_quoted"]


def bad_query(message: str) -> SourceError:
    """The SCHEMA error of a query that cannot be run, saying what is wrong."""
    return SourceError(ErrorCode.SCHEMA, f"query: {message}")


_bad = bad_query


def read_quoted(text: str, start: int) -> tuple[str, int]:
    """The phrase of the quote at `start` and the position after it."""
    # `\"` is a quote inside the phrase and `\\` a backslash; any other backslash is itself.
    out: list[str] = []
    pos, n = start + 1, len(text)
    while True:
        end = text.find('"', pos)
        slash = text.find("\\", pos, end if end >= 0 else n)
        if slash >= 0:
            out.append(text[pos:slash])
            following = text[slash + 1 : slash + 2]
            out.append(following if following in ('"', "\\") else "\\")
            pos = slash + (2 if following in ('"', "\\") else 1)
            continue
        if end < 0:
            raise _bad(f'unbalanced quote: the " at character {start + 1} is never closed')
        out.append(text[pos:end])
        break
    after = end + 1
    if after < n and not text[after].isspace():
        raise _bad(f"unexpected {text[after]!r} right after the closing quote at character {after}")
    return "".join(out), after


# Forms an LLM writes from other query languages: read literally, substrings that almost never
# occur ("timeout,", "(timeout)"), so a false "no evidence". Refused, saying how to write them.
_UNQUOTED: Final = (
    (lambda w: w.startswith("(") or w.endswith(")"), "parentheses at character {at} are not "
     'supported: all terms must match, so write them without ( ); quote text with them ("f(x)")'),
    (lambda w: w.endswith(",") or w.startswith(","), "the ',' in {word!r} at character {at}: "
     'separate terms with spaces (all must match); quote text that contains a comma ("a,b")'),
    (lambda w: "|" in w, "'|' in {word!r} at character {at}: alternatives are not supported; "
     "run one query per value (level:ERROR, then level:WARN)"),
)  # fmt: skip


def check_unquoted(word: str, at: int) -> None:
    """`SourceError(SCHEMA)` for an unquoted form that would read as a false "no evidence"."""
    for refused, message in _UNQUOTED:
        if refused(word):
            raise _bad(message.format(word=word, at=at))
