"""Submitting framework tool calls and reading their results: `EvidenceClient`.

    async with EvidenceClient.connect(settings) as client:
        calls = [ToolCall(tool="query_logs", tool_call_id="call_1", arguments="{...}")]
        results = await client.call_many("sess-1", calls)

Submitting the same (session, tool call id) twice with the same scope is idempotent: one
invocation, one result. The same id with another tool or scope is a conflict: that call alone is
answered with `DUPLICATE_TOOL_CALL_ID`, never with the first call's evidence.
A client-side timeout never loses a result: it stays readable with `result()`.
A call whose tool call id is invalid is answered at once with the contract's
`INVALID_TOOL_CALL_ID` error and never enqueued (there is no id to key it by, and none is minted);
so is a call whose tool name or arguments exceed their bounds (nothing oversized is stored).

The call and result types and those local refusals are in `pipeline.call`; the session
listeners that deliver results as they are published, in `pipeline.listener`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

import anyio
import msgspec
from anyio.abc import TaskGroup
from msgspec import UNSET

from contracts import (
    ErrorResult,
    LifecycleStatus,
    decode_invocation,
    fingerprint_scope,
    is_valid_tool_call_id,
    normalise_scope,
)
from pipeline.batcher import ScriptBatcher
from pipeline.call import (
    CallResult,
    InvalidSessionId,
    ToolCall,
    _arguments_text,
    _conflict,
    _oversized,
    rejected_locally,
)
from pipeline.envelope import Invocation, encode_envelope, scope_key_of
from pipeline.keys import is_valid_session_id
from pipeline.lane import Lane, run_scripts
from pipeline.listener import _collect, _Listener, _Waiter
from pipeline.record import RESULT_ROW, SUBMIT_CONFLICT, SUBMIT_NEW, final_row, submit_call
from pipeline.redis_io import PipelineError, Redis, Scripts, execute, open_redis
from pipeline.settings import Settings

__all__ = ["CallResult", "EvidenceClient", "InvalidSessionId", "ToolCall"]

_MAX_LISTENERS: Final = 64  # sessions read at once, each on a connection of its own


def _ran(asked: str, result: CallResult) -> bool:
    """Whether a result is of the scope a call asked: the worker publishes the scope key it ran
    with the result. A call record rewritten by someone who may write it (another submitter of
    the prefix) can make a worker run another envelope under this id; its evidence is refused,
    never handed over as this call's. (No key: an envelope that did not decode, an ERROR.)"""
    return not result.scope_key or result.scope_key == asked


class EvidenceClient:
    """Submit invocations to the stream and await their results.

    Use as an async context manager: it owns one listener task per session being waited on,
    so any number of concurrent waiters share one blocking read per session.
    """

    def __init__(self, redis: Redis, settings: Settings) -> None:
        self.redis = redis
        self.settings = settings
        self.keys = settings.keys()
        self._scripts = Scripts(redis, (settings.wait_replicas, settings.wait_timeout_ms))
        self._listeners: dict[str, _Listener] = {}
        self._tg: TaskGroup | None = None
        self._tg_cm: Any = None
        self._submits: ScriptBatcher | None = None
        self._listening = anyio.Semaphore(_MAX_LISTENERS)
        self._idle_lanes: list[Lane] = []

    async def __aenter__(self) -> EvidenceClient:
        self._tg_cm = anyio.create_task_group()
        self._tg = await self._tg_cm.__aenter__()
        # Concurrent submissions share pipelines (one in flight at a time).
        self._submits = ScriptBatcher(self.redis, self._scripts, self._scripts.submit_sha, self._tg)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._tg_cm.__aexit__(None, None, None)
        self._tg = None
        if self._submits is not None:
            await self._submits.aclose()
        self._submits = None
        lanes, self._idle_lanes = self._idle_lanes, []
        for lane in lanes:
            await lane.aclose()

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
        async with (
            open_redis(target, cluster=settings.redis_cluster) as redis,
            cls(redis, settings) as client,
        ):
            yield client

    def _scope(self, call: ToolCall, arguments: str) -> tuple[str, str]:
        """The call's scope fingerprint ("" when its arguments do not decode) and scope key,
        from one decode."""
        tool = str(call.tool)
        decoded = decode_invocation(tool, call.tool_call_id, arguments)
        key = scope_key_of(tool, decoded, arguments)
        if isinstance(decoded, ErrorResult):
            return "", key
        scope = normalise_scope(tool, decoded, self.settings.default_lookback)
        return fingerprint_scope(scope), key

    async def submit_many(
        self, session_id: str, calls: Sequence[ToolCall], *, traceparent: str | None = None
    ) -> list[CallResult | None]:
        """Append the calls (one pipeline). Returns, per call, None when enqueued (or already
        known with the same scope) and a final `CallResult` when it was refused without
        enqueueing (an invalid id, oversized input, or an id taken by another call)."""
        return (await self._submit(session_id, calls, traceparent))[0]

    async def _submit(
        self,
        session_id: str,
        calls: Sequence[ToolCall],
        traceparent: str | None = None,
        asked: list[str] | None = None,
    ) -> tuple[list[CallResult | None], set[str]]:
        # Also returns the ids this submission created (not known before); `asked`, when
        # given, receives each call's scope key ("" for a call refused before submitting).
        if not is_valid_session_id(session_id):
            raise InvalidSessionId(session_id)
        keys_asked = [] if asked is None else asked
        now = int(time.time() * 1000)
        bounds = self.settings.bounds
        out: list[CallResult | None] = []
        queued: list[tuple[list[str], list[Any]]] = []
        positions: list[int] = []
        k = self.keys.for_session(session_id)  # every key of the session: one partition
        for call in calls:
            keys_asked.append("")
            if not is_valid_tool_call_id(call.tool_call_id):
                out.append(rejected_locally(call, session_id, bounds))
                continue
            arguments = _arguments_text(call.arguments)
            refused = _oversized(call, arguments, self.settings.argument_max_bytes)
            if refused is not None:
                out.append(rejected_locally(call, session_id, bounds, refused))
                continue
            positions.append(len(out))
            out.append(None)
            tool = str(call.tool)
            envelope = Invocation(
                session_id=session_id,
                tool=tool,
                tool_call_id=call.tool_call_id,
                arguments=arguments,
                submitted_at_ms=now,
                traceparent=traceparent if traceparent else UNSET,
            )
            fingerprint, keys_asked[-1] = self._scope(call, arguments)
            queued.append(
                submit_call(
                    k,
                    session_id=session_id,
                    tool_call_id=call.tool_call_id,
                    tool=tool,
                    envelope=encode_envelope(envelope),
                    now_ms=now,
                    fingerprint=fingerprint,
                    maxlen=self.settings.stream_maxlen,
                    retention_ms=self.settings.retention_s * 1000,
                    scope_key=keys_asked[-1],
                )
            )
        if not queued:
            return out, set()
        if self._submits is not None:
            replies = await self._submits.run(queued)
        else:  # used outside `async with`: a lane of its own for this submission
            lane = Lane(self.redis)
            try:
                replies = await run_scripts(lane, self._scripts, self._scripts.submit_sha, queued)
            finally:
                await lane.aclose()
        fresh: set[str] = set()
        for at, reply in zip(positions, replies, strict=True):
            if reply[0] == SUBMIT_NEW:
                fresh.add(calls[at].tool_call_id)
            elif reply[0] == SUBMIT_CONFLICT:
                out[at] = rejected_locally(calls[at], session_id, bounds, _conflict(calls[at]))
        return out, fresh

    async def result(self, session_id: str, tool_call_id: str) -> CallResult | None:
        """The final result of one invocation, or None while it is not final (or unknown)."""
        found = await self._read_final(session_id, [tool_call_id])
        return found.get(tool_call_id)

    async def _read_final(self, session_id: str, ids: Sequence[str]) -> dict[str, CallResult]:
        pipe = self.redis.pipeline(transaction=False)
        for tool_call_id in ids:
            pipe.hmget(self.keys.result(session_id, tool_call_id), *RESULT_ROW)
        rows = await execute(pipe)
        out: dict[str, CallResult] = {}
        for tool_call_id, row in zip(ids, rows, strict=True):
            final = final_row(row)
            if final is None:
                continue
            out[tool_call_id] = CallResult(
                tool_call_id=tool_call_id,
                lifecycle=LifecycleStatus(final.status),
                model=msgspec.Raw(final.model),
                control=msgspec.Raw(final.control),
                scope_key=final.scope_key,
            )
        return out

    async def _listen(self, session_id: str, listener: _Listener) -> None:
        # A listener that stops with no waiter left is forgotten: the next wait starts anew.
        try:
            await listener.follow(
                self.redis,
                self.keys.model(session_id),
                self.keys.control(session_id),
                self._listening,
                self._idle_lanes,
            )
        finally:
            if not listener.waiters and self._listeners.get(session_id) is listener:
                del self._listeners[session_id]

    async def _register(self, session_id: str, ids: Sequence[str]) -> dict[str, _Waiter]:
        """Waiters for `ids`, once the session's listener has taken its cursors: every view
        published from then on reaches them."""
        if self._tg is None:
            raise RuntimeError("use `async with EvidenceClient(...)` to wait for results")
        listener = self._listeners.setdefault(session_id, _Listener())
        mine = listener.add(ids)
        try:
            if not listener.running:
                listener.running = True
                listener.ready = anyio.Event()
                self._tg.start_soon(self._listen, session_id, listener)
            await listener.ready.wait()
        except BaseException:
            listener.remove(mine)
            raise
        return mine

    def _unregister(self, session_id: str, mine: dict[str, _Waiter]) -> None:
        listener = self._listeners.get(session_id)
        if listener is not None:
            listener.remove(mine)

    async def wait(
        self, session_id: str, ids: Sequence[str], timeout: float
    ) -> dict[str, CallResult]:
        """Wait until every id is final or `timeout` seconds pass; returns those that are final.

        Results already final are read from their state; the others arrive through the
        session's listener, which sees both views as they are published.
        """
        started = anyio.current_time()
        waiters = await self._register_within(session_id, ids, timeout)
        left = max(0.0, timeout - (anyio.current_time() - started))
        if not waiters:  # no listener in time (every listening slot busy): the state only
            return await self._read_final(session_id, ids) if ids else {}
        return await self._await(session_id, ids, waiters, left, fresh=set())

    async def _register_within(
        self, session_id: str, ids: Sequence[str], timeout: float
    ) -> dict[str, _Waiter]:
        """`_register`, given up after `timeout` (then {}): a listener waits for a free
        listening slot, and that wait counts against the caller's timeout."""
        if not ids:
            return {}
        with anyio.move_on_after(timeout):
            return await self._register(session_id, ids)
        return {}

    async def _await(
        self,
        session_id: str,
        ids: Sequence[str],
        waiters: dict[str, _Waiter],
        timeout: float,
        fresh: set[str],
    ) -> dict[str, CallResult]:
        # `fresh` ids were created after the listener's cursors were taken: their views can
        # only arrive through the listener, so their state is not read first.
        done: dict[str, CallResult] = {}
        pending = list(dict.fromkeys(ids))
        try:
            with anyio.move_on_after(timeout):
                known = [i for i in pending if i not in fresh]
                if known:
                    done = await self._read_final(session_id, known)
                while pending := _collect(pending, waiters, done):
                    wake = next(iter(waiters.values())).wake
                    await wake.event.wait()
                    wake.event.clear()
                    if not wake.stopped or not (pending := _collect(pending, waiters, done)):
                        continue
                    # The listener stopped (Redis trouble): listen again first, then read the
                    # state, so nothing published in between is missed.
                    self._unregister(session_id, waiters)
                    waiters = {}
                    waiters = await self._register(session_id, pending)
                    done.update(await self._read_final(session_id, pending))
            pending = _collect(pending, waiters, done)
            if pending:
                # Timed out: one last read of the state, so a result the listener had not
                # delivered yet is not reported as pending.
                with anyio.move_on_after(1.0), contextlib.suppress(PipelineError):
                    done.update(await self._read_final(session_id, pending))
        finally:
            self._unregister(session_id, waiters)
        return done

    async def call_many(
        self, session_id: str, calls: Sequence[ToolCall], timeout: float = 30.0
    ) -> list[CallResult | None]:
        """Submit parallel tool calls and await them; None for a call still pending at timeout."""
        if not is_valid_session_id(session_id):
            raise InvalidSessionId(session_id)
        ids = [c.tool_call_id for c in calls if is_valid_tool_call_id(c.tool_call_id)]
        started = anyio.current_time()
        # Listen before submitting, so no view published in between can be missed.
        waiters = await self._register_within(session_id, ids, timeout)
        try:
            asked: list[str] = []
            immediate, fresh = await self._submit(session_id, calls, asked=asked)
            # A call refused at submit (e.g. a conflicting reuse of its id) is not waited for.
            ids = [c.tool_call_id for c, r in zip(calls, immediate, strict=True) if r is None]
            left = max(0.0, timeout - (anyio.current_time() - started))
            if not ids:
                found: dict[str, CallResult] = {}
            elif waiters:
                found = await self._await(session_id, ids, waiters, left, fresh)
            else:  # no listener in time: what is final already
                found = await self._read_final(session_id, ids)
        finally:
            # Also when nothing was waited for (every call refused): no waiter outlives this.
            self._unregister(session_id, waiters)
        bounds = self.settings.bounds
        out: list[CallResult | None] = []
        for call, refused, key in zip(calls, immediate, asked, strict=True):
            result = refused if refused is not None else found.get(call.tool_call_id)
            if refused is None and result is not None and not _ran(key, result):
                result = rejected_locally(call, session_id, bounds, _conflict(call))
            out.append(result)
        return out

    async def call(
        self, session_id: str, call: ToolCall, timeout: float = 30.0
    ) -> CallResult | None:
        """Submit one call and await its result (None if still pending at timeout)."""
        return (await self.call_many(session_id, [call], timeout))[0]
