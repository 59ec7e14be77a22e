"""`replay --reexecute` knows what it runs against: each recording's Control View says what
its source answered from (`source`, see `workers.sources.identity`); when today's sources
differ (another runbook folder or index, another log configuration, other data source names),
the replay says which, once per difference, and exits with `EXIT_SOURCES_DIFFER`.

Used by `app.replay` after each re-execution (the embedded index knows its fingerprint once
it has answered).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from contracts import decode_invocation
from contracts.results import ErrorResult
from pipeline.envelope import decode_envelope
from pipeline.record import CONTROL, ENVELOPE, TOOL
from workers.replay_diff import Recording
from workers.sources import Source
from workers.sources.identity import identity_changes, source_identity

__all__ = ["EXIT_SOURCES_DIFFER", "SourceCheck"]

# Its own code: the replay ran, but against other sources than the recording's.
EXIT_SOURCES_DIFFER: Final = 4


def _recorded_source(rec: Recording) -> dict[str, str] | None:
    try:
        control = msgspec.json.decode(rec.fields.get(CONTROL, b"") or b"{}")
    except msgspec.DecodeError:
        return None
    source = control.get("source") if isinstance(control, dict) else None
    if isinstance(source, dict) and all(isinstance(v, str) for v in source.values()):
        return source
    return None


def _current_source(rec: Recording, sources: Mapping[str, Source]) -> dict[str, str] | None:
    try:
        inv = decode_envelope(rec.fields.get(ENVELOPE, b""))
    except Exception:  # an undecodable recording is reported by the replay itself
        return None
    request: Any = decode_invocation(inv.tool, inv.tool_call_id, inv.arguments)
    if isinstance(request, ErrorResult):
        return None
    return source_identity(sources.get(inv.tool), request)


class SourceCheck:
    """The differences between the recordings' sources and today's, each said once."""

    def __init__(self) -> None:
        self.differences: dict[str, None] = {}  # `tool name: recorded X, now Y`, in order

    def add(self, rec: Recording, sources: Mapping[str, Source]) -> None:
        """Compare one re-executed recording's source with today's."""
        name = rec.text(TOOL)
        for change in identity_changes(_recorded_source(rec), _current_source(rec, sources)):
            self.differences.setdefault(f"{name} {change}", None)

    def warning(self) -> str | None:
        """One line naming every difference, or None when the sources are the recording's."""
        if not self.differences:
            return None
        return (
            "warning: the sources differ from the recording's, so a change may be the "
            "configuration's, not the code's: " + "; ".join(self.differences)
        )
