"""uvicorn's HTTP/1.1 protocol (h11) with a deadline for each request's head.

uvicorn closes a keep-alive connection that stays idle, but holds for ever one that never
finishes its request line and headers (a client that sends `GET / HTTP/1.1\\r\\n` and
nothing more, or one byte a second: its idle timer stops at the first byte). Beyond
loopback, anyone who can reach the port, token or not (the token is read from the headers),
could hold connections until the process runs out of file descriptors, and with them its
Redis connections. Here a request's head must arrive within `head_timeout_s` of the
connection opening or of the previous response ending; the connection is closed otherwise.
The same holds after an answer for the rest of a request body that never ends (a GET reads
none, and each trickled byte stopped uvicorn's idle timer). A request being answered (a
page, a live stream) has no deadline.
"""

from __future__ import annotations

import asyncio
from typing import Final

from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HEAD_TIMEOUT_S", "HeadDeadlineProtocol"]

HEAD_TIMEOUT_S: Final = 10.0


class HeadDeadlineProtocol(H11Protocol):
    """`H11Protocol` that closes a connection whose next request head is late."""

    head_timeout_s: float = HEAD_TIMEOUT_S
    _head_deadline: asyncio.TimerHandle | None = None
    _waiting_since: object = None  # the request cycle current when the wait began

    def _start_deadline(self) -> None:
        self._stop_deadline()
        self._waiting_since = self.cycle
        self._head_deadline = self.loop.call_later(self.head_timeout_s, self._head_late)

    def _stop_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_late(self) -> None:
        self._head_deadline = None
        # No new request began (a head never finished, or an answered request's body is
        # still trickling in): nothing is being answered, close.
        if self.cycle is self._waiting_since and not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_deadline()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self.cycle is not self._waiting_since:  # a request's head arrived: it is answered
            self._stop_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        answered = self.cycle is not None and self.cycle.response_complete
        if answered and not self.transport.is_closing():
            self._start_deadline()  # the next request's head, on this kept-alive connection
