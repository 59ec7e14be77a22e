"""A stdio line that is no MCP message is answered, not dropped.

The SDK's stdio transport hands the server an exception for a line it cannot read as a
JSON-RPC message (not JSON, a JSON-RPC batch, nested deeper than its parser goes, no
`"jsonrpc": "2.0"`), and the server logs it at DEBUG and reads on: the host never hears
back, and a host waiting for that request's answer waits until its own timeout. Over
Streamable HTTP the same line gets a 400 with a JSON-RPC error at once.

`AnsweringReadStream` sits between the transport and `Server.run` and answers each such line
as JSON-RPC 2.0 says, on the same stdout: a request whose `id` can still be read gets an
`Invalid Request` (-32600) error with that id, so the host can pair it (one per request of a
batch: MCP since 2025-06-18 has no batches); a line that is not JSON gets `Parse error`
(-32700) with `id: null`. The message says what is wrong, never echoes the line.
"""

from __future__ import annotations

import json
import logging
from types import TracebackType
from typing import Any, Final

import anyio

__all__ = ["AnsweringReadStream", "invalid_line_errors"]

log = logging.getLogger("aci.mcp")

_PARSE_ERROR: Final = -32700
_INVALID_REQUEST: Final = -32600
_BATCH: Final = (
    "Invalid Request: JSON-RPC batches are not supported (MCP has none since 2025-06-18); "
    "send one message per line"
)
_NOT_JSON: Final = "Parse error: the line is not JSON"
_TOO_DEEP: Final = "Invalid Request: the message is nested too deeply to read"
_NO_MESSAGE: Final = 'Invalid Request: not a JSON-RPC 2.0 message (an object with "jsonrpc": "2.0")'
_NOTHING: Final = object()


def _usable_id(value: Any) -> str | int | None:
    if isinstance(value, dict):
        value = value.get("id")
        if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            return value
    return None


def _error(request_id: str | int | None, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _detail(errors: list[dict[str, Any]]) -> str:
    # The request branch's first complaint, by field (`jsonrpc: Input should be '2.0'`).
    for error in errors:
        loc = error.get("loc", ())
        if len(loc) > 1 and loc[0] == "JSONRPCRequest":
            field = ".".join(str(part) for part in loc[1:])
            return f"{_NO_MESSAGE}: {field}: {error.get('msg', 'invalid')}"
    return _NO_MESSAGE


def invalid_line_errors(exc: Exception) -> list[dict[str, Any]]:
    """The JSON-RPC error responses (wire dicts) owed for a line the transport could not read
    as a message (`exc`, its pydantic `ValidationError`); pure."""
    errors_of = getattr(exc, "errors", None)
    try:
        errors: list[dict[str, Any]] = list(errors_of(include_url=False)) if errors_of else []
    except TypeError:  # not pydantic's
        errors = []
    raw = next((e.get("input") for e in errors if e.get("type") == "json_invalid"), _NOTHING)
    message = _NOTHING
    if isinstance(raw, str | bytes):
        try:  # the SDK's parser stops at ~200 levels; the stdlib's reads ~1000 (for the id)
            message = json.loads(raw)
        except (ValueError, RecursionError):
            return [_error(None, _PARSE_ERROR, _NOT_JSON)]
        reason = _TOO_DEEP
    elif not errors:
        reason = _NOT_JSON
    else:
        for error in errors:  # the whole message: a branch-level complaint, or a missing field
            loc = error.get("loc", ())
            if len(loc) == 1 or (len(loc) == 2 and error.get("type") == "missing"):
                message = error.get("input")
                break
        reason = _detail(errors)
    if isinstance(message, list):
        ids = [i for i in map(_usable_id, message) if i is not None]
        return [_error(i, _INVALID_REQUEST, _BATCH) for i in ids] or [
            _error(None, _INVALID_REQUEST, _BATCH)
        ]
    if message is _NOTHING:  # nothing readable in what the transport reported
        return [_error(None, _INVALID_REQUEST if errors else _PARSE_ERROR, reason)]
    return [_error(_usable_id(message), _INVALID_REQUEST, reason)]


class AnsweringReadStream:
    """The stdio transport's read stream, with each unreadable line answered on `write_stream`
    (`invalid_line_errors`) instead of passed on to be dropped; everything else unchanged."""

    def __init__(self, inner: Any, write_stream: Any) -> None:
        self._inner = inner
        self._write = write_stream

    @property
    def last_context(self) -> Any:
        """The sender context of the last item received (the SDK's streams carry one)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        """The next message; an unreadable line is answered here and skipped."""
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            await self._answer(item)

    async def _answer(self, exc: Exception) -> None:
        from mcp.shared.message import SessionMessage
        from mcp_types import JSONRPCError

        answers = invalid_line_errors(exc)
        log.warning("a line from the host is no MCP message: %s", answers[0]["error"]["message"])
        try:
            for answer in answers:
                await self._write.send(SessionMessage(JSONRPCError.model_validate(answer)))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the connection is closing: nobody is left to tell

    async def aclose(self) -> None:
        """Close the transport's stream."""
        await self._inner.aclose()

    def __aiter__(self) -> AnsweringReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> AnsweringReadStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()
