"""The FILE backend's text prefilter: a line is parsed only when it may match.

A line is skipped unparsed only when a term every match must contain (a word, a phrase, a
`field:text` value) is missing from its lowered text (the matcher's number boundary, `terms`,
only narrows a substring match: a line without the substring cannot match). That is sound, an
over-approximation of the matcher and never more, only where the text the matcher compares is
in the line as is; where parsing derives or re-renders it, the term is not used, or the line is
also searched in that rendering:

- derived text (a normalised level, the configured service, syslog's facility number): a
  term that could come from it is not used;
- JSON numbers are compared as parsing renders them (`1e3` and `1000.00` as `1000.0`, `1e16`
  as `1e+16`, `0.00001` as `1e-05`): a term made of number characters is also looked for in
  the renderings of the line's numbers;
- JSON lists (and objects nested past flattening) are compared as compact JSON (`[1,2]` for
  `[1, 2]`): on JSON lines, a term with a bracket, brace, comma or colon is not used;
- escapes: a line with a backslash is always parsed, and so is journald's export of a field
  as an array of its bytes (`"MESSAGE":[27,91,...]`, read as its text; spaced or not);
- a level is upper-cased before it is lowered (`ß` becomes `ss`): a line that is not ASCII is
  also searched upper-cased, then lowered, and without its zero-width characters (masking takes
  them out: `pass\u200bword` is shown `password`);
- secrets are masked before the match (`masking.without_log_secrets`): masking only takes text
  away, but adds `***`, so a term with a `*` (`"password=***"`) is not used;
- JSON lines whose message parsing composes of several values (a Kubernetes audit Event's
  `verb requestURI code`, Istio's JSON access log's request line, a Cloud Logging entry's
  `httpRequest` or audit line, Traefik's and Cloudflare's request line, a Lambda platform
  event's type and status): a term with a space is not looked for in such a line (each value
  is: a term without one); so too logfmt lines, which
  `formats._Mapped` reads alike (Envoy's `text_format` of Istio's keys as `key=value` pairs:
  before, `"POST /api/charge"` found none of the records whose message it is);
- a level read from a number under `plain`: `aws logs tail`'s line of a JSON object (pino's
  `"level":50`, `awstail`) is never skipped by a `level:` clause.
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

from workers.sources.logs.daemonlogs import LEVEL_TEXTS
from workers.sources.logs.levels import LEVEL_WORDS, SYSLOG_NAMES
from workers.sources.logs.records import SEPARATOR
from workers.sources.logs.secret_shapes import without_invisible
from workers.sources.logs.source import ParsedQuery

__all__ = ["LINE_FORMATS", "RECORD_FORMATS", "Prefilter", "skipped_time"]

# Formats where one line is one record, so a term the record needs is in that line's text;
# syslog's record may go on over indented lines (`syslogformat`): its parser runs the check over a
# record's lines joined, and counts the lines not in the format per line, as the check does.
LINE_FORMATS: Final = ("jsonl", "logfmt", "syslog")
# Text formats whose record (a head line and its continuation lines) holds every text the
# matcher compares as written: the prefilter runs on the record's raw text before it is built
# (`HeadParser.keep`). Access logs re-compose their message (`GET /x HTTP/1.1 200 6` from
# `"GET /x HTTP/1.1" 200 6`): only their terms without a space or a quote are used.
RECORD_FORMATS: Final = (
    "log4j", "apache_error", "nginx_error", "klog", "oslo", "postgresql", "plain", "regex",
    "apache_access", "nginx_access", "envoy",
)  # fmt: skip
_RECOMPOSED: Final = ("apache_access", "nginx_access", "envoy")
# Not listed, so every line is parsed: `w3c` (a skipped `#Fields:` line would misread the lines
# after it; its fields are renamed columns) and `postgresql_csv` (a row spans lines, its text
# unquoted: `""` is `"`).
# Text formats whose level is a word of the record's text (log4j and plain only take the level
# words of their pattern, never a single letter): a `level:` clause then needs one of the
# words naming that level in the raw text.
_WORD_LEVELS: Final = {"log4j": False, "plain": False, "apache_error": True,
                       "nginx_error": True, "oslo": True, "postgresql": False}  # fmt: skip


def _level_words(value: str, letters: bool, spaced: bool = False) -> tuple[str, ...]:
    """The words a record's text may hold when its level contains `value` (an unknown word is
    its own level, upper-cased: `value` itself is then in the text); `spaced`: a single
    letter between spaces too (MongoDB's `I`, `D2` before 4.4, in `plain`)."""
    words = {w.lower() for w, level in LEVEL_WORDS.items() if value in level.lower()}
    if spaced:
        words |= {f" {w} " for w in words if len(w) == 1}
        words |= {f" d{n} " for n in range(1, 6) if " d " in words}
        words |= {
            f"{w[1]} [" for w in words if len(w) == 3 and w[0] == " "
        }  # CUPS: `E [05/Dec/2026:...]`
    # a level read from other text than a level word (`daemonlogs`; PHP's `Parse error` as a
    # crash line in any text format)
    words |= {w for level, texts in LEVEL_TEXTS.items() if value in level for w in texts}
    if "trace" in value or value in "trace":
        words.add("trace")  # Apache's trace1..trace8
    if value in "error":
        words.add("exception in thread")  # Java's uncaught exception is ERROR (`multiline`)
    return tuple(sorted(w for w in {value, *words} if letters or len(w) > 1))


_LEVELS: Final = ("trace", "debug", "info", "warn", "error", "fatal")
# What a rendered number is made of (Python's `str` of a float, msgspec's JSON of one).
_NUMBER_CHARS: Final = frozenset("0123456789.e+-")
_STRUCTURE: Final = frozenset("[]{},:")
# What a line holds when parsing composes its message (`kubeaudit`, `accesslog`), per format
_COMPOSED: Final[dict[str, tuple[str, ...]]] = {
    "jsonl": (
        '"audit.k8s.io/',
        '"response_code"',
        '"logName"',
        '"DownstreamStatus"',
        '"EdgeResponseStatus"',
        '"platform.',
    ),
    "logfmt": ("audit.k8s.io/", "response_code="),
}
_NUMBER: Final = re.compile(r"-?\d++(?:\.\d++)?(?:[eE][-+]?\d++)?")
# A number may render otherwise than it is written only with an exponent, with 16 digits or
# more (rounded to 17 significant), or under 1e-4 (`1e-05`); any other one (at most 15 digits,
# fixed notation) renders as written less trailing zeros: text the line holds. Seen with a
# translation (digits and points to 0) and `in`: a regular expression costs 5 µs a line.
_AS_ZERO: Final = bytes.maketrans(b"123456789.", b"0000000000")
_LONG: Final = b"0" * 16
_ENCODER: Final = msgspec.json.Encoder()


def _risky(token: str) -> bool:
    return len(token) >= 16 or "e" in token or "E" in token or "0.0000" in token


def _renderings(line: str) -> str:
    """How parsing renders the line's numbers that may not render as written."""
    zeros = line.encode().translate(_AS_ZERO)
    if _LONG not in zeros and b"0e" not in zeros and b"0E" not in zeros and "0.0000" not in line:
        return ""  # the common case: every number renders as written
    out: list[str] = []
    for token in filter(_risky, _NUMBER.findall(line)):
        number = float(token)
        if number - number == 0:  # finite (an overflowing one is no number of a record)
            out += (str(number), _ENCODER.encode(number).decode())
    return SEPARATOR.join(out)


class Prefilter:
    """The terms every match of a query contains, and the check of one line against them."""

    __slots__ = ("composed", "levels", "numbers", "numeric", "terms")

    def __init__(self, query: ParsedQuery, fmt: str, service: str) -> None:
        derived = (*_LEVELS, *(w.lower() for w in LEVEL_WORDS), *SYSLOG_NAMES, service.lower())
        terms = [
            c.value
            for c in query.clauses
            if not c.negated and c.op == "contains" and c.number is None and c.value
            and c.field != "level" and not any(c.value in d for d in derived)
            and not (fmt == "syslog" and c.value.isdigit()) and SEPARATOR not in c.value
            and not (fmt == "jsonl" and not _STRUCTURE.isdisjoint(c.value))
            and not (fmt in _RECOMPOSED and (" " in c.value or '"' in c.value))
            and "*" not in c.value
        ] if fmt in LINE_FORMATS or fmt in RECORD_FORMATS else []  # fmt: skip
        self.terms = terms
        letters = _WORD_LEVELS.get(fmt)
        self.levels = [
            _level_words(c.value, letters, fmt == "plain")
            for c in query.clauses
            if letters is not None and c.field == "level" and not c.negated
            and c.op == "contains" and c.value
        ]  # fmt: skip
        self.numbers = fmt == "jsonl"  # logfmt and syslog keep every value as written
        self.composed = _COMPOSED.get(fmt)
        self.numeric = frozenset(t for t in terms if _NUMBER_CHARS.issuperset(t))

    @property
    def active(self) -> bool:
        """Whether any line or record can be skipped at all."""
        return bool(self.terms or self.levels)

    def may_match(self, line: str) -> bool:
        """False only when no record this line parses into can match the query."""
        if "\\" in line or (self.numbers and "[" in line and "__REALTIME_TIMESTAMP" in line):
            return True
        low = line.lower()
        for words in self.levels:
            if not any(w in low for w in words) and not _tailed_json(line):
                return False
        numbers: str | None = None
        for term in self.terms:
            if term in low:
                continue
            if self.numbers and term in self.numeric:
                numbers = _renderings(line) if numbers is None else numbers
                if term in numbers:
                    continue
            if (
                (composed := self.composed) is not None and " " in term
                and any(marker in line for marker in composed)
            ):  # fmt: skip
                continue  # a phrase of a message composed of the line's values
            if not line.isascii() and (
                term in line.upper().lower() or term in without_invisible(line).lower()
            ):
                continue
            return False
        return True


def _tailed_json(line: str) -> bool:
    """Whether a `plain` line may be `aws logs tail`'s of a JSON object (`awstail`): its level
    may be a number (pino's `"level":50`)."""
    return "+00:00 " in line[19:33] and "{" in line


def skipped_time(parser: Any, line: str, default: int) -> int:
    """The time of the record a line the prefilter skipped holds, else `default`: a line
    after it that is no record is matched as text, timed by the record before it (before,
    by the last record parsed: days older, outside the window, when the prefilter skipped
    the ones between). The parser's count of failed lines stays as it was."""
    failed = parser.failed
    found = parser.feed(line)
    parser.failed = failed
    return int(found[-1].epoch_ms) if found else default
