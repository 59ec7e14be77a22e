"""uvicorn's HTTP/1.1 protocol (h11) with a deadline for each request's head.

uvicorn closes a keep-alive connection that stays idle, but holds for ever one that never
finishes its request line and headers (a client that sends `GET / HTTP/1.1\\r\\n` and
nothing more, or one byte a second: its idle timer stops at the first byte). Beyond
loopback, anyone who can reach the port, token or not (the token is read from the headers),
could hold connections until the process runs out of file descriptors, and with them its
Redis connections. Here a request's head must arrive within `head_timeout_s` of the
connection opening or of the previous response ending; the connection is closed otherwise.
A request being answered (a page, a live stream) has no deadline.
"""

from __future__ import annotations

import asyncio
from typing import Final

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HEAD_TIMEOUT_S", "HeadDeadlineProtocol"]

HEAD_TIMEOUT_S: Final = 10.0


class HeadDeadlineProtocol(H11Protocol):
    """`H11Protocol` that closes a connection whose request head is late."""

    head_timeout_s: float = HEAD_TIMEOUT_S
    _head_deadline: asyncio.TimerHandle | None = None

    def _start_deadline(self) -> None:
        self._stop_deadline()
        self._head_deadline = self.loop.call_later(self.head_timeout_s, self._head_late)

    def _stop_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_late(self) -> None:
        self._head_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_deadline()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # the head arrived: a request is running
            self._stop_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._start_deadline()  # the next request's head, on this kept-alive connection
