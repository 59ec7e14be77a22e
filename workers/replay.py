"""Recorded invocations: selected, loaded, exported, imported and re-submitted (the library
behind `aci-evidence replay`, `export` and `import`, whose commands are in `app/replay.py`).

Invocations are selected from the state hashes of the sessions (the sessions zset lists them),
or from an export file. Re-projection and re-execution are in `workers.replay_diff`;
`reinject` re-submits recordings under a new session with their original tool call ids, for
live workers.

An export line is one invocation: `{"format": 1, "session", "tool_call_id", "state": {st, eid,
t0, t1, tool, dup, fp, ev, sk}, "envelope", "result", "raw", "model", "control", "lifecycle"}`,
recorded JSON kept byte for byte (text that is not JSON is kept as a JSON string). Import
writes the state hashes and the session's view streams, never the invocations stream (so
nothing is executed again) and never the lifecycle stream (it is not live activity).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Final

import anyio
import msgspec
from msgspec import UNSET, UnsetType

from pipeline.inspect import session_call_ids
from pipeline.keys import Keys
from pipeline.record import (
    CONTROL,
    DUPLICATE_OF,
    ENTRY_CALL,
    ENTRY_ID,
    ENTRY_SESSION,
    ENVELOPE,
    EVIDENCE,
    FINGERPRINT,
    MODEL,
    RAW,
    RESULT,
    STATE_FIELDS,
    STATUS,
    TOOL,
    queue_write,
    read_records,
    view_fields,
)
from pipeline.redis_io import Redis, call_redis, execute
from pipeline.settings import Settings
from workers.json_depth import too_deep, top_level_members
from workers.replay_diff import Recording, Verdict

__all__ = [
    "ExportLine",
    "ReplayError",
    "Selection",
    "export_session",
    "import_lines",
    "load_file",
    "load_redis",
    "reinject",
]

EXPORT_FORMAT: Final = 1
_BODIES: Final = (
    ("envelope", ENVELOPE),
    ("result", RESULT),
    ("raw", RAW),
    ("model", MODEL),
    ("control", CONTROL),
)
_ENCODER: Final = msgspec.json.Encoder()
_ALL_CALLS: Final = 2**31  # a session's calls, however many


class ReplayError(Exception):
    """Bad replay input: a missing file, a line that is not an export, a bad time or id."""


class ExportLine(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One exported invocation (one JSON Lines line)."""

    format: int
    session: str
    tool_call_id: str
    state: dict[str, str] = msgspec.field(default_factory=dict)
    envelope: msgspec.Raw | UnsetType = UNSET
    result: msgspec.Raw | UnsetType = UNSET
    raw: msgspec.Raw | UnsetType = UNSET
    model: msgspec.Raw | UnsetType = UNSET
    control: msgspec.Raw | UnsetType = UNSET
    lifecycle: list[dict[str, str]] = msgspec.field(default_factory=list)


_LINE_DECODER: Final = msgspec.json.Decoder(ExportLine)


class Selection(msgspec.Struct, frozen=True, kw_only=True):
    """Which recorded invocations to replay."""

    session: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    tool: str | None = None
    status: str | None = None
    evidence: str | None = None
    tool_call_id: str | None = None

    def admits(self, rec: Recording) -> bool:
        """Whether a recording matches every given criterion."""
        return (
            (self.session is None or rec.session == self.session)
            and (self.tool_call_id is None or rec.tool_call_id == self.tool_call_id)
            and (self.tool is None or rec.text(TOOL) == self.tool)
            and (self.status is None or rec.text(STATUS) == self.status)
            and (self.evidence is None or rec.text(EVIDENCE) == self.evidence)
            and (self.since_ms is None or rec.t0 >= self.since_ms)
            and (self.until_ms is None or rec.t0 <= self.until_ms)
        )


async def _call_keys(redis: Redis, keys: Keys, session: str) -> list[str]:
    # The session's call index (and, for calls recorded before it, key names).
    return await session_call_ids(redis, keys, session, _ALL_CALLS)


async def load_redis(redis: Redis, settings: Settings, selection: Selection) -> list[Recording]:
    """The recorded invocations matching `selection`, ordered by submission time."""
    keys = settings.keys()
    if selection.session is not None:
        sessions = [selection.session]
    else:
        low = selection.since_ms if selection.since_ms is not None else "-inf"
        sessions = []
        for part in keys.parts:  # each partition indexes its own sessions
            names = await call_redis(redis.zrangebyscore(part.sessions, low, "+inf"))
            sessions.extend(n.decode() if isinstance(n, bytes) else n for n in names)
    pairs: list[tuple[str, str]] = []
    for session in sessions:
        if selection.tool_call_id is not None:
            pairs.append((session, selection.tool_call_id))
        else:
            pairs.extend((session, i) for i in await _call_keys(redis, keys, session))
    records: list[Recording] = []
    for start in range(0, len(pairs), 500):
        chunk = pairs[start : start + 500]
        for (session, tool_call_id), fields in zip(
            chunk, await read_records(redis, keys, chunk), strict=True
        ):
            if not fields:
                continue
            rec = Recording(session=session, tool_call_id=tool_call_id, fields=fields)
            if selection.admits(rec):
                records.append(rec)
    records.sort(key=lambda r: (r.t0, r.text(ENTRY_ID), r.tool_call_id))
    return records


# -- export / import -------------------------------------------------------------------


def _to_raw(data: bytes) -> msgspec.Raw:
    try:
        if too_deep(data):  # kept as its text, which import restores byte for byte
            raise msgspec.DecodeError("nested too deep")
        value = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return msgspec.Raw(_ENCODER.encode(data.decode("utf-8", "replace")))
    if b"\n" in data or b"\r" in data:
        return msgspec.Raw(_ENCODER.encode(value))  # keep one invocation per line
    return msgspec.Raw(data)


def _from_raw(raw: msgspec.Raw) -> bytes:
    data = bytes(raw)
    if data[:1] == b'"':
        text: str = msgspec.json.decode(data)
        return text.encode()
    return data


def to_line(rec: Recording) -> ExportLine:
    """The export line of a recording."""
    bodies = {name: _to_raw(rec.fields[f]) for name, f in _BODIES if f in rec.fields}
    state = {f: rec.text(f) for f in STATE_FIELDS if f in rec.fields}
    return ExportLine(
        format=EXPORT_FORMAT,
        session=rec.session,
        tool_call_id=rec.tool_call_id,
        state=state,
        lifecycle=rec.lifecycle,
        **bodies,
    )


def from_line(line: ExportLine) -> Recording:
    """The recording an export line carries."""
    fields = {k: v.encode() for k, v in line.state.items()}
    for name, field in _BODIES:
        value = getattr(line, name)
        if value is not UNSET:
            fields[field] = _from_raw(value)
    return Recording(
        session=line.session,
        tool_call_id=line.tool_call_id,
        fields=fields,
        lifecycle=line.lifecycle,
    )


def _decode_line(data: bytes) -> tuple[ExportLine, dict[str, bytes]]:
    """One export line, and the fields of the bodies too deep to decode (kept as their text,
    for replay to report): a line too deep to decode whole is split into its members."""
    try:
        return _LINE_DECODER.decode(data), {}
    except RecursionError:
        pass
    members = top_level_members(data)
    if members is None:
        raise msgspec.DecodeError("nested too deep to decode")
    names = {f'"{name}"'.encode(): field for name, field in _BODIES}
    deep = {names[k]: v for k, v in members if k in names and too_deep(v)}
    shallow = b",".join(k + b":" + v for k, v in members if names.get(k) not in deep)
    try:
        line = _LINE_DECODER.decode(b"{" + shallow + b"}")
    except RecursionError:
        raise msgspec.DecodeError("nested too deep to decode") from None
    return line, {field: _from_raw(msgspec.Raw(text)) for field, text in deep.items()}


def load_file(path: str, selection: Selection | None = None) -> list[Recording]:
    """Recordings from an export file (all, or those `selection` admits)."""
    try:
        with open(path, "rb") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        raise ReplayError(f"cannot read {path}: {exc.strerror}") from None
    records: list[Recording] = []
    for number, data in enumerate(lines, 1):
        if not data.strip():
            continue
        try:
            line, deep = _decode_line(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ReplayError(f"{path}:{number}: not an aci-evidence export line ({exc})") from None
        if line.format != EXPORT_FORMAT:
            raise ReplayError(
                f"{path}:{number}: export format {line.format}, this build reads {EXPORT_FORMAT}"
            )
        rec = from_line(line)
        rec.fields.update(deep)
        if selection is None or selection.admits(rec):
            records.append(rec)
    return records


async def _lifecycle_of(redis: Redis, keys: Keys, records: list[Recording]) -> None:
    if not records:
        return
    by_id = {r.tool_call_id: r for r in records}
    session = records[0].session
    lifecycle = keys.for_session(session).lifecycle
    cursor = f"{min(r.t0 for r in records)}-0"
    while True:
        batch = await call_redis(redis.xrange(lifecycle, min=cursor, max="+", count=10_000))
        for entry_id, raw in batch:
            fields = {k.decode(): v.decode("utf-8", "replace") for k, v in raw.items()}
            rec = by_id.get(fields.get(ENTRY_CALL, ""))
            if rec is not None and fields.get(ENTRY_SESSION) == session:
                rec.lifecycle.append({"entry": entry_id.decode(), **fields})
        if len(batch) < 10_000:
            return
        cursor = "(" + batch[-1][0].decode()


async def export_session(redis: Redis, settings: Settings, session: str, path: str) -> int:
    """Write a session's invocations (with their lifecycle entries) to `path`; the count
    (0: the session has none, and `path` is not written)."""
    records = await load_redis(redis, settings, Selection(session=session))
    if not records:  # nothing to export: no (empty) file is written
        return 0
    await _lifecycle_of(redis, settings.keys(), records)
    data = b"".join(_ENCODER.encode(to_line(r)) + b"\n" for r in records)
    await anyio.Path(path).write_bytes(data)
    return len(records)


def _rehome(rec: Recording, session: str) -> Recording:
    """The recording moved to another session (its envelope and Control View say so)."""
    fields = dict(rec.fields)
    for field, key in ((ENVELOPE, "session_id"), (CONTROL, "session_id")):
        data = fields.get(field, b"")
        try:
            value = None if too_deep(data) else msgspec.json.decode(data)
        except (msgspec.DecodeError, RecursionError):
            continue  # undecodable stays as recorded: replay reports it
        if isinstance(value, dict) and key in value:
            value[key] = session
            fields[field] = _ENCODER.encode(value)
    return Recording(session=session, tool_call_id=rec.tool_call_id, fields=fields)


async def import_lines(
    redis: Redis, settings: Settings, records: Iterable[Recording], session: str | None = None
) -> Counter[str]:
    """Write finished recordings into Redis (optionally under `session`); counts of
    imported / existing (left alone) / unfinished (skipped)."""
    keys, counts = settings.keys(), Counter[str]()
    ttl = settings.retention_s * 1000
    for rec in records:
        if session is not None and session != rec.session:
            rec = _rehome(rec, session)
        if rec.text(STATUS) not in ("READY", "ERROR"):
            counts["unfinished"] += 1
            continue
        key = keys.call(rec.session, rec.tool_call_id)
        if await call_redis(redis.exists(key)):
            counts["existing"] += 1
            continue
        pipe = redis.pipeline(transaction=True)
        queue_write(pipe, keys, rec.session, rec.tool_call_id, rec.fields, ttl)
        pipe.zadd(keys.for_session(rec.session).sessions, {rec.session: rec.t0}, gt=True)
        # Its session's call index, in the same transaction as the record (the janitor gives
        # the index its records' lifetime when the session leaves the sessions index).
        pipe.zadd(keys.calls(rec.session), {rec.tool_call_id: rec.t0})
        pipe.persist(keys.calls(rec.session))
        for stream, field in (
            (keys.model(rec.session), MODEL),
            (keys.control(rec.session), CONTROL),
        ):
            pipe.xadd(
                stream,
                view_fields(rec.tool_call_id, rec.fields.get(field, b"null")),
                maxlen=settings.stream_maxlen,
                approximate=True,
            )
            pipe.pexpire(stream, ttl)
        fingerprint = rec.text(FINGERPRINT)
        if fingerprint and not rec.text(DUPLICATE_OF):
            pipe.hsetnx(keys.fingerprints(rec.session), fingerprint, rec.tool_call_id)
            pipe.pexpire(keys.fingerprints(rec.session), ttl)
        await execute(pipe)
        counts["imported"] += 1
    return counts


async def reinject(
    redis: Redis,
    settings: Settings,
    records: Sequence[Recording],
    into: str,
    report: Callable[[Verdict], None],
) -> None:
    """Submit the recorded requests again under session `into`, with their original tool
    call ids and trace parents, for live workers to run; `report` is told each one's verdict
    (submitted, or failed when its envelope does not decode). A log call is pinned to the
    end of the window its admission recorded, so it reads the same records again."""
    from contracts.window import format_utc_ms
    from pipeline.client import EvidenceClient, ToolCall
    from pipeline.envelope import EnvelopeError, decode_envelope

    groups: dict[tuple[str, str], list[ToolCall]] = {}
    for rec in records:
        try:
            data = rec.fields.get(ENVELOPE, b"")
            if too_deep(data):
                raise EnvelopeError("not an invocation envelope: nested too deep")
            inv = decode_envelope(data)
        except EnvelopeError as exc:
            report(
                Verdict(
                    session=rec.session,
                    tool_call_id=rec.tool_call_id,
                    tool=rec.text(TOOL),
                    outcome="failed",
                    reason=str(exc),
                )
            )
            continue
        call = ToolCall(tool=inv.tool, tool_call_id=inv.tool_call_id, arguments=inv.arguments)
        end = inv.window_end_ms
        as_of = format_utc_ms(end) if isinstance(end, int) else ""
        groups.setdefault((inv.traceparent or "", as_of), []).append(call)
        report(
            Verdict(session=into, tool_call_id=rec.tool_call_id, tool=inv.tool, outcome="submitted")
        )
    async with EvidenceClient(redis, settings) as client:
        for (traceparent, as_of), calls in groups.items():
            for start in range(0, len(calls), 500):
                await client.submit_many(
                    into,
                    calls[start : start + 500],
                    traceparent=traceparent or None,
                    as_of=as_of or None,
                )
