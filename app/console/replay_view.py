"""The replay pages: a recorded session re-projected with today's code (as `aci-evidence
replay` does, through `workers.replay_diff` as a library) with the diff per call, and two
sessions compared call by call (paired by tool call id; the Control Views' timings and
attempts are ignored, as replay ignores them).

Both work a page of calls at a time: the calls are listed by key name, their records read for
the page only, so a 10,000-call session costs one page of bodies per request.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from app.console.timeline import session_rows
from pipeline.inspect import BAD_JSON, call_record
from pipeline.record import CONTROL, MODEL, TOOL, read_records
from pipeline.redis_io import Redis
from pipeline.settings import Settings
from workers.replay_diff import IGNORED, Recording, Verdict, diff_json, render_value, reproject

__all__ = ["Comparison", "Pair", "ReplayPage", "compare_sessions", "replay_session"]

_VIEWS: Final = (("model", MODEL), ("control", CONTROL))


@dataclass
class ReplayPage:
    """One page of a session's replay verdicts."""

    session: str
    total: int
    page: int
    pages: int
    verdicts: list[Verdict]
    counts: Counter[str] = field(default_factory=Counter)


def _pages(total: int, per_page: int, page: int) -> tuple[int, int]:
    pages = max(1, -(-total // per_page))
    return min(max(1, page), pages), pages


async def replay_session(
    redis: Redis, settings: Settings, session: str, *, page: int, per_page: int, max_calls: int
) -> ReplayPage:
    """Re-project page `page` of a session's recorded calls and diff each with the record."""
    rows, _capped = await session_rows(redis, settings, session, max_calls=max_calls)
    page, pages = _pages(len(rows), per_page, page)
    shown = rows[(page - 1) * per_page : page * per_page]
    pairs = [(session, r.tool_call_id) for r in shown]
    records = await read_records(redis, settings.keys(), pairs)
    verdicts = [
        _reproject(Recording(session=session, tool_call_id=call, fields=fields), settings)
        for (_s, call), fields in zip(pairs, records, strict=True)
        if fields
    ]
    return ReplayPage(
        session=session,
        total=len(rows),
        page=page,
        pages=pages,
        verdicts=verdicts,
        counts=Counter(v.outcome for v in verdicts),
    )


def _reproject(rec: Recording, settings: Settings) -> Verdict:
    try:
        return reproject(rec, settings)
    except RecursionError:  # a body nested past the recursion limit: one failed row
        return Verdict(
            session=rec.session, tool_call_id=rec.tool_call_id, tool=rec.text(TOOL),
            outcome="failed", reason="a recorded body is nested too deep to decode",
        )  # fmt: skip


@dataclass
class Pair:
    """One tool call id in two sessions, and what differs between their views."""

    tool_call_id: str
    in_a: bool
    in_b: bool
    changes: list[tuple[str, str, str, str]]  # (view, path, a, b)

    @property
    def outcome(self) -> str:
        if not (self.in_a and self.in_b):
            return "only in A" if self.in_a else "only in B"
        return "changed" if self.changes else "identical"


@dataclass
class Comparison:
    """A page of two sessions compared."""

    a: str
    b: str
    total: int
    page: int
    pages: int
    pairs: list[Pair]
    counts: Counter[str] = field(default_factory=Counter)


def _view(fields: dict[str, bytes], name: str, field_name: str) -> Any:
    try:
        value = msgspec.json.decode(fields.get(field_name) or b"null")
    except BAD_JSON:
        return (fields.get(field_name) or b"").decode("utf-8", "replace")
    ignored = IGNORED.get(name, frozenset())
    if isinstance(value, dict) and ignored:
        value = {k: v for k, v in value.items() if k not in ignored | {"session_id"}}
    return value


# A log call's window is resolved from the clock when it is asked: two sessions asking the same
# thing at different times differ there and nowhere else (like `replay --reexecute`).
_CLOCK_PATHS: Final = frozenset({"$.scope.start_time", "$.scope.end_time"})


def _changes(a: dict[str, bytes], b: dict[str, bytes]) -> list[tuple[str, str, str, str]]:
    out = []
    for name, field_name in _VIEWS:
        for path, old, new in diff_json(_view(a, name, field_name), _view(b, name, field_name)):
            if path in _CLOCK_PATHS:
                continue
            out.append((name, path, render_value(old, 200), render_value(new, 200)))
    return out


async def compare_sessions(
    redis: Redis, settings: Settings, a: str, b: str, *, page: int, per_page: int, max_calls: int
) -> Comparison:
    """Page `page` of the calls of sessions `a` and `b`, paired by tool call id."""
    rows_a, _ = await session_rows(redis, settings, a, max_calls=max_calls)
    rows_b, _ = await session_rows(redis, settings, b, max_calls=max_calls)
    ids_b = {r.tool_call_id for r in rows_b}
    order = [r.tool_call_id for r in rows_a]
    seen = set(order)
    order += [r.tool_call_id for r in rows_b if r.tool_call_id not in seen]
    page, pages = _pages(len(order), per_page, page)
    shown = order[(page - 1) * per_page : page * per_page]
    keys = settings.keys()
    ids_a = seen
    pairs: list[Pair] = []
    for call in shown:
        rec_a = await call_record(redis, keys, a, call) if call in ids_a else {}
        rec_b = await call_record(redis, keys, b, call) if call in ids_b else {}
        changes = _changes(rec_a, rec_b) if rec_a and rec_b else []
        pairs.append(Pair(tool_call_id=call, in_a=bool(rec_a), in_b=bool(rec_b), changes=changes))
    return Comparison(
        a=a,
        b=b,
        total=len(order),
        page=page,
        pages=pages,
        pairs=pairs,
        counts=Counter(p.outcome for p in pairs),
    )
