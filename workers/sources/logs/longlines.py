"""Whether a line over `max_line_bytes`, skipped unread (`files.Reader`), could have matched.

Such a line is read in bounded chunks and dropped. Where a line is a record (JSON lines,
logfmt), a line that lacks a term every match contains cannot match: the count stays exact,
where before every call over a file holding one such line (a request body logged whole) had its
count marked a lower bound, and an ERROR ("stopped at its size or time limit") when nothing
else matched. The terms are the prefilter's (`prefilter.Prefilter`: sound for a line's text),
less those whose text parsing may render otherwise (a JSON number) and those that are not
ASCII; a chunk with a backslash (an escape), an escape code (colour) or a byte that is not
ASCII makes the line one that may match, and so does, for a phrase, a JSON line whose message
parsing composes of several values (`prefilter._COMPOSED`: an audit Event, Istio's access
log, as JSON or as logfmt), and so does journald's export (`__REALTIME_TIMESTAMP`), whose
values may be arrays of their bytes (`"MESSAGE":[27,91,...]`, read as text). Elsewhere a
record spans lines, and a skipped line may complete one: it may always match.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from workers.sources.logs.prefilter import _COMPOSED, Prefilter

__all__ = ["LongLineProbe", "long_line_probe"]

_ONE_LINE_RECORDS: Final = ("jsonl", "logfmt")


class LongLineProbe:
    """The terms one long line was seen to hold, fed chunk by chunk (a term split between two
    chunks is found: the tail of each is kept)."""

    __slots__ = ("keep", "markers", "missing", "tail", "unsure")

    def __init__(self, terms: list[bytes], markers: tuple[bytes, ...] = ()) -> None:
        self.missing = set(terms)
        self.markers = markers  # text that makes the line one that may match
        self.keep = max(len(t) for t in (*terms, *markers)) - 1
        self.tail = b""
        self.unsure = False

    def feed(self, chunk: bytes) -> None:
        if self.unsure or not self.missing:
            return
        if not chunk.isascii() or b"\\" in chunk or b"\x1b" in chunk:
            self.unsure = True
            return
        text = self.tail + chunk.lower()
        if any(m in text for m in self.markers):
            self.unsure = True
            return
        self.missing = {t for t in self.missing if t not in text}
        self.tail = text[-self.keep :] if self.keep else b""

    @property
    def may_match(self) -> bool:
        """False only when a term every match contains is not in the line."""
        return self.unsure or not self.missing


def long_line_probe(prefilter: Prefilter, fmt: str) -> Callable[[], LongLineProbe] | None:
    """A probe per long line of a file of `fmt` for a call's prefilter, or None when a long
    line may always match (a record spans lines, or no term can be looked for)."""
    if fmt not in _ONE_LINE_RECORDS or not prefilter.active or prefilter.levels:
        return None
    terms = [
        t.encode()
        for t in prefilter.terms
        if t.isascii() and not (fmt == "jsonl" and t in prefilter.numeric)
    ]
    composed = _COMPOSED.get(fmt, ())  # a phrase of a message made of the line's values
    spaced = any(b" " in t for t in terms)
    markers = tuple(m.lower().encode() for m in composed) if spaced else ()
    if fmt == "jsonl":  # journald's export: a value as an array of its bytes, read as text
        markers += (b"__realtime_timestamp",)
    return (lambda: LongLineProbe(terms, markers)) if terms else None
