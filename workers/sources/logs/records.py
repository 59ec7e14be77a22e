"""Records of real backends, matched by the one query language and digested into an answer.

A backend (files, an in-memory list, ClickHouse rows) turns what it read into `Entry` values,
masks their secrets (`masked`: before the match, so a term only a secret holds matches
nothing; docs/logs.md "Secrets in log records") and feeds the matching ones to a `Digest`,
which keeps bounded state whatever the number of matches: figures per masked message and level
(`templates.mask`), the first and last record of each and the newest records.
`Digest.upstream` mines the templates of the masked messages once (`templates.mine`, the miner
every backend uses, so the same lines get the same templates whichever backend read them),
merges their figures per template and level (`contracts.logs.pattern_key`) and builds the
`LogsUpstream` the projector reads.

Matching means exactly what it means for the MOCK source (docs/logs.md): a word is a substring
of the lowered message, level, service or any field value (joined with a separator no term can
contain), with the number boundary of `terms`; `field:value` is a substring of that field, or
numeric equality when both sides are numbers; comparisons need a number. A field value that
reads as a number (a logfmt `duration_ms=120`, a ClickHouse attribute `"120"`) counts as one,
so the same query gives the same answer whatever the backend stored."""

from __future__ import annotations

import functools
import heapq
import math
from datetime import UTC, datetime, tzinfo
from typing import Final

from contracts.logs import (
    LogRecord,
    LogsUpstream,
    UpstreamPattern,
    pattern_key,
    pattern_priority,
)
from contracts.results import JsonScalar, LogScope
from workers.sources.logs.masking import mask_fields, without_log_secrets
from workers.sources.logs.source import Clause, ParsedQuery, _field_hit
from workers.sources.logs.templates import MAX_KEYS, mask, mine
from workers.sources.logs.terms import bounded, contains

__all__ = [
    "MAX_TEMPLATES",
    "OTHER_TEMPLATE",
    "UNREAD_TEMPLATE",
    "Digest",
    "Entry",
    "as_number",
    "entry_matches",
    "format_ms",
    "masked",
    "unmasked_first",
]

SEPARATOR: Final = "\x1f"
# Distinct masked messages tracked per call (bounded memory); past it more matches are still
# counted (the answer is then `truncated` anyway: more matches than events).
MAX_TEMPLATES: Final = MAX_KEYS
# The pattern of the matches that came once the figures were full (`Digest.templates_cut`):
# counted and dated, not mined.
OTHER_TEMPLATE: Final = "<other messages: more distinct kinds than are grouped>"
# The pattern of the matches a backend counted but did not read (`Digest.upstream`).
UNREAD_TEMPLATE: Final = "<older matches not read: patterns are of the newest {read}>"


def format_ms(epoch_ms: int, zone: tzinfo = UTC) -> str:
    """ISO 8601 with milliseconds in `zone` (as the MOCK source writes its times); in UTC
    where `zone`'s date would fall out of datetime's range (Go's zero time, year 1, in a zone
    behind UTC; a stamp late in 9999 in one ahead)."""
    try:
        moment = datetime.fromtimestamp(epoch_ms / 1000, zone)
    except OverflowError:
        moment = datetime.fromtimestamp(epoch_ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def as_number(value: object) -> float | None:
    """The value as a finite number: ints, floats, and strings that read as one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:  # a JSON integer of hundreds of digits: not a usable number
            return None
    if isinstance(value, str) and value and len(value) < 40 and value[-1:].isdigit():
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


class Entry:
    """One parsed record: its time, level, service, message and other fields."""

    __slots__ = ("epoch_ms", "fields", "level", "message", "service")

    def __init__(
        self,
        epoch_ms: int,
        level: str,
        service: str,
        message: str,
        fields: dict[str, JsonScalar] | None = None,
    ) -> None:
        self.epoch_ms, self.level, self.service, self.message = epoch_ms, level, service, message
        self.fields: dict[str, JsonScalar] = fields or {}

    def key(self) -> tuple[int, str]:
        """Order of records: time, then message (ties resolved the same on every backend)."""
        return (self.epoch_ms, self.message)

    def record(self, zone: tzinfo, template: str) -> LogRecord:
        """The record as the projector reads it."""
        return LogRecord(
            timestamp=format_ms(self.epoch_ms, zone),
            level=self.level,
            service=self.service,
            message=self.message,
            fields=dict(self.fields),
            template=template,
        )


def masked(entry: Entry) -> Entry:
    """The entry, its secrets masked in place (`masking.without_log_secrets`): what every
    backend does to a record before it is matched, mined or served."""
    entry.message = without_log_secrets(entry.message)
    if entry.fields:
        mask_fields(entry.fields)
    # a level that is no known word is shown as written, and the service as the record names
    # it: masked too (the few values a file holds, each worked out once)
    entry.level = _masked_name(entry.level)
    entry.service = _masked_name(entry.service)
    return entry


# Levels and services seen, masked (bounded as `masking`'s names: a hostile file of ever new
# values holds at most 4,096 of 200 characters).
_NAMED_VALUES: dict[str, str] = {}


def _masked_name(value: str) -> str:
    found = _NAMED_VALUES.get(value)
    if found is None:
        found = without_log_secrets(value)
        if len(value) <= 200:
            if len(_NAMED_VALUES) >= 4096:
                _NAMED_VALUES.clear()
            _NAMED_VALUES[value] = found
    return found


def unmasked_first(query: ParsedQuery) -> bool:
    """Whether a scan may try a record unmasked first and skip it when it does not match
    (cheaper: most records of a narrow query): some clause, none negated, no value holding a
    `*`. Masking takes text away and adds only `***`, so a term without `*` is in the masked
    text only where it was in the raw text. (No clause: every record matches, nothing to try.)"""
    clauses = query.clauses
    return bool(clauses) and not any(c.negated or "*" in c.value for c in clauses)


def _lowered(entry: Entry) -> dict[str, str]:
    values = {name: str(value).lower() for name, value in entry.fields.items() if value is not None}
    values["level"] = entry.level.lower()
    values["service"] = entry.service.lower()
    values["message"] = entry.message.lower()
    return values


_OWN: Final = ("level", "service", "message")


def _fielded_hit(clause: Clause, entry: Entry) -> bool:
    name = clause.field or ""
    raw: object = getattr(entry, name) if name in _OWN else entry.fields.get(name)
    values = {} if raw is None else {name: str(raw).lower()}
    if name in _OWN:
        raw = values[name]
    number = as_number(raw)
    return _field_hit(clause, values, {name: number if number is not None else raw})


def entry_matches(query: ParsedQuery, entry: Entry) -> bool:
    """Whether the entry satisfies every clause of the query."""
    hay: str | None = None
    for clause in query.clauses:
        if clause.field is None:
            if hay is None:  # built once, only when a clause needs the whole record
                hay = SEPARATOR.join(_lowered(entry).values())
            value = clause.value  # (`terms.contains`, inlined: every record's)
            hit = value in hay and (not bounded(value) or contains(hay, value))
        else:
            hit = _fielded_hit(clause, entry)
        if hit == clause.negated:
            return False
    return True


# Messages longer than this are mined each time rather than cached: the cache outlives the
# call, and 8192 entries of 1 MiB lines (key and template) would hold ~16 GiB past any budget.
_CACHED_CHARS: Final = 512


@functools.lru_cache(maxsize=8192)
def _cached_template(message: str) -> str:
    return mask(message)


def _template(message: str) -> str:
    # Routine lines repeat verbatim (health checks, access logs): mask each short text once.
    return _cached_template(message) if len(message) <= _CACHED_CHARS else mask(message)


class _Figures:
    """Running figures of the matches of one pattern: a masked message (then a template) and
    one level (`contracts.logs.pattern_key`)."""

    __slots__ = ("count", "first", "last")

    def __init__(self, entry: Entry) -> None:
        self.count, self.first, self.last = 1, entry, entry

    def add(self, entry: Entry) -> None:
        """Count one more entry of this masked message and level."""
        self.count += 1
        if entry.key() < self.first.key():
            self.first = entry
        if entry.key() >= self.last.key():
            self.last = entry

    def absorb(self, other: _Figures) -> None:
        """Add the figures of another masked message of the same template and level."""
        self.count += other.count
        self.first = min(self.first, other.first, key=Entry.key)
        self.last = max(self.last, other.last, key=Entry.key)


# A pattern's key: (masked message or template, level).
_Key = tuple[str, str]
# The levels the matches past the figures are counted under, each its own pattern
# (`OTHER_TEMPLATE`): the six and a few words (a JSON `level` may hold any text: one per
# record made the state and the answer grow with the matches)
_REST_LEVELS: Final = 16


class Digest:
    """Bounded state over the matches of one call, in any order of arrival."""

    def __init__(self, sample_limit: int) -> None:
        self.sample_limit = sample_limit
        self.match_count = 0
        self.templates_cut = False
        self._figures: dict[_Key, _Figures] = {}  # per masked message and level
        # The matches given no figure of their own once `templates_cut`, per level (at most
        # `_REST_LEVELS`): a pattern each (`OTHER_TEMPLATE`), so the patterns' counts always
        # add up to `match_count`.
        self._rest: dict[str, _Figures] = {}
        self._newest: list[tuple[tuple[int, str], int, Entry, str]] = []
        self._seq = 0

    def add(self, entry: Entry) -> None:
        """Count one matching entry."""
        self.match_count += 1
        masked = _template(entry.message)
        key = pattern_key(masked, entry.level)
        found = self._figures.get(key)
        if found is None:
            if len(self._figures) >= MAX_TEMPLATES and not self.templates_cut:
                self._compact()
            if len(self._figures) < MAX_TEMPLATES:
                self._figures[key] = _Figures(entry)
            else:
                self.templates_cut = True
                level = entry.level
                if level not in self._rest and len(self._rest) >= _REST_LEVELS:
                    level = ""  # a level past them: level-less (an unknown word ranks so)
                rest = self._rest.get(level)
                if rest is None:
                    self._rest[level] = _Figures(entry)
                else:
                    rest.add(entry)
        else:
            found.add(entry)
        self._seq += 1
        item = (entry.key(), -self._seq, entry, masked)  # masked once, not again at the end
        if len(self._newest) < self.sample_limit:
            heapq.heappush(self._newest, item)
        elif item[0] > self._newest[0][0]:
            heapq.heapreplace(self._newest, item)

    def _compact(self) -> None:
        # Too many distinct masked messages (user names, paths the mask left): fold them into
        # their templates, which stand for them from now on (a template is itself a masked
        # message the miner groups with its kind). Deterministic for one order of arrival;
        # below the bound the answer does not depend on the order at all.
        merged, template_of = self._mined()
        self._figures = merged
        self._newest = [(k, seq, e, template_of.get(key, key)) for k, seq, e, key in self._newest]
        if len(merged) >= MAX_TEMPLATES * 3 // 4:  # still too varied: count, keep no more
            self.templates_cut = True

    def _mined(self) -> tuple[dict[_Key, _Figures], dict[str, str]]:
        # One mining per call over the distinct masked messages in the order of their first
        # record (not of arrival): the same lines give the same templates on every backend.
        # Then the figures merged per template and level.
        first: dict[str, Entry] = {}
        for (masked, _level), fig in self._figures.items():
            seen = first.get(masked)
            if seen is None or fig.first.key() < seen.key():
                first[masked] = fig.first
        template_of = mine(sorted(first, key=lambda m: (first[m].key(), m)))
        merged: dict[_Key, _Figures] = {}
        for key in sorted(self._figures, key=lambda k: (self._figures[k].first.key(), k)):
            fig = self._figures[key]
            into_key = pattern_key(template_of[key[0]], key[1])
            into = merged.get(into_key)
            if into is None:
                into = merged[into_key] = _Figures(fig.first)
                into.count, into.last = fig.count, fig.last
            else:
                into.absorb(fig)
        return merged, template_of

    def _unread(self, match_count: int, zone: tzinfo) -> UpstreamPattern:
        # A backend that counted more matches than it read (ClickHouse: count() over the
        # window, the newest `row_limit` rows read): the rest is one pattern, so no count
        # shown is taken for the window's whole, and the counts add up to `match_count`.
        figures = [*self._figures.values(), *self._rest.values()]
        oldest = min((f.first for f in figures), key=Entry.key, default=None)
        return UpstreamPattern(
            template=UNREAD_TEMPLATE.format(read=self.match_count),
            count=match_count - self.match_count,
            level="",
            first_seen="",
            last_seen="" if oldest is None else format_ms(oldest.epoch_ms, zone),
        )

    def _sample(
        self,
        order: list[UpstreamPattern],
        merged: dict[_Key, _Figures],
        template_of: dict[str, str],
    ) -> list[tuple[Entry, str]]:
        # First and last of each pattern in the projector's priority (the largest and the
        # notable alternately), then the newest records.
        chosen: dict[int, tuple[Entry, str]] = {}
        for pattern in order:
            fig = merged[pattern_key(pattern.template, pattern.level)]
            for entry in (fig.first, fig.last):
                if len(chosen) < self.sample_limit:
                    chosen.setdefault(id(entry), (entry, pattern.template))
        for _, _, entry, key in sorted(self._newest, key=lambda item: item[0], reverse=True):
            if len(chosen) >= self.sample_limit:
                break
            chosen.setdefault(id(entry), (entry, template_of.get(key) or key))
        return sorted(chosen.values(), key=lambda pair: pair[0].key())

    def upstream(
        self,
        source_kind: str,
        scope: LogScope,
        zone: tzinfo,
        *,
        match_count: int | None = None,
        lower_bound: bool = False,
    ) -> LogsUpstream:
        """The answer: patterns over every match seen, a bounded sample, the count."""
        merged, template_of = self._mined()
        for level, rest in sorted(self._rest.items()):
            other = pattern_key(OTHER_TEMPLATE, level)
            if other in merged:  # (a line reading as this text joins it, counted once)
                merged[other].absorb(rest)
            else:
                merged[other] = rest
        patterns = [
            UpstreamPattern(
                template=template,
                count=fig.count,
                level=level,
                first_seen=format_ms(fig.first.epoch_ms, zone),
                last_seen=format_ms(fig.last.epoch_ms, zone),
            )
            for (template, level), fig in sorted(
                merged.items(), key=lambda kv: (kv[1].first.key(), kv[0])
            )
        ]
        order = pattern_priority(patterns, scope)
        records = [
            entry.record(zone, template)
            for entry, template in self._sample(order, merged, template_of)
        ]
        if match_count is not None and match_count > self.match_count:
            patterns.append(self._unread(match_count, zone))
        return LogsUpstream(
            source_kind=source_kind,
            scope=scope,
            match_count=self.match_count if match_count is None else match_count,
            patterns=patterns,
            records=records,
            match_count_lower_bound=lower_bound,
        )
