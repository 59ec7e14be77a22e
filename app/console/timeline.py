"""A session's timeline: each call a bar from its submit to READY/ERROR (or to now while it is
in flight), split into its queue, execute and project stages as its Control View timed them;
`duplicate_of`, GAVE_UP and error codes shown on the bar.

Calls are found by key name (`pipeline.inspect.session_call_ids`, at most `max_calls`), their
state read without bodies, ordered by submission and cut into pages; only the page's Control
Views are decoded.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from pipeline.inspect import BAD_JSON, CallRow, call_controls, call_rows, session_call_ids
from pipeline.redis_io import Redis
from pipeline.settings import Settings

__all__ = ["Bar", "Timeline", "session_rows", "timeline"]

_MIN_WIDTH: Final = 0.4  # percent: an instant call stays visible


@dataclass
class Bar:
    """One call on the timeline (positions in percent of the page's time span)."""

    row: CallRow
    left: float
    width: float
    queue: float  # shares of the bar, in percent
    execute: float
    project: float
    total_ms: float | None
    error_code: str
    attempts: int
    truncated: bool
    asked: str = ""  # the call's question, topic and query, or SQL (its recorded scope)

    @property
    def in_flight(self) -> bool:
        return self.row.status not in ("READY", "ERROR")


@dataclass
class Timeline:
    """One page of a session's calls."""

    session: str
    total: int
    capped: bool
    page: int
    pages: int
    start_ms: int
    end_ms: int
    bars: list[Bar]
    statuses: dict[str, int]
    evidence: dict[str, int]


async def session_rows(
    redis: Redis, settings: Settings, session: str, *, max_calls: int
) -> tuple[list[CallRow], bool]:
    """Every call of a session (at most `max_calls`) in submission order; whether capped."""
    keys = settings.keys()
    ids = await session_call_ids(redis, keys, session, limit=max_calls)
    rows = await call_rows(redis, keys, session, ids)
    rows.sort(key=lambda r: r.order)
    return rows, len(ids) >= max_calls


def _control(row: CallRow) -> dict[str, Any]:
    try:
        value = msgspec.json.decode(row.control or b"{}")
    except BAD_JSON:
        return {}
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


_ASKED_CHARS: Final = 300


def _asked(cv: dict[str, Any]) -> str:
    """What the call asked, from its recorded scope: a question; a topic, query and lookback;
    or a data source and its SQL with params (cut to `_ASKED_CHARS`)."""
    scope = cv.get("scope")
    if not isinstance(scope, dict):
        return ""
    if "sql" in scope:
        params = scope.get("params") or []
        text = f"{scope.get('data_source', '')}: {scope.get('sql', '')}"
        text += f" · params {msgspec.json.encode(params).decode()}" if params else ""
    elif "topic" in scope:
        text = f"{scope.get('topic', '')} · {scope.get('query', '') or '(any)'}"
        if scope.get("lookback_minutes") is not None:
            text += f" · {scope['lookback_minutes']} min"
    else:
        text = str(scope.get("query", ""))
    return text if len(text) <= _ASKED_CHARS else text[: _ASKED_CHARS - 1] + "…"


def _bar(row: CallRow, start: int, span: int, now: int) -> Bar:
    cv = _control(row)
    found = cv.get("timings")
    timings: dict[str, Any] = found if isinstance(found, dict) else {}
    t0 = row.submitted_ms or start
    t1 = row.finished_ms or now
    left = 100.0 * (t0 - start) / span
    width = max(_MIN_WIDTH, 100.0 * max(0, t1 - t0) / span)
    stages = [_number(timings.get(k)) for k in ("queue_ms", "execute_ms", "project_ms")]
    whole = sum(stages)
    shares = [100.0 * s / whole for s in stages] if whole else [0.0, 0.0, 0.0]
    total = timings.get("total_ms")
    attempts = cv.get("attempts")
    return Bar(
        row=row,
        left=min(left, 100.0 - _MIN_WIDTH),
        width=min(width, 100.0 - min(left, 100.0 - _MIN_WIDTH)),
        queue=shares[0],
        execute=shares[1],
        project=shares[2],
        total_ms=_number(total) if total is not None else None,
        error_code=str(cv.get("error_code") or ""),
        attempts=attempts if isinstance(attempts, int) else 1,
        truncated=cv.get("truncated") is True,
        asked=_asked(cv),
    )


async def timeline(
    redis: Redis, settings: Settings, session: str, *, page: int, per_page: int, max_calls: int
) -> Timeline:
    """Page `page` (from 1) of a session's timeline."""
    rows, capped = await session_rows(redis, settings, session, max_calls=max_calls)
    pages = max(1, -(-len(rows) // per_page))
    page = min(max(1, page), pages)
    page_rows = rows[(page - 1) * per_page : page * per_page]
    shown = await call_controls(redis, settings.keys(), page_rows)
    now = int(time.time() * 1000)
    start = min((r.submitted_ms or now for r in shown), default=now)
    end = max((r.finished_ms or now for r in shown), default=now)
    span = max(1, end - start)
    statuses: dict[str, int] = {}
    evidence: dict[str, int] = {}
    for r in rows:
        statuses[r.status or "?"] = statuses.get(r.status or "?", 0) + 1
        if r.evidence:
            evidence[r.evidence] = evidence.get(r.evidence, 0) + 1
    return Timeline(
        session=session,
        total=len(rows),
        capped=capped,
        page=page,
        pages=pages,
        start_ms=start,
        end_ms=end,
        bars=[_bar(r, start, span, now) for r in shown],
        statuses=statuses,
        evidence=evidence,
    )
