"""Blocking PyMySQL calls in worker threads that a deadline can stop waiting for.

A cancelled wait abandons the thread (`abandon_on_cancel`), so who closes the connection is
decided by a `Handoff`: the thread when it ends after the loop left, or the loop when the
thread had already ended. No connection is leaked and none is closed under a running call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import pymysql

__all__ = ["Handoff", "abandonable", "close_quietly"]


def close_quietly(conn: pymysql.Connection[Any]) -> None:
    try:
        conn.close()
    except Exception:
        conn._force_close()


_T = TypeVar("_T")


class Handoff:
    """Who closes the connection of a driver call the event loop stopped waiting for: the
    thread when it ends after the loop left, or the loop when the thread had already ended."""

    def __init__(self, conn: pymysql.Connection[Any] | None = None) -> None:
        self.conn = conn
        self._lock = threading.Lock()
        self._done = self._abandoned = False

    def finished(self, result: object) -> None:
        """In the thread, as the driver call ends."""
        with self._lock:
            self._done = True
            if isinstance(result, pymysql.Connection):
                self.conn = result
            if not self._abandoned:
                return
        if self.conn is not None:
            close_quietly(self.conn)

    def abandon(self) -> None:
        """In the loop, as it stops waiting."""
        with self._lock:
            self._abandoned = True
            if not self._done:
                return
        if self.conn is not None:
            close_quietly(self.conn)


async def abandonable(handoff: Handoff, fn: Callable[..., _T], *args: Any) -> _T:
    # A blocking driver call in a thread that a cancel (the deadline) stops waiting for.
    def work() -> _T:
        result: object = None
        try:
            result = fn(*args)
            return result
        finally:
            handoff.finished(result)

    try:
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        handoff.abandon()
        raise
