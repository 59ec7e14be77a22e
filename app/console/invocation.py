"""One invocation as the auditor reads it: the Model Observation and the Harness Control View
side by side, what was cut on the way from the canonical result to the observation (and how
much), the canonical result, the raw upstream answer and the submitted envelope.

Bodies are shown as parsed JSON when they parse, as text otherwise; each one's size is shown,
and a text longer than the page bound is cut for display (the page says by how much).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from pipeline.inspect import BAD_JSON, call_record
from pipeline.record import (
    CONTROL,
    DUPLICATE_OF,
    ENVELOPE,
    EVIDENCE,
    FINGERPRINT,
    FINISHED_AT,
    MODEL,
    RAW,
    RESULT,
    STATUS,
    SUBMITTED_AT,
    TOOL,
)
from pipeline.redis_io import Redis
from pipeline.settings import Settings

__all__ = ["Body", "Invocation", "load_invocation"]

_LISTS: Final = ("evidence", "events", "rows", "patterns", "columns")
_TEXT_SHOWN: Final = 256 * 1024


@dataclass
class Body:
    """One stored body: its size, and its value (parsed JSON, or text)."""

    size: int
    value: Any
    is_json: bool
    cut: int = 0  # characters of a text body left off the page

    @property
    def present(self) -> bool:
        return self.size > 0


@dataclass
class Invocation:
    """What the invocation page shows."""

    session: str
    tool_call_id: str
    found: bool
    state: dict[str, str] = field(default_factory=dict)
    model: Body | None = None
    control: Body | None = None
    result: Body | None = None
    raw: Body | None = None
    envelope: Body | None = None
    cuts: list[str] = field(default_factory=list)  # what the observation lost, in words


def _body(data: bytes | None) -> Body | None:
    if data is None:
        return None
    try:
        return Body(size=len(data), value=msgspec.json.decode(data), is_json=True)
    except BAD_JSON:
        text = data.decode("utf-8", "replace")
        return Body(
            size=len(data),
            value=text[:_TEXT_SHOWN],
            is_json=False,
            cut=max(0, len(text) - _TEXT_SHOWN),
        )


def _cuts(result: Body | None, model: Body | None, control: Body | None) -> list[str]:
    """What was truncated between the canonical result and the Model Observation."""
    out: list[str] = []
    res = result.value if result and isinstance(result.value, dict) else {}
    obs = model.value if model and isinstance(model.value, dict) else {}
    cv = control.value if control and isinstance(control.value, dict) else {}
    for name in _LISTS:
        kept, whole = obs.get(name), res.get(name)
        if isinstance(kept, list) and isinstance(whole, list) and len(kept) < len(whole):
            out.append(f"{name}: {len(kept)} of {len(whole)} shown to the model")
    matches, returned = cv.get("match_count"), cv.get("returned_count")
    if isinstance(matches, int) and isinstance(returned, int) and returned < matches:
        out.append(f"returned {returned} of {matches} matching records in scope")
    for name in ("query", "message"):
        kept = obs.get(name, (obs.get("error") or {}).get(name) if name == "message" else None)
        whole = res.get(name, (res.get("error") or {}).get(name) if name == "message" else None)
        if isinstance(kept, str) and isinstance(whole, str) and len(kept) < len(whole):
            out.append(f"{name}: {len(kept)} of {len(whole)} characters")
    if (obs.get("truncated") is True or cv.get("truncated") is True) and not out:
        out.append("the result was cut to its bounds before projection (truncated=true)")
    return out


async def load_invocation(
    redis: Redis, settings: Settings, session: str, tool_call_id: str
) -> Invocation:
    """The invocation page's data for one (session, tool call id)."""
    record = await call_record(redis, settings.keys(), session, tool_call_id)
    if not record:
        return Invocation(session=session, tool_call_id=tool_call_id, found=False)
    state = {
        name: record[f].decode("utf-8", "replace")
        for name, f in (
            ("status", STATUS),
            ("evidence_status", EVIDENCE),
            ("tool", TOOL),
            ("submitted_at", SUBMITTED_AT),
            ("finished_at", FINISHED_AT),
            ("duplicate_of", DUPLICATE_OF),
            ("scope_fingerprint", FINGERPRINT),
        )
        if record.get(f)
    }
    inv = Invocation(
        session=session,
        tool_call_id=tool_call_id,
        found=True,
        state=state,
        model=_body(record.get(MODEL)),
        control=_body(record.get(CONTROL)),
        result=_body(record.get(RESULT)),
        raw=_body(record.get(RAW)),
        envelope=_body(record.get(ENVELOPE)),
    )
    inv.cuts = _cuts(inv.result, inv.model, inv.control)
    return inv
