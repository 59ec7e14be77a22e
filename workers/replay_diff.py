"""The core of replay: one recorded invocation, re-projected (or re-executed) and diffed.

A `Recording` is one invocation as the pipeline stored it (its state hash) and as an export
line carries it. `reproject` runs the recorded raw upstream answer through today's
`contracts.project` / `observe` / `control_view` (via `workers.stage.build_outcome`, the code
the worker runs); `reexecute` runs the recorded request against today's sources. Both diff the
result, the Model Observation and the Control View against what was published, per field path.

Fields that legitimately differ on replay are ignored: the Control View's `timings` (wall
clock) and `attempts` (delivery count). A log call re-executes over the window its admission
recorded (`window_end_ms` in its envelope), so a re-execute a week later reads the same
records; only a recording made before windows were recorded resolves a new one, and then its
scope's `start_time` / `end_time` (which move with the clock) are not compared.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

from contracts import (
    CONTRACT_VERSION,
    CanonicalResult,
    ErrorResult,
    Timings,
    decode_invocation,
    decode_result,
)
from pipeline.envelope import EnvelopeError, Invocation, decode_envelope
from pipeline.record import (
    CONTROL,
    DUPLICATE_OF,
    ENVELOPE,
    FINGERPRINT,
    MODEL,
    RAW,
    RESULT,
    STATUS,
    SUBMITTED_AT,
    TOOL,
)
from pipeline.settings import Settings
from workers.json_depth import MAX_DEPTH, too_deep
from workers.sources import Source
from workers.stage import Outcome, build_outcome, project_safely, run_stages, scope_of

__all__ = [
    "IGNORED",
    "Change",
    "Recording",
    "Verdict",
    "diff_json",
    "reexecute",
    "render_value",
    "reproject",
]

VIEWS: Final = (("result", RESULT), ("model", MODEL), ("control", CONTROL))
# view → top-level fields ignored by the diff (see the module docstring).
IGNORED: Final[dict[str, frozenset[str]]] = {
    "control": frozenset({"timings", "attempts", "source"})  # source: checked by app.replay
}
_CLOCK_PATHS: Final = frozenset({"$.scope.start_time", "$.scope.end_time"})
_ENCODER: Final = msgspec.json.Encoder()


class Recording(msgspec.Struct, kw_only=True):
    """One recorded invocation: its state hash fields (bytes, as stored) and identity."""

    session: str
    tool_call_id: str
    fields: dict[str, bytes]
    lifecycle: list[dict[str, str]] = msgspec.field(default_factory=list)

    def text(self, name: str) -> str:
        """A state field as text ('' when absent)."""
        return self.fields.get(name, b"").decode("utf-8", "replace")

    @property
    def t0(self) -> int:
        """Submission time (epoch ms), 0 when unknown."""
        text = self.text(SUBMITTED_AT)
        return int(text) if text.isdigit() else 0


class Change(msgspec.Struct, frozen=True, kw_only=True):
    """One changed field: view, JSON path, and the recorded and replayed values."""

    view: str
    path: str
    recorded: Any
    replayed: Any

    def render(self) -> str:
        """`result $.evidence[0].excerpt: 'a' → 'b'`."""
        old, new = render_value(self.recorded), render_value(self.replayed)
        return f"{self.view} {self.path}: {old} → {new}"


Kind = Literal["identical", "changed", "failed", "skipped", "submitted"]


class Verdict(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What replaying one recording found."""

    session: str
    tool_call_id: str
    tool: str
    outcome: Kind
    reason: str = ""
    contract_version: int | None = None
    changes: list[Change] = msgspec.field(default_factory=list)


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


ABSENT: Final = _Absent()


def render_value(value: Any, limit: int = 80) -> str:
    """A short, readable rendering of a JSON value for diff lines."""
    if value is ABSENT:
        return "<absent>"
    text = repr(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _key(path: str, key: str) -> str:
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{json.dumps(key)}]"


def diff_json(old: Any, new: Any, path: str = "$") -> Iterator[tuple[str, Any, Any]]:
    """Yield `(path, old, new)` for each differing leaf (lists by index, dicts by key)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in list(old) + [k for k in new if k not in old]:
            yield from diff_json(old.get(key, ABSENT), new.get(key, ABSENT), _key(path, key))
    elif isinstance(old, list) and isinstance(new, list):
        for index in range(max(len(old), len(new))):
            a = old[index] if index < len(old) else ABSENT
            b = new[index] if index < len(new) else ABSENT
            yield from diff_json(a, b, f"{path}[{index}]")
    elif old != new or type(old) is not type(new):
        yield path, old, new


def _envelope_version(data: bytes) -> int | None:
    try:
        value = _decode_json(data, "envelope")
    except _Unreplayable:
        if too_deep(data):
            raise
        return None
    version = value.get("v") if isinstance(value, dict) else None
    return version if isinstance(version, int) and not isinstance(version, bool) else None


class _Unreplayable(Exception):
    def __init__(self, reason: str, version: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.version = version


def _decode_json(data: bytes, what: str) -> Any:
    """A recorded body decoded; one nested deeper than `MAX_DEPTH` (which would exhaust the
    recursion of the decoder, the diff or the encoder) or not JSON is unreplayable."""
    try:
        if not too_deep(data):
            return msgspec.json.decode(data)
    except msgspec.DecodeError:
        raise _Unreplayable(f"undecodable recording: the recorded {what} is not JSON") from None
    except RecursionError:  # only when the caller's stack is itself unusually deep
        pass
    raise _Unreplayable(
        f"undecodable recording: the recorded {what} nests deeper than {MAX_DEPTH} levels"
    )


def _decode_envelope(rec: Recording) -> Invocation:
    data = rec.fields.get(ENVELOPE, b"")
    version = _envelope_version(data)
    if version is None:
        raise _Unreplayable("undecodable recording: the envelope is not a versioned invocation")
    if version != CONTRACT_VERSION:
        raise _Unreplayable(
            f"recorded under contract v{version}, this build speaks v{CONTRACT_VERSION}", version
        )
    try:
        return decode_envelope(data)
    except EnvelopeError as exc:
        raise _Unreplayable(f"undecodable recording: {exc}", version) from None


def _recorded(rec: Recording) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for view, field in VIEWS:
        data = rec.fields.get(field)
        if not data:
            raise _Unreplayable(f"incomplete recording: no {view} was recorded")
        out[view] = _decode_json(data, view)
    return out


def _omitted(raw: Any) -> bool:
    return isinstance(raw, dict) and "omitted" in raw and set(raw) <= {"omitted", "bytes"}


def _meta(rec: Recording, control: dict[str, Any]) -> tuple[str | UnsetType, int, Timings]:
    dup = rec.text(DUPLICATE_OF)
    attempts = control.get("attempts")
    try:
        timings = msgspec.convert(control.get("timings") or {}, Timings)
    except msgspec.ValidationError:
        timings = Timings()
    return (dup or UNSET), attempts if isinstance(attempts, int) else 1, timings


def _recorded_scope(
    rec: Recording, control: dict[str, Any]
) -> tuple[dict[str, Any] | UnsetType, str | UnsetType]:
    scope = control.get("scope")
    fingerprint = control.get("scope_fingerprint") or rec.text(FINGERPRINT)
    if not isinstance(scope, dict) or not isinstance(fingerprint, str) or not fingerprint:
        return UNSET, UNSET
    return scope, fingerprint


def _project(
    rec: Recording, inv: Invocation, recorded: dict[str, Any], settings: Settings
) -> Outcome:
    decoded = decode_invocation(inv.tool, inv.tool_call_id, inv.arguments)
    duplicate_of, attempts, timings = _meta(rec, recorded["control"])
    scope: dict[str, Any] | UnsetType = UNSET
    fingerprint: str | UnsetType = UNSET
    raw: Any = None
    if isinstance(decoded, ErrorResult):
        result: CanonicalResult = decoded
    else:
        # Scope and fingerprint were decided at submission: carried as recorded (normalising
        # SQL costs more than projecting); `--reexecute` recomputes them.
        scope, fingerprint = _recorded_scope(rec, recorded["control"])
        if scope is UNSET:
            as_of = inv.as_of_ms if isinstance(inv.as_of_ms, int) else None
            scope, fingerprint = scope_of(inv.tool, decoded, settings, as_of)
        raw = _decode_json(rec.fields.get(RAW) or b"null", "raw answer")
        if _omitted(raw):
            raise _Unreplayable(f"raw not kept ({raw.get('omitted')})")
        if raw is None:
            if recorded["result"].get("evidence_status") != "ERROR":
                raise _Unreplayable("raw not kept")
            # The source failed then (timeout, unavailable, gave up): no answer to re-project;
            # the recorded result is carried and its views are rebuilt by today's code.
            try:
                result = decode_result(inv.tool, rec.fields[RESULT])
            except (msgspec.DecodeError, msgspec.ValidationError):
                raise _Unreplayable(
                    "undecodable recording: the recorded result does not fit the contract"
                ) from None
        else:
            result = project_safely(inv.tool, decoded, inv.tool_call_id, raw, settings)
    # The raw answer goes in for what the views derive from it (the index size in the
    # Control View); it is not encoded again.
    return build_outcome(
        result=result,
        raw=raw,
        keep_raw=False,
        tool=inv.tool,
        session_id=inv.session_id,
        settings=settings,
        scope=scope,
        fingerprint=fingerprint,
        duplicate_of=duplicate_of,
        attempts=attempts,
        timings=timings,
    )


def _compare(
    rec: Recording, recorded: dict[str, Any], outcome: Outcome, clock: bool
) -> list[Change]:
    changes: list[Change] = []
    replayed_bytes = {
        "result": _ENCODER.encode(outcome.result),
        "model": _ENCODER.encode(outcome.observation),
        "control": _ENCODER.encode(outcome.control),
    }
    for view, field in VIEWS:
        ignored = IGNORED.get(view, frozenset())
        if not ignored and rec.fields.get(field) == replayed_bytes[view]:
            continue  # byte-identical: the common, fast case
        old, new = recorded[view], msgspec.json.decode(replayed_bytes[view])
        if ignored and isinstance(old, dict) and isinstance(new, dict):
            old = {k: v for k, v in old.items() if k not in ignored}
            new = {k: v for k, v in new.items() if k not in ignored}
        if old == new:
            continue
        for path, a, b in diff_json(old, new):
            if clock and path in _CLOCK_PATHS:
                continue
            changes.append(Change(view=view, path=path, recorded=_plain(a), replayed=_plain(b)))
    return changes


def _plain(value: Any) -> Any:
    return None if value is ABSENT else value


def _verdict(rec: Recording, kind: Kind, **kw: Any) -> Verdict:
    return Verdict(
        session=rec.session,
        tool_call_id=rec.tool_call_id,
        tool=rec.text(TOOL),
        outcome=kind,
        **kw,
    )


# Issue 32: a call its submitter cancelled has no answer to re-project or to compare with.
CANCELLED_REASON: Final = "cancelled by its submitter (ERROR/CANCELLED): nothing ran to compare"


def _cancelled(recorded: dict[str, Any]) -> bool:
    error = recorded["result"].get("error") if isinstance(recorded["result"], dict) else None
    return isinstance(error, dict) and error.get("code") == "CANCELLED"


def _finished(rec: Recording) -> bool:
    return rec.text(STATUS) in ("READY", "ERROR")


def reproject(rec: Recording, settings: Settings) -> Verdict:
    """Re-project one recording with today's projectors and views, and diff."""
    if not _finished(rec):
        return _verdict(rec, "skipped", reason="not finished")
    try:
        inv = _decode_envelope(rec)
        recorded = _recorded(rec)
        if _cancelled(recorded):
            return _verdict(rec, "skipped", reason=CANCELLED_REASON)
        outcome = _project(rec, inv, recorded, settings)
    except _Unreplayable as exc:
        return _verdict(rec, "failed", reason=exc.reason, contract_version=exc.version)
    changes = _compare(rec, recorded, outcome, clock=False)
    return _verdict(rec, "changed" if changes else "identical", changes=changes)


async def reexecute(rec: Recording, settings: Settings, sources: Mapping[str, Source]) -> Verdict:
    """Run the recorded request against today's sources, project it, and diff."""
    if not _finished(rec):
        return _verdict(rec, "skipped", reason="not finished")
    try:
        inv = _decode_envelope(rec)
        recorded = _recorded(rec)
    except _Unreplayable as exc:
        return _verdict(rec, "failed", reason=exc.reason, contract_version=exc.version)
    if _cancelled(recorded):
        return _verdict(rec, "skipped", reason=CANCELLED_REASON)
    duplicate_of, attempts, _timings = _meta(rec, recorded["control"])
    window_end = inv.window_end_ms if isinstance(inv.window_end_ms, int) else None
    outcome = await run_stages(
        tool=inv.tool,
        tool_call_id=inv.tool_call_id,
        arguments=inv.arguments,
        session_id=inv.session_id,
        sources=sources,
        settings=settings,
        attempts=attempts,
        duplicate_of=duplicate_of,
        as_of_ms=inv.as_of_ms if isinstance(inv.as_of_ms, int) else None,
        window_end_ms=window_end,
    )
    changes = _compare(rec, recorded, outcome, clock=window_end is None)
    return _verdict(rec, "changed" if changes else "identical", changes=changes)
