"""The time a call reads at: the end of its log window, as admission recorded it.

The stage sets it around a source's `fetch` (`at_call_time`); a log backend reads it
(`call_time`) instead of its own clock, so a call reads the window admission decided however
late it runs, and a replay's re-execute reads it again a week later. Without one (a benchmark,
a test calling a backend directly) a backend reads its own clock, as before.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import NamedTuple

__all__ = ["CallTime", "at_call_time", "call_time", "pinned_end"]


class CallTime(NamedTuple):
    """The end of a call's window (epoch ms); `pinned`: a harness's as-of (an incident time),
    not the admitting clock (the MOCK world keeps its own clock unless pinned)."""

    end_ms: int
    pinned: bool


_CURRENT: ContextVar[CallTime | None] = ContextVar("aci_call_time", default=None)


def call_time() -> CallTime | None:
    """The running call's window end, or None outside a call's stages."""
    return _CURRENT.get()


def pinned_end() -> int | None:
    """The running call's window end when a harness pinned it (an as-of), else None: what a
    simulated world with its own clock (MOCK) honours. Read in the call's task or in a thread
    it started (anyio's `to_thread` carries the context over)."""
    when = _CURRENT.get()
    return when.end_ms if when is not None and when.pinned else None


class at_call_time:
    """Run a call's fetch at `when` (None: no window recorded).

    A plain class, not a generator: it is entered once per call."""

    __slots__ = ("token", "when")

    def __init__(self, when: CallTime | None) -> None:
        self.when = when

    def __enter__(self) -> None:
        self.token = _CURRENT.set(self.when)

    def __exit__(self, *exc: object) -> None:
        _CURRENT.reset(self.token)
