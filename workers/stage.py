"""The stages of one invocation: decode → execute (source I/O, under a deadline) → project
(pure, `contracts/`) → the two views. Used by the worker and by `aci-evidence call --local`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, Final, cast

import anyio
import msgspec
from msgspec import UNSET, UnsetType

from contracts import (
    CanonicalResult,
    ErrorCode,
    ErrorResult,
    ModelObservation,
    Request,
    Timings,
    build_views,
    decode_invocation,
    error_result,
    fingerprint_scope,
    normalise_scope,
    project,
)
from contracts.results import LogsResult
from contracts.views import ControlView
from contracts.window import format_utc_ms, pin_scope, window_bounds, with_window
from pipeline.settings import Settings
from pipeline.window import LOG_TOOL, call_end
from workers.sources import ImmediateSource, Source, SourceError
from workers.sources.calltime import CallTime, at_call_time
from workers.sources.identity import source_identity

__all__ = [
    "Outcome",
    "StageRun",
    "build_outcome",
    "is_immediate",
    "project_safely",
    "run_stages",
    "scope_of",
]

log = logging.getLogger("aci.stage")
_ENCODER: Final = msgspec.json.Encoder()
# `_ms3`: far above the rounding error of `ms * 1000` (half an ulp: a relative 2**-53), and
# where every float is an integer.
_TIE_BAND: Final = 2.0**-50
_EXACT_BELOW: Final = 2.0**52


class Outcome(msgspec.Struct, kw_only=True):
    """Everything one run of the stages produced."""

    result: CanonicalResult
    raw: bytes  # the raw upstream answer as JSON (bounded), or b"null" when none
    observation: ModelObservation
    control: ControlView


def scope_of(
    tool: str, request: Request, settings: Settings, as_of_ms: int | None = None
) -> tuple[dict[str, Any], str]:
    """Normalised scope and its fingerprint (which covers a pinned as-of, `contracts.window`)."""
    scope = normalise_scope(tool, request, settings.default_lookback)
    return scope, fingerprint_scope(pin_scope(scope, as_of_ms))


def _unavailable(tool_call_id: str) -> CanonicalResult:
    return error_result(
        ErrorCode.UNAVAILABLE, "this tool is not available on this worker", tool_call_id
    )


def _failed(tool: str, exc: Exception, tool_call_id: str) -> CanonicalResult:
    if isinstance(exc, SourceError):
        return error_result(exc.code, exc.message, tool_call_id)
    # A source bug must become an ERROR result, never "no evidence".
    log.warning("source for %s failed: %s", tool, type(exc).__name__)
    return error_result(ErrorCode.EXECUTION, "the source failed", tool_call_id)


async def _execute(
    tool: str,
    request: Request,
    tool_call_id: str,
    sources: Mapping[str, Source],
    settings: Settings,
) -> tuple[Any, CanonicalResult | None]:
    source = sources.get(tool)
    if source is None:
        return None, _unavailable(tool_call_id)
    try:
        with anyio.fail_after(settings.deadline_s):
            return await source.fetch(request), None
    except TimeoutError:
        return None, error_result(
            ErrorCode.TIMEOUT, "the query did not finish within its time limit", tool_call_id
        )
    except Exception as exc:
        return None, _failed(tool, exc, tool_call_id)


def _execute_now(
    tool: str, request: Request, tool_call_id: str, sources: Mapping[str, Source]
) -> tuple[Any, CanonicalResult | None]:
    source = sources.get(tool)
    if source is None:
        return None, _unavailable(tool_call_id)
    try:
        return cast(ImmediateSource, source).fetch_now(request), None
    except Exception as exc:
        return None, _failed(tool, exc, tool_call_id)


def _ms3(ms: float) -> float:
    """`round(ms, 3)`, at half its cost where the scaled value is not near a tie (rounding
    an integer is cheaper than rounding to decimals); near one, or out of range, the same
    `round(ms, 3)` decides."""
    scaled = ms * 1000
    if 0.0 <= scaled < _EXACT_BELOW and abs(scaled % 1.0 - 0.5) > scaled * _TIE_BAND:
        return round(scaled) / 1000
    return round(ms, 3)


def _encode_raw(raw: Any, limit: int) -> bytes:
    try:
        data = _ENCODER.encode(raw)
    except (TypeError, ValueError, OverflowError, RecursionError):
        return b'{"omitted":"not encodable"}'
    if len(data) > limit:
        return _ENCODER.encode({"omitted": "too large", "bytes": len(data)})
    return data


def _identity(sources: Mapping[str, Source], tool: str, request: Request) -> dict[str, str] | None:
    try:
        return source_identity(sources.get(tool), request)
    except Exception:  # an identity never fails a call
        return None


def is_immediate(tool: str, sources: Mapping[str, Source]) -> bool:
    """Whether a call of `tool` runs without I/O: no source for it (an ERROR at once), or an
    `ImmediateSource`. Such calls can go through `StageRun.run_now`."""
    source = sources.get(tool)
    return source is None or callable(getattr(source, "fetch_now", None))


class StageRun(msgspec.Struct, kw_only=True):
    """One invocation's run of the stages: decode, execute, project, both views.

    `run` awaits the source under the deadline; `run_now` is the same run without awaiting
    anything, for a call where `is_immediate` holds. Failures come back as ERROR results."""

    tool: str
    tool_call_id: object
    arguments: object
    session_id: str
    settings: Settings
    attempts: int = 1
    duplicate_of: str | UnsetType = UNSET
    queued_ms: float = 0.0
    started: float = 0.0
    decoded: Request | ErrorResult | None = None
    scope: dict[str, Any] | UnsetType = UNSET
    fingerprint: str | UnsetType = UNSET
    # Incident time: a harness's pinned as-of, and the window end admission recorded (epoch
    # ms; `pipeline.window`). A log call reads that window; None: resolved here, at the start.
    as_of_ms: int | None = None
    window_end_ms: int | None = None
    # What the source answered from (workers.sources.identity), for the Control View.
    source: dict[str, str] | None = None

    async def run(self, sources: Mapping[str, Source]) -> Outcome:
        request = self.decode()
        if request is None:
            return self.outcome(None, None)
        assert isinstance(self.tool_call_id, str)
        when, refused = self._call_time()
        if refused is not None:
            return self.outcome(None, refused)
        with at_call_time(when):
            found = await _execute(self.tool, request, self.tool_call_id, sources, self.settings)
        self.source = _identity(sources, self.tool, request)
        return self.outcome(*found)

    def run_now(self, sources: Mapping[str, Source]) -> Outcome:
        request = self.decode()
        if request is None:
            return self.outcome(None, None)
        assert isinstance(self.tool_call_id, str)
        when, refused = self._call_time()
        if refused is not None:
            return self.outcome(None, refused)
        with at_call_time(when):
            found = _execute_now(self.tool, request, self.tool_call_id, sources)
        self.source = _identity(sources, self.tool, request)
        return self.outcome(*found)

    def _call_time(self) -> tuple[CallTime | None, CanonicalResult | None]:
        # A log call's window end: the recorded one, else decided now (and kept, so the
        # Control View shows the window that was read); an as-of it cannot use is SCHEMA.
        if self.tool != LOG_TOOL:
            return None, None
        end, problem = call_end(self.as_of_ms, self.window_end_ms, int(time.time() * 1000))
        if problem:
            assert isinstance(self.tool_call_id, str)
            return None, error_result(ErrorCode.SCHEMA, problem, self.tool_call_id)
        self.window_end_ms = end
        return CallTime(end, self.as_of_ms is not None), None

    def control_scope(self, result: CanonicalResult) -> dict[str, Any] | UnsetType:
        """The scope the Control View shows: with a pinned as-of, and for a log call the
        absolute window it read (the executed one; for an ERROR, the recorded one)."""
        if not isinstance(self.scope, dict) or self.tool != LOG_TOOL:
            return self.scope
        scope = pin_scope(self.scope, self.as_of_ms)
        if isinstance(result, LogsResult):
            return with_window(scope, result.scope.start_time, result.scope.end_time)
        lookback = scope.get("lookback_minutes")
        if self.window_end_ms is None or not isinstance(lookback, int):
            return scope
        start, end = window_bounds(lookback, self.window_end_ms)
        return with_window(scope, format_utc_ms(start), format_utc_ms(end))

    def decode(self) -> Request | None:
        """The request, or None when the call is already an ERROR (nothing to fetch)."""
        self.started = time.perf_counter()
        if self.decoded is not None and (
            isinstance(self.decoded, ErrorResult) or self.fingerprint is not UNSET
        ):  # decoded (and scoped) already, by the worker's admission
            return None if isinstance(self.decoded, ErrorResult) else self.decoded
        decoded = self.decoded = decode_invocation(self.tool, self.tool_call_id, self.arguments)
        if isinstance(decoded, ErrorResult):
            return None
        self.scope, self.fingerprint = scope_of(self.tool, decoded, self.settings, self.as_of_ms)
        return decoded

    def outcome(self, raw: Any, failed: CanonicalResult | None) -> Outcome:
        executed = time.perf_counter()
        execute_ms = project_ms = 0.0
        if isinstance(self.decoded, ErrorResult):
            result: CanonicalResult = self.decoded
        else:
            assert self.decoded is not None and isinstance(self.tool_call_id, str)
            execute_ms = (executed - self.started) * 1000
            if failed is not None:
                result = failed
            else:
                result = project_safely(
                    self.tool, self.decoded, self.tool_call_id, raw, self.settings
                )
            project_ms = (time.perf_counter() - executed) * 1000
        return build_outcome(
            result=result,
            raw=raw,
            tool=self.tool,
            session_id=self.session_id,
            settings=self.settings,
            scope=self.control_scope(result),
            fingerprint=self.fingerprint,
            duplicate_of=self.duplicate_of,
            attempts=self.attempts,
            timings=Timings(
                queue_ms=_ms3(self.queued_ms),
                execute_ms=_ms3(execute_ms),
                project_ms=_ms3(project_ms),
                total_ms=_ms3(self.queued_ms + (time.perf_counter() - self.started) * 1000),
            ),
            source=self.source,
        )


async def run_stages(
    *,
    tool: str,
    tool_call_id: object,
    arguments: object,
    session_id: str,
    sources: Mapping[str, Source],
    settings: Settings,
    attempts: int = 1,
    duplicate_of: str | UnsetType = UNSET,
    queued_ms: float = 0.0,
    as_of_ms: int | None = None,
    window_end_ms: int | None = None,
) -> Outcome:
    """Run one invocation through every stage; failures come back as ERROR results. A log
    call reads the window ending at `window_end_ms` (recorded at admission) when given."""
    run = StageRun(
        tool=tool,
        tool_call_id=tool_call_id,
        arguments=arguments,
        session_id=session_id,
        settings=settings,
        attempts=attempts,
        duplicate_of=duplicate_of,
        queued_ms=queued_ms,
        as_of_ms=as_of_ms,
        window_end_ms=window_end_ms,
    )
    return await run.run(sources)


def project_safely(
    tool: str, request: Request, tool_call_id: str, raw: Any, settings: Settings
) -> CanonicalResult:
    """The pure projection; a projector bug on odd input becomes ERROR/PROJECTION, not a crash
    (used by the worker and by replay alike)."""
    try:
        return project(tool, request, tool_call_id, raw, settings.bounds)
    except Exception as exc:
        log.warning("projection of %s failed: %s", tool, type(exc).__name__)
        return error_result(
            ErrorCode.PROJECTION, "the source's answer could not be projected", tool_call_id
        )


def build_outcome(
    *,
    result: CanonicalResult,
    raw: Any,
    tool: str,
    session_id: str,
    settings: Settings,
    scope: dict[str, Any] | UnsetType = UNSET,
    fingerprint: str | UnsetType = UNSET,
    duplicate_of: str | UnsetType = UNSET,
    attempts: int = 1,
    timings: Timings | None = None,
    keep_raw: bool = True,
    source: dict[str, str] | None = None,
) -> Outcome:
    """Both views of a result, and the raw answer encoded for the record (`keep_raw=False`,
    for replay: not encoded, `Outcome.raw` is b"null"). A result whose views cannot be built
    (e.g. a string no encoder takes) becomes that call's ERROR/PROJECTION."""

    meta: dict[str, Any] = {
        "tool": tool,
        "session_id": session_id,
        "scope": scope,
        "fingerprint": fingerprint,
        "duplicate_of": duplicate_of,
        "attempts": attempts,
        "timings": timings or Timings(),
        "source": UNSET if source is None else source,
        **_index_notes(raw),
    }
    try:
        observation, control = build_views(result, settings.bounds, **meta)
    except Exception as exc:
        # `observe` encodes every string of the result once (its first, uncut view), so a
        # result it takes is one the finisher can encode too.
        log.warning("views of %s failed: %s", tool, type(exc).__name__)
        result = error_result(
            ErrorCode.PROJECTION, "the source's answer could not be projected", result.tool_call_id
        )
        observation, control = build_views(result, settings.bounds, **meta)
    return Outcome(
        result=result,
        raw=_encode_raw(raw, settings.raw_max_bytes) if keep_raw else b"null",
        observation=observation,
        control=control,
    )


def _index_notes(raw: Any) -> dict[str, Any]:
    """The embedded index's own notes for the Control View: its size beside the hits
    (`indexedChunks`), answered by the previous index while a rebuild runs
    (`indexRebuilding`), runbooks left out as too large (`skippedSources`, at most 20 names
    of at most 256 characters)."""
    pack = raw.get("contextPack") if isinstance(raw, dict) else None
    if not isinstance(pack, dict):
        return {}
    notes: dict[str, Any] = {}
    count = pack.get("indexedChunks")
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        notes["indexed_chunks"] = count
    if pack.get("indexRebuilding") is True:
        notes["index_rebuilding"] = True
    skipped = pack.get("skippedSources")
    if isinstance(skipped, list):
        names = [s[:256] for s in skipped[:20] if isinstance(s, str)]
        if names:
            notes["skipped_runbooks"] = names
    return notes
