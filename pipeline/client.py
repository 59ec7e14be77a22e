"""Submitting framework tool calls and reading their results: `EvidenceClient`.

    async with EvidenceClient.connect(settings) as client:
        calls = [ToolCall(tool="query_logs", tool_call_id="call_1", arguments="{...}")]
        results = await client.call_many("sess-1", calls)

Submitting the same (session, tool call id) twice is idempotent: one invocation, one result.
A client-side timeout never loses a result: it stays readable with `result()`.
A call whose tool call id is invalid is answered at once with the contract's
`INVALID_TOOL_CALL_ID` error and never enqueued (there is no id to key it by, and none is minted).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

import anyio
import msgspec
from anyio.abc import TaskGroup
from msgspec import UNSET, UnsetType

from contracts import (
    Bounds,
    ErrorResult,
    InvocationMeta,
    LifecycleStatus,
    control_view,
    decode_invocation,
    encode_view,
    fingerprint_scope,
    is_valid_tool_call_id,
    normalise_scope,
    observe,
)
from pipeline.envelope import Invocation, encode_envelope
from pipeline.keys import Keys, is_valid_session_id
from pipeline.redis_io import (
    PipelineError,
    Redis,
    Scripts,
    call_redis,
    execute,
    open_redis,
)
from pipeline.settings import Settings

__all__ = ["CallResult", "EvidenceClient", "InvalidSessionId", "ToolCall"]

_ENCODER: Final = msgspec.json.Encoder()


class InvalidSessionId(ValueError):
    """Session ids are 1-128 characters of letters, digits, `.`, `_` and `-`."""


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """One framework tool call: name, the framework's id, and its arguments (JSON or object)."""

    tool: str
    tool_call_id: Any
    arguments: Any


class CallResult(msgspec.Struct, frozen=True, kw_only=True):
    """A final invocation: lifecycle status and both views (as published JSON)."""

    tool_call_id: str | UnsetType
    lifecycle: LifecycleStatus
    model: msgspec.Raw
    control: msgspec.Raw

    def as_json(self) -> bytes:
        """`{"lifecycle": ..., "model": {...}, "control": {...}}`."""
        return _ENCODER.encode(
            {"lifecycle": self.lifecycle, "model": self.model, "control": self.control}
        )


def _arguments_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    if isinstance(arguments, bytes | bytearray):
        return bytes(arguments).decode("utf-8", "replace")
    try:
        return _ENCODER.encode(arguments).decode()
    except (TypeError, ValueError, OverflowError):
        return "null"  # not JSON-shaped: the worker answers with a SCHEMA error


def rejected_locally(call: ToolCall, session_id: str, bounds: Bounds) -> CallResult:
    """The ERROR answer for a call with an invalid tool call id (not enqueued, nothing minted)."""
    result = decode_invocation(call.tool, call.tool_call_id, call.arguments)
    assert isinstance(result, ErrorResult)
    observation = observe(result, bounds)
    meta = InvocationMeta(
        tool=str(call.tool)[:64], session_id=session_id, status=LifecycleStatus.ERROR
    )
    return CallResult(
        tool_call_id=UNSET,
        lifecycle=LifecycleStatus.ERROR,
        model=msgspec.Raw(encode_view(observation)),
        control=msgspec.Raw(encode_view(control_view(result, meta, observation))),
    )


class _Listener:
    """Follows one session's model stream and wakes the waiters of the ids it sees."""

    def __init__(self) -> None:
        self.waiters: dict[str, anyio.Event] = {}
        self.ready = anyio.Event()
        self.running = False


class EvidenceClient:
    """Submit invocations to the stream and await their results.

    Use as an async context manager: it owns one listener task per session being waited on,
    so any number of concurrent waiters share one blocking read per session.
    """

    def __init__(self, redis: Redis, settings: Settings) -> None:
        self.redis = redis
        self.settings = settings
        self.keys = Keys(settings.prefix)
        self._scripts = Scripts(redis)
        self._listeners: dict[str, _Listener] = {}
        self._tg: TaskGroup | None = None
        self._tg_cm: Any = None

    async def __aenter__(self) -> EvidenceClient:
        self._tg_cm = anyio.create_task_group()
        self._tg = await self._tg_cm.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._tg_cm.__aexit__(None, None, None)
        self._tg = None

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(
        cls, settings: Settings | None = None, url: str | None = None
    ) -> AsyncIterator[EvidenceClient]:
        """Open a client on `url` (default: `settings.redis_url`)."""
        settings = settings or Settings.from_env()
        target = url or settings.redis_url
        if not target:
            raise ValueError("no Redis URL: set ACI_REDIS_URL")
        async with open_redis(target) as redis, cls(redis, settings) as client:
            yield client

    def _fingerprint(self, call: ToolCall) -> str:
        decoded = decode_invocation(call.tool, call.tool_call_id, call.arguments)
        if isinstance(decoded, ErrorResult):
            return ""
        scope = normalise_scope(call.tool, decoded, self.settings.default_lookback)
        return fingerprint_scope(scope)

    async def submit_many(
        self, session_id: str, calls: Sequence[ToolCall], *, traceparent: str | None = None
    ) -> list[CallResult | None]:
        """Append the calls (one pipeline). Returns, per call, None when enqueued (or already
        known) and a final `CallResult` when it was rejected without enqueueing."""
        if not is_valid_session_id(session_id):
            raise InvalidSessionId(session_id)
        now = int(time.time() * 1000)
        out: list[CallResult | None] = []
        queued: list[tuple[list[str], list[Any]]] = []
        k = self.keys
        for call in calls:
            if not is_valid_tool_call_id(call.tool_call_id):
                out.append(rejected_locally(call, session_id, self.settings.bounds))
                continue
            out.append(None)
            envelope = Invocation(
                session_id=session_id,
                tool=str(call.tool),
                tool_call_id=call.tool_call_id,
                arguments=_arguments_text(call.arguments),
                submitted_at_ms=now,
                traceparent=traceparent if traceparent else UNSET,
            )
            keys = [
                k.call(session_id, call.tool_call_id),
                k.invocations,
                k.lifecycle,
                k.fingerprints(session_id),
                k.sessions,
            ]
            args = [
                encode_envelope(envelope),
                now,
                session_id,
                call.tool_call_id,
                str(call.tool),
                self._fingerprint(call),
                self.settings.stream_maxlen,
                self.settings.retention_s * 1000,
            ]
            queued.append((keys, args))
        if queued:

            def fill(pipe: Any) -> None:
                for keys, args in queued:
                    self._scripts.queue(pipe, self._scripts.submit_sha, keys, args)

            await self._scripts.run(fill)
        return out

    async def result(self, session_id: str, tool_call_id: str) -> CallResult | None:
        """The final result of one invocation, or None while it is not final (or unknown)."""
        found = await self._read_final(session_id, [tool_call_id])
        return found.get(tool_call_id)

    async def _read_final(self, session_id: str, ids: Sequence[str]) -> dict[str, CallResult]:
        pipe = self.redis.pipeline(transaction=False)
        for tool_call_id in ids:
            pipe.hmget(self.keys.call(session_id, tool_call_id), "st", "mo", "cv")
        rows = await execute(pipe)
        out: dict[str, CallResult] = {}
        for tool_call_id, (st, mo, cv) in zip(ids, rows, strict=True):
            if st is None or st == b"PROJECTING" or mo is None or cv is None:
                continue
            out[tool_call_id] = CallResult(
                tool_call_id=tool_call_id,
                lifecycle=LifecycleStatus(st.decode()),
                model=msgspec.Raw(mo),
                control=msgspec.Raw(cv),
            )
        return out

    async def _listen(self, session_id: str, listener: _Listener) -> None:
        stream = self.keys.model(session_id)
        try:
            last = await call_redis(self.redis.xrevrange(stream, count=1))
            cursor = last[0][0] if last else b"0-0"
            listener.ready.set()
            while listener.waiters:
                reply = await call_redis(self.redis.xread({stream: cursor}, block=1000, count=1024))
                for _name, entries in reply or []:
                    for entry_id, fields in entries:
                        cursor = entry_id
                        event = listener.waiters.get(fields.get(b"id", b"").decode())
                        if event is not None:
                            event.set()
        except PipelineError:
            await anyio.sleep(0.2)  # waiters re-check and surface the error themselves
        finally:
            listener.running = False
            listener.ready.set()
            for event in listener.waiters.values():
                event.set()  # waiters re-check the state themselves

    async def _register(self, session_id: str, ids: Sequence[str]) -> dict[str, anyio.Event]:
        if self._tg is None:
            raise RuntimeError("use `async with EvidenceClient(...)` to wait for results")
        listener = self._listeners.setdefault(session_id, _Listener())
        events = {i: listener.waiters.setdefault(i, anyio.Event()) for i in ids}
        if not listener.running:
            listener.running = True
            listener.ready = anyio.Event()
            self._tg.start_soon(self._listen, session_id, listener)
        await listener.ready.wait()
        return events

    async def wait(
        self, session_id: str, ids: Sequence[str], timeout: float
    ) -> dict[str, CallResult]:
        """Wait until every id is final or `timeout` seconds pass; returns those that are final."""
        events = await self._register(session_id, ids)
        listener = self._listeners[session_id]
        done: dict[str, CallResult] = {}
        try:
            with anyio.move_on_after(timeout):
                done = await self._read_final(session_id, ids)
                for tool_call_id, event in events.items():
                    while tool_call_id not in done:
                        await event.wait()
                        found = await self._read_final(session_id, [tool_call_id])
                        done.update(found)
                        if tool_call_id not in done:
                            # Woken by a listener restart: wait on a fresh registration.
                            event = (await self._register(session_id, [tool_call_id]))[tool_call_id]
        finally:
            for tool_call_id in ids:
                listener.waiters.pop(tool_call_id, None)
        return done

    async def call_many(
        self, session_id: str, calls: Sequence[ToolCall], timeout: float = 30.0
    ) -> list[CallResult | None]:
        """Submit parallel tool calls and await them; None for a call still pending at timeout."""
        immediate = await self.submit_many(session_id, calls)
        ids = [c.tool_call_id for c, r in zip(calls, immediate, strict=True) if r is None]
        found = await self.wait(session_id, ids, timeout) if ids else {}
        return [
            r if r is not None else found.get(c.tool_call_id)
            for c, r in zip(calls, immediate, strict=True)
        ]

    async def call(
        self, session_id: str, call: ToolCall, timeout: float = 30.0
    ) -> CallResult | None:
        """Submit one call and await its result (None if still pending at timeout)."""
        return (await self.call_many(session_id, [call], timeout))[0]
