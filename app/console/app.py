"""The console as an ASGI application: `create_app(settings, url)` for embedding, served by
`aci-evidence console` (`app.console.serve`).

Read-only by construction: every route is GET (HEAD answers too; anything else is 405), no
page renders a form that writes, and it reads Redis only through `pipeline.inspect`,
`pipeline.status.collect_status` and `workers.replay_diff`, which the `auditor` Redis user
may run. A bearer token (`Authorization: Bearer …`, or once as `?token=…`, which sets a
cookie) guards it when one is configured. Requests another site's page made the browser
send (Fetch Metadata) are refused, but for a link followed to a page. Links are built under
the request's root path, so it works behind a proxy prefix.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
from collections.abc import AsyncIterator
from http.cookies import CookieError, SimpleCookie
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode

import msgspec
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.console import handlers
from app.console.render import environment
from pipeline.redis_io import PipelineError, Redis, open_redis
from pipeline.settings import Settings

__all__ = ["ConsoleConfig", "cookie_value", "create_app"]

STATIC: Final = Path(__file__).parent / "static"
COOKIE: Final = "aci_console_token"
_COOKIE_LABEL: Final = b"aci-evidence console cookie v1"
# No inline script or style anywhere: the vendored script and sheet only.
_CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
_HEADERS: Final = {
    "content-security-policy": _CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
    # Another site may neither embed an answer nor keep a handle on a console window.
    "cross-origin-resource-policy": "same-origin",
    "cross-origin-opener-policy": "same-origin",
}


class ConsoleConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The console's own bounds: the lifecycle entries per partition its counts and search
    read, the calls of one session it lists, and the rows per page."""

    token: str | None = None
    window: int = 20_000
    max_calls: int = 20_000
    sessions_per_page: int = 25
    calls_per_page: int = 200
    hits_per_page: int = 50
    replay_per_page: int = 100
    # Open live streams at once: each holds a pooled Redis connection while its XREAD blocks
    # (the pool has 64), so more tabs than this get a 503 instead of starving every page.
    max_streams: int = 32
    # Searches at once: each may SCAN the whole keyspace (an exact tool call id is looked up
    # by key name, 20 s at a million retained calls); the next one is a 503, not one more walk.
    max_searches: int = 2
    text_budget: int = 10_000  # Model Observations one text search reads, over its sessions
    # The Host names it answers (any port), None for any. `aci-evidence console` on loopback
    # without a token names the loopback ones: a web page whose name an attacker re-points
    # at 127.0.0.1 (DNS rebinding) must not read the console from a victim's browser.
    allowed_hosts: tuple[str, ...] | None = None


def cookie_value(token: str) -> str:
    """What the console's cookie holds: HMAC-SHA256 of a fixed label keyed by the token (hex),
    a value good for this console's cookie only. Browsers send a cookie to every port of its
    host name, so the cookie must never carry the token itself, which also opens `Authorization:
    Bearer` and any other service sharing it."""
    return hmac.new(token.encode(), _COOKIE_LABEL, hashlib.sha256).hexdigest()


class _Guard:
    """Security headers on every answer; loopback Host names (unless a token guards it); no
    request another site made; the bearer token when one is configured."""

    def __init__(
        self, app: ASGIApp, token: str | None, hosts: tuple[str, ...] | None = None
    ) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.cookie = cookie_value(token) if token else None
        self.hosts = None if hosts is None else frozenset(h.lower().strip("[]") for h in hosts)

    def _host_allowed(self, scope: Scope) -> bool:
        if self.hosts is None:
            return True
        host = next((v for k, v in scope.get("headers") or [] if k == b"host"), b"")
        name = host.decode("latin-1").lower()
        name = (
            name[1:].partition("]")[0] if name.startswith("[") else name.rpartition(":")[0] or name
        )
        return name in self.hosts

    @staticmethod
    def _from_another_site(scope: Scope) -> bool:
        # Fetch Metadata: a request another site's page made the browser send (an image, a
        # fetch, an EventSource, a frame), which it cannot read but the console would serve:
        # a search in a loop SCANs the whole keyspace each time, and answers can be timed.
        # A link the user follows to a page (a permalink in a ticket) is a navigation to a
        # document. Browsers without Fetch Metadata, and curl, send no `sec-fetch-site`.
        fetch = {k: v for k, v in scope.get("headers") or [] if k.startswith(b"sec-fetch-")}
        if fetch.get(b"sec-fetch-site", b"same-origin") in (b"same-origin", b"none"):
            return False
        navigation = fetch.get(b"sec-fetch-mode") == b"navigate"
        return not (navigation and fetch.get(b"sec-fetch-dest") == b"document")

    def _authorized(self, scope: Scope) -> bool:
        if self.token is None:
            return True
        headers = scope.get("headers") or []
        for name, value in headers:
            # The scheme is case-insensitive (RFC 9110); a browser may send several Cookie
            # headers (HTTP/2 splits them).
            if name == b"authorization" and value[:7].lower() == b"bearer ":
                if hmac.compare_digest(value[7:].strip(), self.token):
                    return True
            if name == b"cookie":
                jar = SimpleCookie()
                with contextlib.suppress(CookieError):
                    jar.load(value.decode("latin-1"))
                morsel = jar.get(COOKIE)
                # The cookie holds a value derived from the token (`cookie_value`), never
                # the token: a cookie goes to every port of the host name.
                if (
                    morsel is not None
                    and self.cookie is not None
                    and hmac.compare_digest(
                        morsel.value.encode("latin-1", "replace"), self.cookie.encode()
                    )
                ):
                    return True
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in _HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        if not self._host_allowed(scope):
            refused = PlainTextResponse(
                "this console answers only under a loopback name such as 127.0.0.1 (the Host "
                "header names another): set ACI_CONSOLE_TOKEN to serve it under other names",
                status_code=421,
            )  # fmt: skip
            await refused(scope, receive, with_headers)
            return
        if self._from_another_site(scope):
            refused = PlainTextResponse(
                "refused: a page of another site asked the browser for this (Sec-Fetch-Site); "
                "open the console's pages directly",
                status_code=403,
            )  # fmt: skip
            await refused(scope, receive, with_headers)
            return
        authorized = self._authorized(scope)
        redirect = self._token_in_query(scope, authorized)
        if redirect is not None:  # never leave the token in a URL (pages copy their query)
            await redirect(scope, receive, with_headers)
            return
        if not authorized:
            response = PlainTextResponse(
                "unauthorized: this console needs its token (ACI_CONSOLE_TOKEN). Open this page "
                "once as ...?token=<token> (it sets a cookie), or send "
                "'Authorization: Bearer <token>'.",
                status_code=401,
                headers={"www-authenticate": "Bearer"},
            )  # fmt: skip
            await response(scope, receive, with_headers)
            return
        await self.app(scope, receive, with_headers)

    def _token_in_query(self, scope: Scope, authorized: bool) -> Response | None:
        # `?token=…` once: set the cookie and redirect to the same URL without the token
        # (also when the cookie already signs the request in: the pages copy their query
        # into links, so a token left in the URL would be written into the page).
        query = parse_qsl((scope.get("query_string") or b"").decode("latin-1"))
        given = next((v for k, v in query if k == "token"), None)
        if self.token is None or given is None:
            return None
        valid = hmac.compare_digest(given.encode(), self.token)
        if not (valid or authorized):
            return None
        rest = urlencode([(k, v) for k, v in query if k != "token"])
        root = scope.get("root_path", "")
        path = scope["path"] if scope["path"].startswith(root) else root + scope["path"]
        # `//host/…` (or `/\host`) would be another site's address to a browser: one slash.
        path = "/" + path.lstrip("/\\")
        response = RedirectResponse(path + ("?" + rest if rest else ""), status_code=303)
        if valid and self.cookie is not None:
            response.set_cookie(
                COOKIE, self.cookie, httponly=True, samesite="strict", path=(root or "/"),
                secure=scope.get("scheme") == "https",
            )  # fmt: skip
        return response


def create_app(
    settings: Settings,
    url: str | None = None,
    *,
    config: ConsoleConfig | None = None,
    redis: Redis | None = None,
) -> ASGIApp:
    """The console over the deployment `settings` names: Redis at `url` (its auditor user,
    ideally), or an open client `redis` (left open)."""
    config = config or ConsoleConfig()
    if redis is None and not url:
        raise ValueError("the console needs a Redis URL or client")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if redis is not None:
            app.state.redis = redis
            yield
            return
        assert url is not None
        async with open_redis(url, cluster=settings.redis_cluster) as client:
            app.state.redis = client
            yield

    templates = Jinja2Templates(env=environment())
    routes: list[Any] = [
        Route(path, endpoint, methods=["GET"]) for path, endpoint in handlers.ROUTES
    ]
    routes.append(Mount("/static", StaticFiles(directory=STATIC), name="static"))
    app = Starlette(
        routes=routes, lifespan=lifespan,
        exception_handlers={
            PipelineError: handlers.redis_failed, handlers.SearchesBusy: handlers.searches_busy,
        },
    )  # fmt: skip
    app.state.settings = settings
    app.state.config = config
    app.state.templates = templates
    app.state.streams = 0
    app.state.searches = 0
    if redis is not None:  # usable without a lifespan too (httpx's ASGI transport runs none)
        app.state.redis = redis
    return _Guard(app, config.token, config.allowed_hosts)


def request_redis(request: Request) -> Redis:
    """The Redis client of the application serving `request`."""
    return request.app.state.redis
