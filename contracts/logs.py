"""Projection of matched log records into a `LogsResult`: scope, patterns, a bounded timeline.

A log source hands over a `LogsUpstream`: the executed scope, the total match count, the
templates it mined over *all* matches (a source may use drain3 or its backend's own
clustering), and a bounded sample of records tagged with their template. When a source mines
nothing, templates are derived here by masking variable tokens. The projection is pure, so
a recorded upstream re-projects identically.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Final

import msgspec
from msgspec import UNSET, UnsetType

from contracts.bounds import Bounds
from contracts.results import (
    JsonScalar,
    LogEvent,
    LogPattern,
    LogScope,
    LogsResult,
    RecordTimes,
)
from contracts.status import EvidenceStatus
from contracts.text import cut

__all__ = [
    "LogRecord",
    "LogsUpstream",
    "UpstreamPattern",
    "level_rank",
    "mask_template",
    "pattern_key",
    "pattern_priority",
    "project_logs",
]


class LogRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One matched record as a source parsed it (topic fields under `fields`)."""

    timestamp: str
    level: str
    service: str
    message: str
    fields: dict[str, JsonScalar] = {}
    template: str | UnsetType = UNSET


class UpstreamPattern(msgspec.Struct, frozen=True, kw_only=True):
    """A template mined over all matches in scope."""

    template: str
    count: int
    level: str
    first_seen: str
    last_seen: str


class LogsUpstream(msgspec.Struct, frozen=True, kw_only=True):
    """What a log source returns for one query."""

    source_kind: str
    scope: LogScope
    match_count: int
    patterns: list[UpstreamPattern] = []
    records: list[LogRecord] = []
    # True when a scan budget or deadline stopped the count early: `match_count` is then what
    # was found so far, a lower bound (the result is `truncated`; the Control View says so).
    match_count_lower_bound: bool = False
    # FILE: lines of the files read that are not in their configured format (still matched
    # as plain text by a query of words), and matched files it could not read at all (a
    # compression it lacks): counted, never dropped silently. Omitted when there are none.
    unparsed_lines: int | UnsetType = UNSET
    unread_files: int | UnsetType = UNSET
    # FILE: matched files that end in an error part way (compressed ones cut short, as by a
    # rotation interrupted or a full disk, or corrupt; any of which the system failed a read):
    # read up to it, the count a lower bound.
    broken_files: int | UnsetType = UNSET
    # FILE: matched paths inside the log roots that are no regular file (a shipper's fifo, a
    # socket, a device): skipped, never opened; the notes say so. Omitted when none.
    skipped_files: int | UnsetType = UNSET
    # Short sentences the model must hear about how the answer was read (at most
    # `MAX_NOTES`, each cut to `logs_field_chars`).
    notes: list[str] | UnsetType = UNSET
    # Records seen outside the window (none in it, or dated in the future): Control View only.
    record_times: RecordTimes | UnsetType = UNSET


_LEVEL_RANK: Final = {
    "FATAL": 5, "CRITICAL": 5, "ERROR": 4, "WARN": 3, "WARNING": 3, "INFO": 2, "DEBUG": 1,
}  # fmt: skip
_MASKS: Final = (
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<UUID>"),  # noqa: E501
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<IP>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{12,}\b", re.I), "<HEX>"),
    (re.compile(r"(?<![A-Za-z])[-+]?\d+(?:\.\d+)?(?:ms|s|m|h|Mi|Gi|KB|MB|GB|%)?(?![A-Za-z])"), "<NUM>"),  # noqa: E501
)  # fmt: skip


def level_rank(level: str) -> int:
    """Severity for ordering: errors before warnings before routine lines."""
    return _LEVEL_RANK.get(level.upper(), 0)


def mask_template(message: str) -> str:
    """A template of a message: ids, addresses and numbers replaced by placeholders."""
    for pattern, placeholder in _MASKS:
        message = pattern.sub(placeholder, message)
    return message


def _patterns_from_records(records: list[LogRecord]) -> list[UpstreamPattern]:
    # One pattern per template and level (`pattern_key`), as every backend makes them.
    acc: dict[tuple[str, str], list[str | int]] = {}
    for record in records:
        key = pattern_key(_template_of(record), record.level)
        found = acc.get(key)
        if found is None:
            acc[key] = [1, record.timestamp, record.timestamp]
            continue
        found[0] = int(found[0]) + 1
        found[1] = min(str(found[1]), record.timestamp)
        found[2] = max(str(found[2]), record.timestamp)
    return [
        UpstreamPattern(template=t, count=int(c), level=lv, first_seen=str(f), last_seen=str(la))
        for (t, lv), (c, f, la) in acc.items()
    ]


def pattern_key(template: str, level: str) -> tuple[str, str]:
    """What makes a pattern: its template and its records' level. One template written at
    several levels (an access log's request line, its level from the status; a retry logged
    WARN, then ERROR) is a pattern per level, so a count is always of records of the level
    shown beside it: the model never reads 10,000 routine requests as 10,000 errors."""
    return (template, level)


def _template_of(record: LogRecord) -> str:
    return record.template if isinstance(record.template, str) else mask_template(record.message)


def _epoch(timestamp: str) -> float:
    try:
        return datetime.fromisoformat(timestamp).timestamp()
    except ValueError:
        return 0.0


def pattern_priority(patterns: list[UpstreamPattern], scope: LogScope) -> list[UpstreamPattern]:
    """Every pattern once, in the order the model should get them: the largest group, then the
    most notable one, then the next largest, the next notable, and so on. Notable is severe
    first, then new in the window (began in its last three quarters), then rare. So a dominant
    group (a brute force of 368 identical failures) and a rare severe one (a single FATAL) both
    reach the first slots, neither hiding the other. Backends order their sample with it too,
    so the timeline holds exemplars of both."""
    start, end = _epoch(scope.start_time), _epoch(scope.end_time)
    onset_after = start + (end - start) / 4

    def notable(p: UpstreamPattern) -> tuple[int, int, int, str, str]:
        is_new = _epoch(p.first_seen) > onset_after
        return (-level_rank(p.level), 0 if is_new else 1, p.count, p.first_seen, p.template)

    def largest(p: UpstreamPattern) -> tuple[int, int, str, str]:
        return (-p.count, -level_rank(p.level), p.first_seen, p.template)

    out: dict[int, UpstreamPattern] = {}  # by identity: two entries of one template both stay
    for pair in zip(sorted(patterns, key=largest), sorted(patterns, key=notable), strict=True):
        for p in pair:
            out.setdefault(id(p), p)
    return list(out.values())


def _shown(ranked: list[UpstreamPattern], limit: int) -> list[UpstreamPattern]:
    # The patterns that fit, severest first; within a level in priority order (the largest,
    # the most notable, the next largest, ...).
    return sorted(ranked[:limit], key=lambda p: -level_rank(p.level))


def _bound_fields(
    fields: dict[str, JsonScalar], bounds: Bounds
) -> tuple[dict[str, JsonScalar], bool]:
    out: dict[str, JsonScalar] = {}
    was_cut = False
    for name, value in fields.items():
        if isinstance(value, str):
            value, c = cut(value, bounds.logs_field_chars)
            was_cut = was_cut or c
        out[name] = value
    return out, was_cut


def _select_events(
    records: list[LogRecord], order: dict[tuple[str, str], int], limit: int
) -> tuple[list[LogRecord], bool]:
    # First and last occurrence of each pattern in priority order, then the remaining slots by
    # severity, each severity's records sampled evenly over time (so the story spans the
    # window instead of crowding at onset); the timeline is then sorted by time.
    by_pattern: dict[tuple[str, str], list[LogRecord]] = {}
    for record in records:
        by_pattern.setdefault(pattern_key(_template_of(record), record.level), []).append(record)
    chosen: dict[int, LogRecord] = {}
    for key in sorted(by_pattern, key=lambda k: order.get(k, len(order))):
        group = sorted(by_pattern[key], key=lambda r: r.timestamp)
        for record in (group[0], group[-1]):
            if len(chosen) < limit:
                chosen.setdefault(id(record), record)
    by_rank: dict[int, list[LogRecord]] = {}
    for record in records:
        if id(record) not in chosen:
            by_rank.setdefault(level_rank(record.level), []).append(record)
    for rank in sorted(by_rank, reverse=True):
        take = min(limit - len(chosen), len(by_rank[rank]))
        if take <= 0:
            break
        group = sorted(by_rank[rank], key=lambda r: (r.timestamp, r.message))
        for i in range(take):
            record = group[(i * len(group)) // take]
            chosen[id(record)] = record
    timeline = sorted(chosen.values(), key=lambda r: (r.timestamp, r.message))
    return timeline, len(chosen) < len(records)


def project_logs(tool_call_id: str, upstream: LogsUpstream, bounds: Bounds) -> LogsResult:
    """Project a log source's answer; `NO_EVIDENCE` when nothing matched in scope."""
    patterns = upstream.patterns or _patterns_from_records(upstream.records)
    ranked = pattern_priority(patterns, upstream.scope)
    truncated = len(ranked) > bounds.logs_max_patterns
    out_patterns: list[LogPattern] = []
    for p in _shown(ranked, bounds.logs_max_patterns):
        template, c = cut(p.template, bounds.logs_template_chars)
        truncated = truncated or c
        (level, c1), (first, c2), (last, c3) = (
            cut(v, bounds.logs_field_chars) for v in (p.level, p.first_seen, p.last_seen)
        )
        truncated = truncated or c1 or c2 or c3
        out_patterns.append(
            LogPattern(
                template=template, count=p.count, level=level, first_seen=first, last_seen=last
            )
        )
    order = {pattern_key(p.template, p.level): i for i, p in enumerate(ranked)}
    selected, cut_records = _select_events(upstream.records, order, bounds.logs_max_events)
    events: list[LogEvent] = []
    for record in selected:
        message, c1 = cut(record.message, bounds.logs_message_chars)
        fields, c2 = _bound_fields(record.fields, bounds)
        (timestamp, c3), (level, c4), (service, c5) = (
            cut(v, bounds.logs_field_chars)
            for v in (record.timestamp, record.level, record.service)
        )
        truncated = truncated or c1 or c2 or c3 or c4 or c5
        events.append(
            LogEvent(
                timestamp=timestamp, level=level, service=service, message=message, fields=fields
            )
        )
    match_count = max(upstream.match_count, len(upstream.records))
    truncated = truncated or cut_records or len(events) < match_count
    lower_bound = upstream.match_count_lower_bound
    truncated = truncated or lower_bound
    found = match_count > 0
    events, cut_bytes = _bound_bytes(events, out_patterns, bounds)
    notes, cut_notes = _bound_notes(upstream.notes, bounds)
    truncated = truncated or cut_bytes or cut_notes
    return LogsResult(
        evidence_status=EvidenceStatus.EVIDENCE_FOUND if found else EvidenceStatus.NO_EVIDENCE,
        tool_call_id=tool_call_id,
        source_kind=upstream.source_kind,
        scope=upstream.scope,
        match_count=match_count,
        returned_count=len(events),
        patterns=out_patterns,
        events=events,
        truncated=truncated,
        match_count_lower_bound=True if lower_bound else UNSET,
        unparsed_lines=upstream.unparsed_lines or UNSET,
        unread_files=upstream.unread_files or UNSET,
        broken_files=upstream.broken_files or UNSET,
        skipped_files=upstream.skipped_files or UNSET,
        notes=notes,
        record_times=upstream.record_times,
    )


MAX_NOTES: Final = 4
_ENCODER: Final = msgspec.json.Encoder()


def _bound_notes(
    notes: list[str] | UnsetType, bounds: Bounds
) -> tuple[list[str] | UnsetType, bool]:
    if not notes:
        return UNSET, False
    out = [cut(note, bounds.logs_field_chars * 2) for note in notes[:MAX_NOTES]]
    return [text for text, _ in out], len(notes) > MAX_NOTES or any(c for _, c in out)


def _bound_bytes(
    events: list[LogEvent], patterns: list[LogPattern], bounds: Bounds
) -> tuple[list[LogEvent], bool]:
    """At most `logs_max_fields` fields per event, and events and patterns within
    `logs_max_bytes` of JSON (as MySQL's rows): the least severe events leave first, the
    largest of a level first (before, the largest of any level: a crash's stack in its fields
    made its exemplar the first to go, and routine INFO events were kept over it)."""
    was_cut = False
    if any(len(e.fields) > bounds.logs_max_fields for e in events):
        was_cut = True
        events = [
            msgspec.structs.replace(
                e, fields=dict(list(e.fields.items())[: bounds.logs_max_fields])
            )
            for e in events
        ]
    used = sum(len(_ENCODER.encode(p)) + 1 for p in patterns)
    sizes = [len(_ENCODER.encode(e)) + 1 for e in events]
    if used + sum(sizes) <= bounds.logs_max_bytes:
        return events, was_cut
    keep = set(range(len(events)))
    for i in sorted(keep, key=lambda i: (level_rank(events[i].level), -sizes[i], -i)):
        if used + sum(sizes[j] for j in keep) <= bounds.logs_max_bytes:
            break
        keep.discard(i)
    return [e for i, e in enumerate(events) if i in keep], True
