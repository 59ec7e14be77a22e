"""Small pure helpers for bounding text and for showing it without hidden characters.

Evidence is data written by others (runbooks, log lines, table rows): it may carry code points
that a screen does not show but a model reads. `INVISIBLE` names them; `visible_text` is what
the Model Observation shows instead (the observation builder applies it to every string), and
the console spells them out (`\\U000e0041`) from the same pattern.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["INVISIBLE_CLASS", "cut", "visible_text"]

# Unicode tag characters (U+E0000-E007F) mirror ASCII invisibly: a run of them is hidden text.
TAG_RUN: Final = re.compile("[\U000e0000-\U000e007f]+")
# Code points that show nothing (or nothing but a line break) yet reach a model verbatim:
# soft hyphen, combining grapheme joiner, Khmer/Mongolian invisibles, Hangul fillers, zero-width
# spaces/joiners/marks, bidi embeddings/overrides/isolates, word joiner and invisible operators,
# deprecated format controls, variation selectors, BOM, musical-notation format characters,
# tag characters, and the line/paragraph separators.
INVISIBLE_CLASS: Final = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e"
    "\u2060-\u2064\u2066-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\U0001d173-\U0001d17a"
    "\U000e0000-\U000e007f\U000e0100-\U000e01ef"
)
INVISIBLE: Final = re.compile(f"[{INVISIBLE_CLASS}]")
_SEPARATORS: Final = re.compile("[\u2028\u2029]")


def _marked(match: re.Match[str]) -> str:
    return f"[{len(match.group())} hidden characters removed]"


def visible_text(text: str, *, newline: str = "\n") -> str:
    """`text` as the model may see it: a run of tag characters becomes a visible
    `[N hidden characters removed]`, a line or paragraph separator `newline`, and every
    other invisible code point (`INVISIBLE`) is removed. ASCII text is returned as is.
    On JSON text, pass `newline="\\n"`: the result stays the same JSON with its strings
    made visible (every replacement is plain text inside a string)."""
    if text.isascii() or INVISIBLE.search(text) is None:
        return text
    text = TAG_RUN.sub(_marked, text)
    return INVISIBLE.sub("", _SEPARATORS.sub(lambda _: newline, text))


def cut(text: str, limit: int) -> tuple[str, bool]:
    """A verbatim prefix of at most `limit` characters, and whether anything was cut."""
    if len(text) <= limit:
        return text, False
    return text[:limit], True
