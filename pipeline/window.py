"""The log window of a call, decided once, at admission (the trusted side).

A submitter may pin a `query_logs` call to an incident time (`Invocation.as_of_ms`, set by a
harness through `EvidenceClient(as_of=...)`, `aci-evidence call --as-of`, MCP `_meta` or an
adapter; never by the model). Admission writes the end of the call's window into the envelope
it records (`window_end_ms`: the as-of, or admission's clock); a submitter's own value of that
field is replaced. The worker, and a replay's re-execute any time later, read the recorded end,
so a call reads the same window however late it runs. A future as-of (beyond
`contracts.window.AS_OF_SKEW_MS`) is not used: the window ends at admission's clock and the
worker answers the call ERROR/SCHEMA (`call_end`), so the mistake is heard, not hidden.
"""

from __future__ import annotations

import time
from datetime import datetime

import msgspec
from msgspec import UNSET

from contracts.window import AsOfError, as_of_problem, parse_as_of
from pipeline.envelope import Invocation

__all__ = ["LOG_TOOL", "AsOf", "AsOfPins", "admit_window", "call_end", "checked_as_of"]

LOG_TOOL = "query_logs"
AsOf = str | datetime  # an incident time: ISO 8601 with a zone, or an aware datetime


def checked_as_of(as_of: AsOf) -> int:
    """Epoch ms of a harness's as-of, checked against this clock before anything is sent:
    `AsOfError` for a time that is not ISO 8601 or lies in the future (no zone: UTC)."""
    epoch_ms = parse_as_of(as_of)
    problem = as_of_problem(epoch_ms, int(time.time() * 1000))
    if problem:
        raise AsOfError(problem)
    return epoch_ms


class AsOfPins:
    """A client's as-of per session (`EvidenceClient` inherits it): `as_of=` on `call`,
    `call_many` and `submit_many` pins those log calls; `pin_as_of` every later one of a
    session. Only log calls carry it; nothing is sent with an unusable time (`AsOfError`)."""

    _pinned: dict[str, int]

    def pin_as_of(self, session_id: str, as_of: AsOf | None) -> None:
        """Pin every later log call of `session_id` to an incident time (None unpins); a
        call's own `as_of=` wins. `AsOfError` for a time that is not ISO 8601 or in the future."""
        pinned = self.__dict__.setdefault("_pinned", {})
        pinned.pop(session_id, None)
        if as_of is not None:
            pinned[session_id] = checked_as_of(as_of)

    def as_of_ms(self, session_id: str, as_of: AsOf | None) -> int | None:
        """The as-of (epoch ms) a call of `session_id` carries: its own, else the session's."""
        if as_of is not None:
            return checked_as_of(as_of)
        pinned: dict[str, int] = self.__dict__.get("_pinned", {})
        return pinned.get(session_id)


def admit_window(inv: Invocation, now_ms: int) -> Invocation | None:
    """The invocation as admission records it (its window's end decided), or None when it is
    recorded as submitted (not a log call, and no window field to drop)."""
    if inv.tool != LOG_TOOL:
        if inv.window_end_ms is UNSET:
            return None
        return msgspec.structs.replace(inv, window_end_ms=UNSET)  # not a submitter's to set
    as_of = inv.as_of_ms
    usable = isinstance(as_of, int) and not as_of_problem(as_of, now_ms)
    end = as_of if usable and isinstance(as_of, int) else now_ms
    return msgspec.structs.replace(inv, window_end_ms=end)


def call_end(as_of_ms: int | None, window_end_ms: int | None, now_ms: int) -> tuple[int, str]:
    """The end of a call's window (epoch ms) and why its as-of cannot be used ('' when it
    can): the end admission recorded, else (a call run without admission, or recorded before
    windows were) the as-of or `now_ms`."""
    if window_end_ms is not None:
        problem = as_of_problem(as_of_ms, window_end_ms) if as_of_ms is not None else ""
        return window_end_ms, problem
    if as_of_ms is not None:
        problem = as_of_problem(as_of_ms, now_ms)
        return (now_ms if problem else as_of_ms), problem
    return now_ms, ""
