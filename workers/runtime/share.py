"""Fairness: how many of a worker's slots one session may hold while others wait.

Policy: a session holds at most `cap = max(1, ceil(concurrency * ACI_SESSION_SHARE))` slots of a
worker for calls that do I/O (default share 0.25: 4 of 16) while others may be waiting — the
read filled every slot it asked for, or held entries of another session. An entry over the cap
is then put back at the end of its partition's stream (`pipeline/lua/requeue.lua`), so the next
entries (another session's) are read at once — unless none of the next 256 undelivered entries
is another session's: then the session is alone and may hold every slot but one share's worth,
`concurrency - cap` (12 of 16), the rest kept free so a newcomer's call starts at once. Calls
that need no I/O run inline and hold no slot long, so they are not counted. Each worker counts
its own slots: over W workers a session may hold up to W times as many.
"""

from __future__ import annotations

import math

__all__ = ["SessionShare"]


class SessionShare:
    """The running count of each session's I/O calls on this worker, against the cap."""

    __slots__ = ("cap", "running")

    def __init__(self, concurrency: int, share: float) -> None:
        self.cap = max(1, math.ceil(concurrency * share))
        self.running: dict[str, int] = {}

    def take(self, session_id: str, *, contested: bool) -> bool:
        """Count one more running call of `session_id`; False (nothing counted) when it holds
        its cap already and others may be waiting (`contested`)."""
        held = self.running.get(session_id, 0)
        if held >= self.cap and contested:
            return False
        self.running[session_id] = held + 1
        return True

    def take_alone(self, session_id: str, concurrency: int) -> bool:
        """Count one more running call of `session_id`, alone (nobody else waits), unless it
        holds every slot but one share's worth already (`concurrency - cap`)."""
        held = self.running.get(session_id, 0)
        if held >= concurrency - self.cap:
            return False
        self.running[session_id] = held + 1
        return True

    def done(self, session_id: str) -> None:
        """One call of `session_id` is over."""
        held = self.running.get(session_id, 0) - 1
        if held > 0:
            self.running[session_id] = held
        else:
            self.running.pop(session_id, None)
