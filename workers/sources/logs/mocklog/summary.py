"""The MOCK source's answer over its matches: templates mined per call, a bounded sample.

The same steps as the real backends' `records.Digest`: figures per masked message and level,
one mining of the distinct masked messages in the order of their first record
(`templates.mine`), the figures merged per template and level, and a sample holding the first
and last record of each pattern in the projector's priority (`contracts.logs.pattern_priority`),
then the most severe of the rest spread evenly over time.
"""

from __future__ import annotations

from contracts.logs import LogRecord, UpstreamPattern, pattern_key, pattern_priority
from contracts.results import LogScope
from workers.sources.logs.mocklog.index import TopicIndex
from workers.sources.logs.templates import mine

__all__ = ["summarise"]


class _Stats:
    """Running figures of one masked message (then of one template) and level over the
    matches (`contracts.logs.pattern_key`)."""

    __slots__ = ("count", "first", "last")

    def __init__(self, position: int) -> None:
        self.count, self.first, self.last = 1, position, position


def _first_key(ix: TopicIndex, position: int) -> tuple[int, str]:
    record = ix.records[position]
    return (record.epoch_ms, record.message)  # as `records.Entry.key`


def _key_stats(ix: TopicIndex, matches: list[int]) -> dict[tuple[str, str], _Stats]:
    stats: dict[tuple[str, str], _Stats] = {}
    keys, records = ix.keys, ix.records
    for i in matches:
        key = pattern_key(keys[i], records[i].level)
        found = stats.get(key)
        if found is None:
            stats[key] = _Stats(i)
            continue
        found.count += 1
        found.last = i
        if _first_key(ix, i) < _first_key(ix, found.first):
            found.first = i
    return stats


def _template_stats(
    ix: TopicIndex, matches: list[int]
) -> tuple[dict[tuple[str, str], _Stats], dict[str, str]]:
    per_key = _key_stats(ix, matches)
    first: dict[str, int] = {}
    for (masked, _level), st in per_key.items():
        if masked not in first or _first_key(ix, st.first) < _first_key(ix, first[masked]):
            first[masked] = st.first
    template_of = mine(sorted(first, key=lambda m: (_first_key(ix, first[m]), m)))
    stats: dict[tuple[str, str], _Stats] = {}
    for key in sorted(per_key, key=lambda k: (_first_key(ix, per_key[k].first), k)):
        st = per_key[key]
        into_key = pattern_key(template_of[key[0]], key[1])
        into = stats.get(into_key)
        if into is None:
            stats[into_key] = st
            continue
        into.count += st.count
        into.first = min(into.first, st.first, key=lambda i: _first_key(ix, i))
        into.last = max(into.last, st.last)
    return stats, template_of


def _spread(candidates: list[int], room: int) -> list[int]:
    if len(candidates) <= room:
        return candidates
    step = len(candidates) / room
    return [candidates[int(k * step)] for k in range(room)]


def _sample(
    ix: TopicIndex,
    matches: list[int],
    stats: dict[tuple[str, str], _Stats],
    order: list[UpstreamPattern],
    limit: int,
) -> list[int]:
    chosen: set[int] = set()
    for pattern in order:
        st = stats[pattern_key(pattern.template, pattern.level)]
        for i in (st.first, st.last):
            if len(chosen) < limit:
                chosen.add(i)
    for rank in sorted({ix.ranks[i] for i in matches}, reverse=True):
        room = limit - len(chosen)
        if room <= 0:
            break
        rest = [i for i in matches if ix.ranks[i] == rank and i not in chosen]
        chosen.update(_spread(rest, room))
    return sorted(chosen)


def summarise(
    ix: TopicIndex, matches: list[int], limit: int, scope: LogScope
) -> tuple[list[UpstreamPattern], list[LogRecord]]:
    """Templates over all matches, and a bounded sample of matched records tagged with them."""
    stats, template_of = _template_stats(ix, matches)
    records = ix.records
    patterns = [
        UpstreamPattern(
            template=template,
            count=st.count,
            level=level,
            first_seen=records[st.first].timestamp,
            last_seen=records[st.last].timestamp,
        )
        for (template, level), st in sorted(stats.items(), key=lambda kv: (kv[1].first, kv[0]))
    ]
    order = pattern_priority(patterns, scope)
    out = [
        LogRecord(
            timestamp=records[i].timestamp,
            level=records[i].level,
            service=records[i].service,
            message=records[i].message,
            fields=dict(records[i].fields),
            template=template_of[ix.keys[i]],
        )
        for i in _sample(ix, matches, stats, order, limit)
    ]
    return patterns, out
