"""The console's pages and fragments, one GET handler each. A page renders its whole
template; its `/fragments/…` twin renders only the part the browser swaps in when live
updates arrive (never the whole page). Query parameters carry every filter, so each URL is a
permalink.
"""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator
from typing import Any, Final

from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import Receive, Scope, Send

from app.console.invocation import load_invocation
from app.console.live import lifecycle_events
from app.console.render import visible
from app.console.replay_view import compare_sessions, replay_session
from app.console.sessions import Filters, search_calls, session_summaries
from app.console.timeline import timeline
from pipeline.inspect import DeadLetter, dead_letters, digits, session_count
from pipeline.keys import is_valid_session_id
from pipeline.redis_io import PipelineError, RedisUnavailable
from pipeline.status import collect_status

__all__ = ["ROUTES", "SearchesBusy", "redis_failed", "searches_busy"]

_STATUSES: Final = ("", "PROJECTING", "READY", "ERROR")
_EVIDENCE: Final = ("", "EVIDENCE_FOUND", "NO_EVIDENCE", "ERROR")
_TOOLS: Final = ("", "lookup_knowledge", "query_logs", "query_mysql")
_DEAD_SHOWN: Final = 50
_PARAM_MAX: Final = 512


def _param(request: Request, name: str) -> str:
    return request.query_params.get(name, "").strip()[:_PARAM_MAX]


def _page(request: Request) -> int:
    return min(digits(_param(request, "page")) or 1, 100_000)


def _session(request: Request, name: str = "id") -> str | None:
    value = _param(request, name)
    return value if is_valid_session_id(value) else None


def _render(request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
    state = request.app.state
    base = request.scope.get("root_path", "").rstrip("/")
    context.update(base=base, config=state.config, path=request.url.path)
    response: Response = state.templates.TemplateResponse(
        request, name, context, status_code=status_code
    )
    return response


def _bad(request: Request, message: str) -> Response:
    return _render(request, "error.html", status_code=400, message=message)


async def redis_failed(request: Request, exc: Exception) -> Response:
    """Redis down, or refusing a read: a page that says so (never a traceback, a host or the
    URL; the code of a refusal only, e.g. NOPERM)."""
    if isinstance(exc, RedisUnavailable):
        title = "Redis is unreachable"
        message = (
            "The console cannot reach Redis right now: reload this page in a moment. The "
            "console only reads, so workers and clients are not affected by it."
        )
    else:
        code = exc.args[0] if exc.args and str(exc.args[0]).isalpha() else "ERR"
        title = "Redis refused a read"
        message = (
            f"Redis refused a read ({code}). The console needs the auditor user of "
            "`aci-evidence acl`, which may read every key of the prefix."
        )
    return _render(request, "error.html", status_code=503, message=message, title=title)


class SearchesBusy(Exception):
    """`max_searches` searches are running already."""


async def searches_busy(request: Request, exc: Exception) -> Response:
    """A search beyond `max_searches` at once: a 503 page that says to retry."""
    response = _render(
        request, "error.html", status_code=503, title="The console is busy",
        message=(
            f"{request.app.state.config.max_searches} searches are running already (each may "
            "read the whole keyspace): reload this page in a moment."
        ),
    )  # fmt: skip
    response.headers["retry-after"] = "5"
    return response


async def _sessions_context(request: Request) -> dict[str, Any]:
    state = request.app.state
    config, settings, redis = state.config, state.settings, state.redis
    filters = Filters(
        q=_param(request, "q"),
        tool=_param(request, "tool"),
        status=_param(request, "status"),
        evidence=_param(request, "evidence"),
        text=_param(request, "text"),
    )
    page = _page(request)
    context: dict[str, Any] = {
        "filters": filters, "page": page, "statuses": _STATUSES, "evidences": _EVIDENCE,
        "tools": _TOOLS,
    }  # fmt: skip
    if filters.any:
        if state.searches >= config.max_searches:
            raise SearchesBusy
        state.searches += 1
        try:
            hits = await search_calls(
                redis, settings, filters, window=config.window, text_budget=config.text_budget
            )
        finally:
            state.searches -= 1
        per = config.hits_per_page
        page = min(page, max(1, -(-len(hits) // per)))
        context["page"] = page
        context.update(
            hits=hits[(page - 1) * per : page * per], total=len(hits), pages=-(-len(hits) // per)
        )
    else:
        per = config.sessions_per_page
        total = await session_count(redis, settings.keys())
        # Clamped to the last page: `?page=100000` would ask each partition for its newest
        # 2.5 million sessions, and answer an empty page that reads "no session yet".
        page = min(page, max(1, -(-total // per)))
        context["page"] = page
        rows = await session_summaries(
            redis, settings, offset=(page - 1) * per, limit=per, window=config.window
        )
        context.update(sessions=rows, total=total, pages=-(-total // per), prefix=settings.prefix)
    return context


async def sessions_page(request: Request) -> Response:
    return _render(request, "sessions.html", **(await _sessions_context(request)))


async def sessions_fragment(request: Request) -> Response:
    return _render(request, "_sessions.html", **(await _sessions_context(request)))


async def _timeline(request: Request) -> dict[str, Any] | None:
    session = _session(request)
    if session is None:
        return None
    state = request.app.state
    config = state.config
    found = await timeline(
        state.redis, state.settings, session, page=_page(request),
        per_page=config.calls_per_page, max_calls=config.max_calls,
    )  # fmt: skip
    return {"t": found}


async def session_page(request: Request) -> Response:
    context = await _timeline(request)
    if context is None:
        return _bad(request, "a session id is 1-128 letters, digits, '.', '_' or '-'")
    return _render(request, "session.html", **context)


async def timeline_fragment(request: Request) -> Response:
    context = await _timeline(request)
    if context is None:
        return _bad(request, "a session id is 1-128 letters, digits, '.', '_' or '-'")
    return _render(request, "_timeline.html", **context)


async def call_page(request: Request) -> Response:
    session, call = _session(request, "session"), _param(request, "id")
    if session is None or not call:
        return _bad(request, "a call is named by ?session=…&id=…")
    state = request.app.state
    inv = await load_invocation(state.redis, state.settings, session, call)
    return _render(request, "call.html", status_code=200 if inv.found else 404, inv=inv)


def replay_command(letter: DeadLetter) -> str | None:
    """The CLI command that would replay a dead letter's call (re-submitted under a new
    session for live workers), or None when the letter does not say whose call it was."""
    if not is_valid_session_id(letter.session) or not letter.tool_call_id:
        return None
    if visible(letter.tool_call_id) != letter.tool_call_id:
        return None  # the page would spell its controls out: not what a terminal would run
    into = (letter.session[:120] + "-replay")[:128]
    call = letter.tool_call_id
    # `--id=-rf`: an id that starts with '-' is the value, never read as a flag.
    ids = [f"--id={call}"] if call.startswith("-") else ["--id", call]
    return shlex.join(["aci-evidence", "replay", "--session", letter.session, *ids, "--into", into])


async def _fleet(request: Request) -> dict[str, Any]:
    state = request.app.state
    report = await collect_status(state.redis, state.settings)
    letters = await dead_letters(state.redis, state.settings.keys(), count=_DEAD_SHOWN)
    return {
        "report": report,
        "letters": [(d, replay_command(d)) for d in letters],
        "partitions": state.settings.partitions,
    }


async def fleet_page(request: Request) -> Response:
    return _render(request, "fleet.html", **(await _fleet(request)))


async def fleet_fragment(request: Request) -> Response:
    return _render(request, "_fleet.html", **(await _fleet(request)))


async def replay_page(request: Request) -> Response:
    state = request.app.state
    config = state.config
    session, a, b = _session(request, "session"), _session(request, "a"), _session(request, "b")
    context: dict[str, Any] = {"replay": None, "comparison": None,
                               "session": session or "", "a": a or "", "b": b or ""}  # fmt: skip
    given = [n for n in ("session", "a", "b") if _param(request, n)]
    if any(context[n] == "" for n in given):  # said plainly, not an empty form
        context["error"] = "a session id is 1-128 letters, digits, '.', '_' or '-'"
    elif bool(a) != bool(b):
        context["error"] = "a comparison needs both sessions, A and B"
    if session is not None:
        context["replay"] = await replay_session(
            state.redis, state.settings, session, page=_page(request),
            per_page=config.replay_per_page, max_calls=config.max_calls,
        )  # fmt: skip
    elif a is not None and b is not None:
        context["comparison"] = await compare_sessions(
            state.redis, state.settings, a, b, page=_page(request),
            per_page=config.replay_per_page, max_calls=config.max_calls,
        )  # fmt: skip
    return _render(request, "replay.html", **context)


class _CountedStream(EventSourceResponse):
    """An SSE response that frees its slot among `max_streams` when it ends, however."""

    def __init__(self, content: Any, state: Any, **kw: Any) -> None:
        super().__init__(content, **kw)
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.state.streams -= 1


async def events(request: Request) -> Response:
    state = request.app.state
    session = _session(request, "session")
    if _param(request, "session") and session is None:
        return PlainTextResponse("bad session id", status_code=400)
    if state.streams >= state.config.max_streams:
        # EventSource retries on its own; the page says "reconnecting" meanwhile.
        return PlainTextResponse(
            "too many live streams are open; close a tab", status_code=503,
            headers={"retry-after": "10"},
        )  # fmt: skip
    after = request.headers.get("last-event-id") or _param(request, "after") or None
    stream = lifecycle_events(state.redis, state.settings, session=session, last_event_id=after)
    state.streams += 1
    return _CountedStream(until_redis_fails(stream), state, ping=15)


async def until_redis_fails(stream: AsyncIterator[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    """`stream`'s events; when Redis fails, one `unavailable` event (the page says so) and
    the end: the browser reconnects after `retry` ms, without a traceback in the log."""
    try:
        async for event in stream:
            yield event
    except PipelineError:
        yield {"event": "unavailable", "data": "redis", "retry": 5000}


async def health(request: Request) -> Response:
    return PlainTextResponse("ok")


ROUTES: Final = (
    ("/", sessions_page),
    ("/fragments/sessions", sessions_fragment),
    ("/session", session_page),
    ("/fragments/timeline", timeline_fragment),
    ("/call", call_page),
    ("/fleet", fleet_page),
    ("/fragments/fleet", fleet_fragment),
    ("/replay", replay_page),
    ("/events", events),
    ("/healthz", health),
)
