"""`aci-evidence mcp --http`: the SDK's Streamable HTTP app behind a gate of ours.

Every request passes `SessionGate` (an ASGI app in front of the SDK's Starlette app) first:

- **Only `/mcp`.** Any other path answers 404 before anything else, the token included: no
  OAuth metadata is advertised or implied (`/.well-known/oauth-*` are 404), so a client that
  follows the MCP authorization spec finds no authorization server and stops there.
- **Bearer token** (`--token` or ACI_MCP_TOKEN; required on a non-loopback bind): a request
  without `Authorization: Bearer <token>` gets a plain 401 (no `WWW-Authenticate` challenge:
  any `Bearer` challenge sends MCP clients into OAuth discovery, reported as "auth required"
  or a registration error instead of "wrong token"; `unauthorized`) and reaches nothing else.
- **Only sessions the server created.** The gate records a session id when the server's answer
  to an opening request (one without `Mcp-Session-Id`) carries it; a handshake-era request
  naming any other id gets 404, as the SDK answers an unknown one. A 2026-07-28 request has no
  MCP session at all: its `Mcp-Session-Id` header is removed before the SDK sees it, so it can
  never name an evidence session (`mcp_server` gives it a fresh one). A handshake-era request
  without a session that cannot open one (a GET, a message other than `initialize`: a client
  that skipped it, or a 2026-07-28 request without its `MCP-Protocol-Version` header) is
  answered 400 here, saying how to get a session, before any session or token is spent on it.
- **Errors a JSON-RPC client can read.** An error answer of the SDK's in plain text (a body
  without `Content-Type: application/json`) or empty (its 406 to a 2026-07-28 request whose
  `Accept` lacks `text/event-stream`) becomes a JSON-RPC error saying what to send
  (`mcp_asgi.json_errors`).
- **Bounded sessions** (`HttpLimits`): at most `max_sessions` open and `sessions_per_client`
  per client. A client is the socket peer's address (uvicorn's proxy headers are off unless
  `--trusted-proxy` names the proxy, so a local `X-Forwarded-For` changes nothing). A session
  with no request in flight for `idle_timeout_s` is closed (the SDK's own idle timeout, set
  to the same value). Room is made by `_make_room`: a client at its own limit displaces only
  its least recently used *idle* session (no request in flight, no open GET stream), never a
  session it still holds, because mcp 1.x clients never recover from a closed session; at the
  server's limit an idle session of anyone goes first, and a held session (open GET stream,
  never one with a call in flight) only of the client holding more than its fair share of
  the server, so a flood from one address never locks a newcomer out. 429 (503 server-wide)
  when nothing may be displaced.
- **New sessions per client are rate limited** (a token bucket), and a session its client
  closes (DELETE, as the SDK clients do when they are done) gives its token back: a client
  that opens one session per call and closes it (langchain-mcp-adapters' default) only pays
  for the sessions it leaves open. Past it, 429 with `Retry-After`; and a client has at most
  `requests_per_client` requests in flight (429).
- **A request's body must arrive within `body_timeout_s`** (408 otherwise): the gate reads it
  before the SDK does (up to the SDK's 4 MiB bound), so stalled uploads cannot hold a client's
  in-flight budget (on a loopback bind every local client is one address) for good.

A closed session answers 404 and its host should open a new one (the Streamable HTTP rule; not
every client does: docs/adapters.md); its later calls then go in a new evidence session.
"""

from __future__ import annotations

import hmac
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from hosts.mcp_asgi import (
    NO_SESSION,
    TOO_LARGE,
    client_address,
    declared_too_large,
    handshake_era,
    header,
    json_error,
    json_errors,
    not_opening,
    read_body,
    replay,
    too_large,
    unauthorized,
)

__all__ = [
    "DEFAULT_LIMITS",
    "HttpLimits",
    "SessionGate",
]

log = logging.getLogger("aci.mcp")

_SESSION_HEADER: Final = b"mcp-session-id"
_VERSION_HEADER: Final = b"mcp-protocol-version"
_MCP_PATH: Final = "/mcp"

ASGIApp = Callable[..., Any]


class HttpLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Bounds of the Streamable HTTP server (operator settings; docs/adapters.md)."""

    max_sessions: int = 1024  # open sessions, all clients
    sessions_per_client: int = 64  # open sessions of one remote address
    idle_timeout_s: float = 600.0  # a session with nothing in flight this long is closed
    new_sessions_per_s: float = 2.0  # sustained new sessions of one remote address
    new_sessions_burst: int = 32  # ... and the burst above that rate
    requests_per_client: int = 192  # requests of one remote address in flight (GET streams too)
    body_timeout_s: float = 10.0  # a request's whole body arrives within this, or 408

    def problem(self) -> str | None:
        """What is wrong with these limits, in one line (None when they are fine)."""
        counts = (
            self.max_sessions,
            self.sessions_per_client,
            self.new_sessions_burst,
            self.requests_per_client,
        )
        if min(counts) < 1:
            return "session limits must be at least 1"
        if not (math.isfinite(self.idle_timeout_s) and self.idle_timeout_s > 0):
            return "the idle timeout must be a positive number of seconds"
        if not (math.isfinite(self.body_timeout_s) and self.body_timeout_s > 0):
            return "the body timeout must be a positive number of seconds"
        if not (math.isfinite(self.new_sessions_per_s) and self.new_sessions_per_s > 0):
            return "the new-session rate must be a positive number per second"
        return None


DEFAULT_LIMITS: Final = HttpLimits()


@dataclass
class _Session:
    client: str
    host: bytes  # the Host header that opened it (its closing request passes the same check)
    last_active: float
    in_flight: int = 0  # requests being served (POST, DELETE)
    streams: int = 0  # open GET streams: held, never closed for its own client's room

    @property
    def idle(self) -> bool:
        """No request in flight and no open stream: the first to be closed for room."""
        return not (self.in_flight or self.streams)


@dataclass
class _Bucket:
    tokens: float
    stamp: float


class SessionGate:
    """The ASGI gate in front of the SDK's app (see the module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        limits: HttpLimits = DEFAULT_LIMITS,
        token: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._app = app
        self._limits = limits
        self._expected = token.encode() if token else None
        self._clock = clock
        self._sessions: dict[str, _Session] = {}
        self._opening: dict[str, int] = {}  # opening requests in flight, per client
        self._buckets: dict[str, _Bucket] = {}
        self._requests: dict[str, int] = {}  # requests in flight, per client

    @property
    def open_sessions(self) -> int:
        """Sessions the server created that are still open (as far as the gate knows)."""
        return len(self._sessions)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._app(scope, receive, send)
            return
        if scope["type"] != "http":  # no WebSocket endpoint: refused before anything else
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope.get("path", "").rstrip("/") != _MCP_PATH:
            await json_error(404, "Not found: the MCP endpoint is /mcp")(scope, receive, send)
            return
        if self._expected is not None and not self._authorized(scope):
            await unauthorized(scope, receive, send)
            return
        client = client_address(scope)
        if self._requests.get(client, 0) >= self._limits.requests_per_client:
            await json_error(429, "Too many requests in flight")(scope, receive, send)
            return
        self._requests[client] = self._requests.get(client, 0) + 1
        try:
            if declared_too_large(scope):
                await json_error(413, TOO_LARGE)(scope, receive, send)
                return
            body = await read_body(receive, self._limits.body_timeout_s)
            if body is None:
                await json_error(408, "Request body not received in time")(scope, receive, send)
                return
            if too_large(body):  # streamed without a length
                await json_error(413, TOO_LARGE)(scope, receive, send)
                return
            await self._route(client, scope, body, receive, json_errors(send))
        finally:
            self._requests[client] -= 1
            if not self._requests[client]:
                del self._requests[client]

    def _authorized(self, scope: Any) -> bool:
        scheme, _, token = (header(scope, b"authorization") or b"").partition(b" ")
        expected = self._expected or b""
        # Always compare (a constant-time comparison whatever the scheme).
        return hmac.compare_digest(token.strip(), expected) and scheme.lower() == b"bearer"

    async def _route(
        self, client: str, scope: Any, body: list[Any], receive: Any, send: Any
    ) -> None:
        version = header(scope, _VERSION_HEADER)
        receive = replay(body, receive)
        if version is not None and not handshake_era(version.decode("latin-1")):
            # 2026-07-28 and later: no MCP sessions; the header must name nothing downstream.
            headers = [(k, v) for k, v in scope["headers"] if k.lower() != _SESSION_HEADER]
            await self._app({**scope, "headers": headers}, receive, send)
            return
        session_id = header(scope, _SESSION_HEADER)
        if session_id is None and not_opening(scope, body):  # no session spent on it
            await json_error(400, NO_SESSION)(scope, receive, send)
        elif session_id is None:
            await self._open(client, scope, receive, send)
        else:
            await self._in_session(session_id.decode("latin-1"), scope, receive, send)

    async def _in_session(self, session_id: str, scope: Any, receive: Any, send: Any) -> None:
        session = self._sessions.get(session_id)
        if session is None:
            await json_error(404, "Session not found")(scope, receive, send)
            return
        status: list[int] = []

        async def watch(message: Any) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        stream = scope.get("method") == "GET"
        if stream:
            session.streams += 1
        else:
            session.in_flight += 1
        try:
            await self._app(scope, receive, watch)
        finally:
            if stream:
                session.streams -= 1
            else:
                session.in_flight -= 1
            session.last_active = self._clock()
            ended = scope.get("method") == "DELETE" and status and status[0] < 400
            if (status and status[0] == 404) or ended:
                self._sessions.pop(session_id, None)
            if ended:
                self._refund(session.client, self._clock())

    async def _open(self, client: str, scope: Any, receive: Any, send: Any) -> None:
        now = self._clock()
        self._sweep(now)
        if not self._take_token(client, now):
            retry = math.ceil(1 / self._limits.new_sessions_per_s)
            headers = ((b"retry-after", str(retry).encode()),)
            await json_error(429, "Too many new sessions", headers)(scope, receive, send)
            return
        self._opening[client] = self._opening.get(client, 0) + 1  # reserved before any await
        reservation = [True]
        try:
            refusal = await self._make_room(client)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
            await self._forward_opening(client, reservation, scope, receive, send)
        finally:
            if reservation[0]:
                self._release(client)

    def _release(self, client: str) -> None:
        self._opening[client] -= 1
        if not self._opening[client]:
            del self._opening[client]

    async def _forward_opening(
        self, client: str, reservation: list[bool], scope: Any, receive: Any, send: Any
    ) -> None:
        host = header(scope, b"host") or b""
        opened: list[_Session] = []

        async def watch(message: Any) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                for key, value in message.get("headers", ()):
                    if key.lower() == _SESSION_HEADER and reservation[0]:
                        session = _Session(client, host, self._clock(), in_flight=1)
                        self._sessions[bytes(value).decode("latin-1")] = session
                        opened.append(session)
                        reservation[0] = False  # the reservation became this session
                        self._release(client)
            await send(message)

        try:
            await self._app(scope, receive, watch)
        finally:
            for session in opened:
                session.in_flight -= 1
                session.last_active = self._clock()

    def _sweep(self, now: float) -> None:
        # The SDK closes a session idle for the same time; forget it here as well.
        idle = self._limits.idle_timeout_s
        for session_id, session in list(self._sessions.items()):
            if not (session.in_flight or session.streams) and now - session.last_active >= idle:
                del self._sessions[session_id]
        rate, burst = self._limits.new_sessions_per_s, self._limits.new_sessions_burst
        for client, bucket in list(self._buckets.items()):
            if bucket.tokens + (now - bucket.stamp) * rate >= burst:
                del self._buckets[client]  # full again: the same as no bucket

    def _take_token(self, client: str, now: float) -> bool:
        rate, burst = self._limits.new_sessions_per_s, self._limits.new_sessions_burst
        bucket = self._buckets.setdefault(client, _Bucket(float(burst), now))
        bucket.tokens = min(float(burst), bucket.tokens + (now - bucket.stamp) * rate)
        bucket.stamp = now
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    def _refund(self, client: str, now: float) -> None:
        """A session its client closed gives its new-session token back (see the docstring)."""
        bucket = self._buckets.get(client)
        if bucket is not None:
            rate, burst = self._limits.new_sessions_per_s, self._limits.new_sessions_burst
            bucket.tokens = min(float(burst), bucket.tokens + (now - bucket.stamp) * rate + 1)
            bucket.stamp = now

    async def _make_room(self, client: str) -> Any:
        """None when a session may open (after closing others for room), else the refusal.

        The session policy: a client at its own limit displaces only its own idle sessions;
        at the server's limit, anyone's idle session, else a held one of a client above its
        fair share (`_hog_victim`). A session with a request in flight is never closed."""
        # Counts include this opening request (reserved in `_opening`), hence `>`.
        mine = [s for s in self._sessions.items() if s[1].client == client]
        if len(mine) + self._opening[client] > self._limits.sessions_per_client:
            if not await self._close_lru([(sid, s) for sid, s in mine if s.idle]):
                return json_error(429, "Too many open sessions for this client")
        everyone = list(self._sessions.items())
        if len(everyone) + sum(self._opening.values()) > self._limits.max_sessions:
            idle = [(sid, s) for sid, s in everyone if s.idle]
            if not await self._close_lru(idle or self._hog_victim(client, everyone)):
                return json_error(503, "Too many open sessions")
        return None

    def _hog_victim(self, client: str, everyone: list[tuple[str, _Session]]) -> Any:
        """The held sessions (open stream, nothing in flight) of the client with the most
        sessions, when it holds more than its fair share of the server (`max_sessions` over the
        clients with sessions, the newcomer included); else none."""
        counts: dict[str, int] = {}
        for _sid, session in everyone:
            counts[session.client] = counts.get(session.client, 0) + 1
        hog, held = max(counts.items(), key=lambda item: item[1], default=(client, 0))
        fair = self._limits.max_sessions // (len(counts) + (client not in counts))
        if hog == client or held <= fair:
            return []
        return [(sid, s) for sid, s in everyone if s.client == hog and not s.in_flight]

    async def _close_lru(self, candidates: list[tuple[str, _Session]]) -> bool:
        """Close the least recently used of `candidates` (False when there is none)."""
        if not candidates:
            return False
        _, session_id = min((s.last_active, sid) for sid, s in candidates)
        session = self._sessions.pop(session_id)
        log.info("closing the least recently used MCP session to make room")
        await self._delete(session_id, session.host)
        return True

    async def _delete(self, session_id: str, host: bytes) -> None:
        """End a session through the SDK's own DELETE (its transport and task go with it)."""
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": "DELETE", "scheme": "http", "path": _MCP_PATH,
            "raw_path": _MCP_PATH.encode(), "query_string": b"", "root_path": "",
            "headers": [(b"host", host), (_SESSION_HEADER, session_id.encode("latin-1"))],
            "client": None, "server": None,
        }  # fmt: skip
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": b"", "more_body": False}
            return {"type": "http.disconnect"}

        async def discard(_message: Any) -> None:
            return None

        await self._app(scope, receive, discard)
