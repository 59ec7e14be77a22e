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
record spans lines, and a skipped line may complete one; there
(`long_line_judge`, the named formats of `multiline.HeadParser`), a line whose first bytes are
a record's head starts a record of its own (it completes none before it): timed by its head,
outside the call's window it cannot match, and in it, where the prefilter's terms are missing
from its chunks and its continuation lines (read, not built), it cannot either; its
continuation lines no longer join the record before it (they made that record match a term of
theirs). A line whose first bytes are no head may match: from them alone it is not known to be
no head (a head may need bytes past them; in some formats a head may start with a space), so
not known to be timed by the record before it. A source whose fixed service a `service:`
clause excludes (a named text format: its records' service is the configured one) matches
none of its lines. Before, each of these lines might match.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from workers.sources.logs.config import FileSource
from workers.sources.logs.files import Reader, without_colour
from workers.sources.logs.formats import LineParser
from workers.sources.logs.multiline import HeadParser
from workers.sources.logs.prefilter import _COMPOSED, RECORD_FORMATS, Prefilter
from workers.sources.logs.records import Entry, entry_matches, masked
from workers.sources.logs.source import ParsedQuery

__all__ = ["LongLineProbe", "long_line_judge", "long_line_probe"]

_ONE_LINE_RECORDS: Final = ("jsonl", "logfmt")
# A head is read from a line's first bytes: the named formats' heads (a stamp, a level, a
# thread, a logger) are followed by the message, so that many bytes hold the whole head (and
# only they are parsed: 4 ms a line of 1 MiB when all of them were).
_HEAD_BYTES: Final = 4096


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
    if fmt not in (*_ONE_LINE_RECORDS, *RECORD_FORMATS) or not prefilter.active or prefilter.levels:
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


Judge = Callable[[bytes, LongLineProbe | None], bool]


def long_line_judge(
    query: ParsedQuery, source: FileSource, parser: LineParser, window: tuple[int, int],
    reader: Reader,
) -> Judge:  # fmt: skip
    """Whether a long line of a file of `source` may match, given its first bytes and its
    probe (None: no term to look for); a head's record that its continuation lines may make
    a match is counted in `reader.long_unsure` when they are read."""
    heads = isinstance(parser, HeadParser) and source.format != "regex"  # (service its own)
    if heads and _excluded(query, source.service):
        return lambda _first, _probe: False
    if not isinstance(parser, HeadParser) or not heads:
        one_line = source.format in _ONE_LINE_RECORDS
        return lambda _first, probe: not one_line or probe is None or probe.may_match
    start, end = window

    def judge(first: bytes, probe: LongLineProbe | None) -> bool:
        if len(first) < _HEAD_BYTES:  # (a cap set lower: a head may need more of its bytes)
            return True
        epoch = parser.skip(without_colour(first[:_HEAD_BYTES]).decode("utf-8", "replace"))
        parser.unread = None
        if epoch is None or not start <= epoch <= end:
            return epoch is None  # no head: it may match; outside the window: it cannot
        if probe is None or probe.may_match:
            return True  # a head that holds every term
        missing = [t.decode() for t in probe.missing]

        def heard(lines: list[str]) -> None:  # its continuation lines: a match if they hold
            text = "\n".join(lines)  # every term its head lacks (or maybe: an escape, ...)
            if lines and (
                not text.isascii() or "\\" in text or "\x1b" in text
                or all(t in text.lower() for t in missing)
            ):  # fmt: skip
                reader.long_unsure += 1
                reader.stopped = True

        parser.unread = heard
        return False

    return judge


def _excluded(query: ParsedQuery, service: str) -> bool:
    """Whether a `service:` clause excludes every record of a source whose records' service is
    `service` (as matched: masked)."""
    entry = masked(Entry(0, "", service, ""))
    return any(
        not entry_matches(ParsedQuery(clauses=(c,)), entry)
        for c in query.clauses
        if c.field == "service"
    )
