"""The deadline of one call, carried into the thread that does the work so the work stops.

The stage runs `fetch` under `anyio.fail_after`; when that fires, an abandoned thread would
go on burning CPU (and delay other sessions' calls). A `StopFlag` carries the call's
deadline and a flag set when the call is cancelled; a scan checks `expired()` every few
thousand records and stops.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread

__all__ = ["StopFlag", "remaining_seconds", "run_stoppable"]

T = TypeVar("T")


def remaining_seconds(cap: float) -> float:
    """Seconds left before the current call's deadline, at most `cap` (>= 0)."""
    deadline = anyio.current_effective_deadline()
    left = deadline - anyio.current_time() if math.isfinite(deadline) else cap
    return max(0.0, min(cap, left))


class StopFlag:
    """Set when the call was cancelled; `expired()` also once its time is up."""

    __slots__ = ("_event", "deadline", "timed_out")

    def __init__(self, seconds: float) -> None:
        self._event = threading.Event()
        self.deadline = time.monotonic() + seconds
        self.timed_out = False

    def narrow(self, seconds: float) -> None:
        """Expire at the latest `seconds` from now (a budget shorter than the deadline)."""
        self.deadline = min(self.deadline, time.monotonic() + seconds)

    def cancel(self) -> None:
        """Ask the work to stop (the caller gave up on it)."""
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def expired(self) -> bool:
        """Whether the work must stop now (cancelled, or past its deadline)."""
        if self._event.is_set():
            return True
        if time.monotonic() >= self.deadline:
            self.timed_out = True
            return True
        return False


async def run_stoppable(work: Callable[[StopFlag], T], budget_s: float) -> T:
    """Run `work(flag)` in a thread; the flag expires at the call's deadline or after
    `budget_s`, whichever is first, and is cancelled if the call is abandoned."""
    left = remaining_seconds(budget_s)
    # Stop a little before the call's deadline, so a partial answer can still be projected.
    flag = StopFlag(max(0.0, left - min(0.25, left * 0.1)))
    try:
        return await anyio.to_thread.run_sync(work, flag, abandon_on_cancel=True)
    finally:
        flag.cancel()
