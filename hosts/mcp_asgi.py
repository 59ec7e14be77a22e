"""The plain ASGI pieces of the MCP HTTP gate (`hosts.mcp_http.SessionGate`): JSON-RPC error
answers (a plain 401 among them, and a 413 for a body over its limit, which the SDK would
answer as plain text a JSON-RPC client cannot read), headers, a request body read within a time
bound and replayed to the app, the client's address, the protocol era of a request."""

from __future__ import annotations

from typing import Any, Final

import msgspec

__all__ = [
    "BODY_BUFFER_MAX",
    "NO_SESSION",
    "TOO_LARGE",
    "UNAUTHORIZED",
    "client_address",
    "declared_too_large",
    "handshake_era",
    "header",
    "json_error",
    "json_errors",
    "not_opening",
    "read_body",
    "replay",
    "too_large",
    "unauthorized",
]


def json_error(status: int, message: str, extra: tuple[tuple[bytes, bytes], ...] = ()) -> Any:
    body = msgspec.json.encode(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    )
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    headers += extra

    async def respond(_scope: Any, _receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return respond


UNAUTHORIZED: Final = (
    "Unauthorized: this server needs its bearer token (Authorization: Bearer <token>, "
    "the server's --token or ACI_MCP_TOKEN); it does not offer OAuth"
)


_NOT_ACCEPTABLE: Final = (
    "Not Acceptable: the Accept header must list both application/json and text/event-stream"
)
_DROPPED: Final = {b"content-type", b"content-length", b"mcp-session-id"}


def _error_text(status: int, text: str) -> str:
    from http import HTTPStatus

    if status == 406:
        return _NOT_ACCEPTABLE
    if "content-type" in text.lower():
        text += " (send Content-Type: application/json)"
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    return f"{phrase}: {text[:200]}" if text else phrase


def json_errors(send: Any) -> Any:
    """`send`, with an error answer of the SDK's that a JSON-RPC client cannot read (plain text,
    as for a missing `Content-Type: application/json`, or empty, as its 406 to a 2026-07-28
    request) turned into a JSON-RPC error that says what to send; other answers unchanged."""
    held: list[Any] = []
    body: list[bytes] = []

    async def wrapped(message: Any) -> None:
        if message["type"] == "http.response.start" and message["status"] >= 400:
            kind = dict(message.get("headers", ())).get(b"content-type", b"")
            if not bytes(kind).startswith(b"application/json"):
                held.append(message)
                return
        if not held or message["type"] != "http.response.body":
            await send(message)
            return
        body.append(message.get("body", b""))
        if message.get("more_body"):
            return
        start = held[0]
        status = start["status"]
        text = b"".join(body).decode("utf-8", "replace").strip()
        kept = tuple((k, v) for k, v in start.get("headers", ()) if k.lower() not in _DROPPED)
        await json_error(status, _error_text(status, text), kept)(None, None, send)

    return wrapped


async def unauthorized(scope: Any, receive: Any, send: Any) -> None:
    """A plain 401 for a missing or wrong token. Deliberately without `WWW-Authenticate`
    (RFC 9110 asks for a challenge; MCP clients read any `Bearer` one as the start of OAuth
    discovery, which this server does not offer): the status and the message say it all."""
    await json_error(401, UNAUTHORIZED)(scope, receive, send)


def header(scope: Any, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value)
    return None


BODY_BUFFER_MAX: Final = 4 * 1024 * 1024  # the SDK's body bound (the gate refuses past it)
TOO_LARGE: Final = (
    f"Request body too large: the limit is {BODY_BUFFER_MAX // (1024 * 1024)} MiB "
    f"({BODY_BUFFER_MAX} bytes)"
)


def declared_too_large(scope: Any) -> bool:
    """Whether the request declares a body over `BODY_BUFFER_MAX` (`content-length`)."""
    declared = header(scope, b"content-length")
    return declared is not None and declared.strip().isdigit() and int(declared) > BODY_BUFFER_MAX


def too_large(messages: list[Any]) -> bool:
    """Whether the body messages `read_body` read hold more than `BODY_BUFFER_MAX` bytes."""
    return sum(len(m.get("body", b"")) for m in messages) > BODY_BUFFER_MAX


async def read_body(receive: Any, timeout_s: float) -> list[Any] | None:
    """The request's body messages, read within `timeout_s` (None when it was too slow); past
    `BODY_BUFFER_MAX` bytes the rest is left unread (`too_large`: the gate refuses it)."""
    import anyio

    messages: list[Any] = []
    size = 0
    with anyio.move_on_after(timeout_s):
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":  # the client went away
                return messages
            size += len(message.get("body", b""))
            if not message.get("more_body", False) or size > BODY_BUFFER_MAX:
                return messages
    return None


def replay(messages: list[Any], receive: Any) -> Any:
    """An ASGI `receive` giving `messages` first, then the connection's own."""
    pending = list(messages)

    async def replay() -> Any:
        return pending.pop(0) if pending else await receive()

    return replay


NO_SESSION: Final = (
    "Bad Request: Missing session ID: open a session with initialize first (protocol "
    "2025-11-25 and earlier), or send the request as 2026-07-28, which has no session: the "
    "MCP-Protocol-Version: 2026-07-28 header and the params._meta envelope"
)


def not_opening(scope: Any, messages: list[Any]) -> bool:
    """Whether a request without `Mcp-Session-Id` (handshake era) cannot open a session: a GET,
    or a POST of one JSON-RPC message other than `initialize`. The SDK would answer it 400
    "Missing session ID" after creating a session for it (whose id it still sends back, and
    which 404s), and nothing says how to get one (`NO_SESSION` does). A body the gate cannot
    read as one message goes to the SDK, which says what is wrong with it."""
    if scope.get("method") == "GET":
        return True
    if scope.get("method") != "POST":
        return False
    body = b"".join(m.get("body", b"") for m in messages if m.get("type") == "http.request")
    try:
        message = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return False
    method = message.get("method") if isinstance(message, dict) else None
    return isinstance(method, str) and method != "initialize"


def handshake_era(version: str) -> bool:
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    return version in HANDSHAKE_PROTOCOL_VERSIONS


def client_address(scope: Any) -> str:
    peer = scope.get("client")
    return str(peer[0]) if peer else "unknown"
