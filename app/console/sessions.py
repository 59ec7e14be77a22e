"""The sessions page's data: sessions newest first with their counts, and the search over
calls (session id, tool call id, tool, status, evidence status, Model Observation text).

Counts come from the newest `window` entries of each partition's lifecycle stream (one
bounded pass per page, paged through Redis): per session, the calls submitted, finished
READY or ERROR, still in flight, per evidence status, and their durations from submit to the
final entry. A session older than the window shows what the window still holds.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from pipeline.inspect import (
    BAD_JSON,
    call_rows,
    digits,
    find_call_sessions,
    lifecycle_window,
    recent_sessions,
    session_call_ids,
    view_page,
)
from pipeline.keys import is_valid_session_id
from pipeline.redis_io import Redis
from pipeline.settings import Settings

__all__ = ["Filters", "SearchHit", "SessionSummary", "search_calls", "session_summaries"]

_TEXT_SESSIONS: Final = 50  # sessions whose observations a text search reads
_TEXT_ENTRIES: Final = 2000  # entries of each of them
TEXT_BUDGET: Final = 10_000  # observations a text search reads in all (was 100,000)
_SNIPPET: Final = 160
_CONTROL_COUNTED: Final = 1000  # Control Views read for a session older than the window


@dataclass
class SessionSummary:
    """One session's row on the sessions page."""

    session: str
    last_ms: int
    submitted: int = 0
    ready: int = 0
    error: int = 0
    evidence: Counter[str] = field(default_factory=Counter)
    durations: list[int] = field(default_factory=list)
    source: str = "lifecycle"  # or "control": counted from its Control View stream
    capped: bool = False  # more calls than were counted

    @property
    def finished(self) -> int:
        return self.ready + self.error

    @property
    def in_flight(self) -> int:
        return max(0, self.submitted - self.finished)

    @property
    def p50_ms(self) -> int | None:
        ordered = sorted(self.durations)
        return ordered[len(ordered) // 2] if ordered else None

    @property
    def max_ms(self) -> int | None:
        return max(self.durations) if self.durations else None


def _at(text: str | None) -> int:
    return digits(text) or 0


async def session_summaries(
    redis: Redis, settings: Settings, *, offset: int, limit: int, window: int
) -> list[SessionSummary]:
    """A page of sessions, newest first, with their counts over the lifecycle window."""
    keys = settings.keys()
    page = await recent_sessions(redis, keys, offset=offset, limit=limit)
    rows = {name: SessionSummary(session=name, last_ms=last) for name, last in page}
    wanted: dict[int, set[str]] = {}
    for name in rows:
        wanted.setdefault(keys.partition_of(name), set()).add(name)
    for index, names in wanted.items():
        submits: dict[tuple[str, str], int] = {}
        finals: dict[tuple[str, str], int] = {}
        async for batch in lifecycle_window(redis, keys.parts[index], limit=window):
            for _eid, entry in batch:
                if entry.session not in names or entry.tool_call_id is None:
                    continue
                row = rows[entry.session]
                call = (entry.session, entry.tool_call_id)
                if entry.submitted:
                    row.submitted += 1
                    submits[call] = _at(entry.at)
                    continue
                row.ready += entry.status == "READY"
                row.error += entry.status == "ERROR"
                row.evidence[entry.evidence or "?"] += 1
                finals[call] = _at(entry.at)
        for call, done in finals.items():
            start = submits.get(call)
            if start and done >= start:
                rows[call[0]].durations.append(done - start)
    for row in rows.values():
        if not row.submitted and not row.finished:  # older than the window
            await _from_control(redis, settings, row)
    return [rows[name] for name, _ in page]


async def _from_control(redis: Redis, settings: Settings, row: SessionSummary) -> None:
    """Counts of a session the lifecycle window no longer holds: its newest Control Views
    (finished calls only: what is in flight is not known there)."""
    page = await view_page(redis, settings.keys().control(row.session), count=_CONTROL_COUNTED)
    row.source, row.capped = "control", len(page) >= _CONTROL_COUNTED
    for _eid, entry in page:
        try:
            view = msgspec.json.decode(entry.data or b"null")
        except BAD_JSON:
            continue
        if not isinstance(view, dict):
            continue
        status = view.get("status")
        row.submitted += 1
        row.ready += status == "READY"
        row.error += status == "ERROR"
        row.evidence[str(view.get("evidence_status") or "?")] += 1
        total = (view.get("timings") or {}).get("total_ms")
        if isinstance(total, int | float) and math.isfinite(total):  # JSON's 1e999 is inf
            row.durations.append(int(total))


class Filters(msgspec.Struct, frozen=True, kw_only=True):
    """What a search asks for (every field optional; all given ones must match)."""

    q: str = ""  # a session id or tool call id, or a part of one
    tool: str = ""
    status: str = ""  # lifecycle: PROJECTING, READY, ERROR
    evidence: str = ""  # EVIDENCE_FOUND, NO_EVIDENCE, ERROR
    text: str = ""  # in the Model Observation

    @property
    def any(self) -> bool:
        return bool(self.q or self.tool or self.status or self.evidence or self.text)


@dataclass
class SearchHit:
    """One call a search found."""

    session: str
    tool_call_id: str
    tool: str
    status: str
    evidence: str
    at_ms: int
    snippet: str = ""


def _admits(f: Filters, hit: SearchHit) -> bool:
    q = f.q.casefold()
    return (
        (not q or q in hit.session.casefold() or q in hit.tool_call_id.casefold())
        and (not f.tool or hit.tool == f.tool)
        and (not f.status or hit.status == f.status)
        and (not f.evidence or hit.evidence == f.evidence)
    )


async def _window_hits(
    redis: Redis, settings: Settings, window: int
) -> dict[tuple[str, str], SearchHit]:
    """Each call of the lifecycle windows in its latest state (the first seen, newest first)."""
    latest: dict[tuple[str, str], SearchHit] = {}
    for part in settings.keys().parts:
        async for batch in lifecycle_window(redis, part, limit=window):
            for _eid, e in batch:
                if e.session is None or e.tool_call_id is None:
                    continue
                call = (e.session, e.tool_call_id)
                if call not in latest:
                    latest[call] = SearchHit(
                        session=e.session,
                        tool_call_id=e.tool_call_id,
                        tool=e.tool or "",
                        status=e.status or "",
                        evidence=e.evidence or "",
                        at_ms=_at(e.at),
                    )
    return latest


async def _exact_call(redis: Redis, settings: Settings, call_id: str) -> list[SearchHit]:
    keys = settings.keys()
    hits = []
    for session in await find_call_sessions(redis, keys, call_id, limit=50):
        for row in await call_rows(redis, keys, session, [call_id]):
            at = row.finished_ms or row.submitted_ms or 0
            hits.append(
                SearchHit(
                    session=session,
                    tool_call_id=call_id,
                    tool=row.tool,
                    status=row.status,
                    evidence=row.evidence,
                    at_ms=at,
                )
            )
    return hits


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [] if value is None or isinstance(value, bool) else [str(value)]


def _snippet(text: str, needle: str) -> str | None:
    at = text.casefold().find(needle.casefold())
    if at < 0:
        return None
    start = max(0, at - _SNIPPET // 2)
    return ("…" if start else "") + text[start : start + _SNIPPET] + "…"


async def _text_hits(
    redis: Redis, settings: Settings, sessions: list[str], needle: str, budget: int
) -> dict[tuple[str, str], str]:
    keys, found = settings.keys(), {}
    for session in sessions[:_TEXT_SESSIONS]:
        after = "-"
        read = 0
        while read < _TEXT_ENTRIES and budget > 0:
            count = min(500, budget)
            page = await view_page(redis, keys.model(session), after=after, count=count)
            budget -= len(page)
            for eid, entry in page:
                after = eid
                try:
                    value = msgspec.json.decode(entry.data or b"null")
                except BAD_JSON:
                    value = (entry.data or b"").decode("utf-8", "replace")
                snippet = _snippet(" ".join(_strings(value)), needle)
                if snippet is not None:
                    found[(session, entry.tool_call_id)] = snippet
            read += len(page)
            if len(page) < count:
                break
    return found


async def search_calls(
    redis: Redis,
    settings: Settings,
    filters: Filters,
    *,
    window: int,
    text_budget: int = TEXT_BUDGET,
) -> list[SearchHit]:
    """The calls matching `filters`, newest first: over the lifecycle windows, plus the calls
    holding exactly the id searched for (found by key name, even when older than the window);
    `text` reads the Model Observations of the newest sessions matching the rest, at most
    `text_budget` of them in all."""
    latest = await _window_hits(redis, settings, window)
    hits = [h for h in latest.values() if _admits(filters, h)]
    if filters.q and not any(h.tool_call_id == filters.q for h in hits):
        hits += [h for h in await _exact_call(redis, settings, filters.q) if _admits(filters, h)]
    if filters.q and is_valid_session_id(filters.q) and not hits:
        hits += [
            h for h in (await _exact_session(redis, settings, filters.q)) if _admits(filters, h)
        ]
    if filters.text:
        order: list[str] = []
        for h in sorted(hits, key=lambda h: -h.at_ms):
            if h.session not in order:
                order.append(h.session)
        snippets = await _text_hits(redis, settings, order, filters.text, text_budget)
        hits = [h for h in hits if (h.session, h.tool_call_id) in snippets]
        for h in hits:
            h.snippet = snippets[(h.session, h.tool_call_id)]
    hits.sort(key=lambda h: (-h.at_ms, h.session, h.tool_call_id))
    return hits


async def _exact_session(redis: Redis, settings: Settings, session: str) -> list[SearchHit]:
    """A session older than the window, by its exact id: its calls by key name."""
    keys = settings.keys()
    ids = await session_call_ids(redis, keys, session, limit=2000)
    return [
        SearchHit(
            session=session,
            tool_call_id=r.tool_call_id,
            tool=r.tool,
            status=r.status,
            evidence=r.evidence,
            at_ms=r.finished_ms or r.submitted_ms or 0,
        )
        for r in await call_rows(redis, keys, session, ids)
    ]
