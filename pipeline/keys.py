"""Every Redis key, stream and group name of the pipeline, built in one place.

All keys of one prefix share the hash tag `{prefix}`, so the finish script (which touches the
invocation stream, the call's state, result and raw keys and three output streams at once) is
Redis Cluster-safe. An invocation's record is split over `call` (submit-time, written by
submitters), `res` (final, written only by workers) and `raw` (never readable by submitters),
so Redis ACLs can tell them apart; `pipeline.record` reads them as one.
Session ids are restricted to `[A-Za-z0-9._-]`, so `:` separates unambiguously.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["GROUP", "Keys", "is_valid_session_id"]

GROUP: Final = "workers"
_SESSION_RE: Final = re.compile(r"[A-Za-z0-9._-]{1,128}")


def is_valid_session_id(session_id: object) -> bool:
    """Session ids: 1-128 characters of letters, digits, `.`, `_` and `-`."""
    # fullmatch: `$` alone would also accept a trailing newline ("s1\n").
    return isinstance(session_id, str) and _SESSION_RE.fullmatch(session_id) is not None


class Keys:
    """Key names for one prefix (`ACI_PREFIX`, default `aci`)."""

    __slots__ = ("dead", "invocations", "lifecycle", "prefix", "sessions", "tag")

    def __init__(self, prefix: str = "aci") -> None:
        self.prefix = prefix
        self.tag = f"{{{prefix}}}"
        self.invocations = f"{self.tag}:invocations"
        self.lifecycle = f"{self.tag}:lifecycle"
        self.sessions = f"{self.tag}:sessions"
        self.dead = f"{self.tag}:dead"

    def call(self, session_id: str, tool_call_id: str) -> str:
        """The submit-time state hash of one invocation (written by the submit script)."""
        return f"{self.tag}:call:{session_id}:{tool_call_id}"

    def result(self, session_id: str, tool_call_id: str) -> str:
        """The final result hash of one invocation, written only by a worker's finish."""
        return f"{self.tag}:res:{session_id}:{tool_call_id}"

    def raw(self, session_id: str, tool_call_id: str) -> str:
        """The raw upstream answer of one invocation (workers and auditors only)."""
        return f"{self.tag}:raw:{session_id}:{tool_call_id}"

    def fingerprints(self, session_id: str) -> str:
        """Hash: scope fingerprint → first tool call id of the session that asked for it."""
        return f"{self.tag}:fp:{session_id}"

    def model(self, session_id: str) -> str:
        """The session's Model Observation stream (what an agent runtime reads)."""
        return f"{self.tag}:model:{session_id}"

    def control(self, session_id: str) -> str:
        """The session's Harness Control View stream."""
        return f"{self.tag}:control:{session_id}"
