"""Submitting framework tool calls and reading their results: `EvidenceClient`.
(Over 400 lines on purpose: one class whose waiting, submitting and reading share state;
its cancel and progress already live apart, in `pipeline.client_cancel`.)

    async with EvidenceClient.connect(settings) as client:
        calls = [ToolCall(tool="query_logs", tool_call_id="call_1", arguments="{...}")]
        results = await client.call_many("sess-1", calls)

A client only appends requests (`pipeline.submitter`); a worker's admission makes them calls
(`pipeline.admission`). Submitting the same (session, tool call id) twice with the same scope is
idempotent: one invocation, one result. The same id with another tool or scope is a conflict:
that call alone is answered with `DUPLICATE_TOOL_CALL_ID`, never with the first call's evidence.
Every reader checks: a result is accepted only with the scope key of the call this client
submitted (`wait`, `result`, `call`, `call_many` alike), whoever else submitted under that id.
A client-side timeout never loses a result: it stays readable with `result()`.
A call whose tool call id is invalid is answered at once with the contract's
`INVALID_TOOL_CALL_ID` error and never sent (there is no id to key it by, and none is minted);
so is a call whose tool name or arguments exceed their bounds (nothing oversized is stored).

The call and result types and those local refusals are in `pipeline.call`; the session
listeners that deliver results as they are published, in `pipeline.listener`.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

import anyio
from anyio.abc import TaskGroup

from pipeline.admission import ADMIT_CONFLICT, ADMIT_KNOWN
from pipeline.admit_here import AdmitHere, outcomes
from pipeline.batcher import CommandBatcher
from pipeline.call import CallResult, InvalidSessionId, ToolCall, _conflict, rejected_locally
from pipeline.client_cancel import CancelAndProgress, ProgressCallback
from pipeline.keys import is_valid_session_id
from pipeline.lane import Lane
from pipeline.listener import _collect, _Hub, _Listener, _Waiter
from pipeline.record import RESULT_ROW, SCOPE_KEY, with_views
from pipeline.redis_io import (
    PipelineError,
    Redis,
    RedisProtocolError,
    execute,
    open_redis,
    reply_code,
)
from pipeline.settings import Settings
from pipeline.submitter import Prepared, Unadmitted, prepare, verified
from pipeline.window import AsOf, AsOfPins

__all__ = ["AsOf", "CallResult", "EvidenceClient", "InvalidSessionId", "ToolCall"]

_ASKED_MAX: Final = 65536  # (session, id) → scope key remembered for readers' checks
_CALL_TIMEOUT_S: Final = 10.0


def _ran(asked: str, result: CallResult) -> bool:
    """Whether a result is of the scope a call asked: the worker publishes the scope key it ran
    with the result. (No key: an envelope that did not decode, an ERROR.)"""
    return not result.scope_key or result.scope_key == asked


class EvidenceClient(CancelAndProgress, AsOfPins):
    """Submit invocations and await their results (cancel them, follow their progress:
    `pipeline.client_cancel`).

    Use as an async context manager: it owns one listener task per session being waited on,
    so any number of concurrent waiters share one blocking read per session, and a task that
    sends again the requests not admitted in time.
    """

    def __init__(self, redis: Redis, settings: Settings) -> None:
        self.redis = redis
        self.settings = settings
        self.keys = settings.keys()
        self._wait = (settings.wait_replicas, settings.wait_timeout_ms)
        self._listeners: dict[str, _Listener] = {}
        self._tg: TaskGroup | None = None
        self._tg_cm: Any = None
        self._submits: CommandBatcher | None = None
        self._idle_lanes: list[Lane] = []
        # One hub per partition: one blocking read over all its waiting sessions.
        self._hubs = [_Hub(redis, self._idle_lanes, self._listeners) for _ in self.keys.parts]
        # "session id" → "scope key tool", oldest first (a space never is in a session id,
        # a tool call id or a scope key): an OrderedDict, whose popitem(last=False) is O(1)
        # (deleting a dict's first key again and again makes each next(iter()) walk the holes
        # left: 17 µs a call at 65,536 entries). Strings, not tuples: the collector tracks
        # neither, so remembering a call does not count towards its next pass (tuples made
        # the client collect 4-5 times as often, and a full pass, 8-25 ms here, fell into
        # the paced benchmark's run every time).
        self._asked: OrderedDict[str, str] = OrderedDict()
        self.unadmitted = Unadmitted(self.keys, settings.admit_resend_s, settings.bounds)
        self._here = AdmitHere(redis, settings, self.keys)  # a trusted client admits itself

    async def __aenter__(self) -> EvidenceClient:
        self._tg_cm = anyio.create_task_group()
        self._tg = await self._tg_cm.__aenter__()
        # Concurrent submissions share pipelines (one in flight at a time).
        wait = self._wait if self._wait[0] > 0 else None
        self._submits = CommandBatcher(self.redis, self._tg, wait)
        self._tg.start_soon(self._watch_admission)
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

    async def _watch_admission(self) -> None:
        # Requests dropped before admission (see pipeline.submitter) are sent again.
        interval = max(0.05, self.settings.admit_resend_s / 3)
        while True:
            await anyio.sleep(interval)
            if self.unadmitted.sent:
                with contextlib.suppress(PipelineError):
                    await self.unadmitted.check(self.redis, self._conflicted)

    def _conflicted(self, session_id: str, tool_call_id: str, scope: str) -> None:
        listener = self._listeners.get(session_id)
        for waiter in listener.waiters.get(tool_call_id, ()) if listener else ():
            if waiter.expect is not None and waiter.expect == scope.encode():
                waiter.conflicted = True
                waiter.wake.event.set()

    def _remember(self, session_id: str, tool_call_id: str, scope: str, tool: str) -> None:
        asked, key = self._asked, f"{session_id} {tool_call_id}"
        asked[key] = f"{scope} {tool}"
        asked.move_to_end(key)
        if len(asked) > _ASKED_MAX:
            asked.popitem(last=False)

    def _asked_of(self, session_id: str, tool_call_id: str) -> tuple[str, str] | None:
        # (scope key, tool) this client submitted the call with, if it did.
        asked = self._asked.get(f"{session_id} {tool_call_id}")
        if asked is None:
            return None
        scope, _, tool = asked.partition(" ")
        return scope, tool

    def _expect(self, session_id: str, tool_call_id: str) -> bytes | None:
        """What a reader of this id checks: the scope key this client submitted it with."""
        asked = self._asked.get(f"{session_id} {tool_call_id}")
        return None if asked is None else asked.partition(" ")[0].encode()

    def _conflict(self, session_id: str, tool_call_id: str) -> CallResult:
        """The answer to a call this client submitted whose id holds another scope's call."""
        asked = self._asked_of(session_id, tool_call_id)
        call = ToolCall(tool=asked[1] if asked else "", tool_call_id=tool_call_id, arguments="")
        return rejected_locally(call, session_id, self.settings.bounds, _conflict(call))

    def scope_keys(self, session_id: str) -> dict[str, str]:
        """Tool call id → scope key of the calls this client submitted in `session_id` (what a
        reader of the view streams checks, `pipeline.views.read_views(expect=...)`)."""
        head = f"{session_id} "
        mine = [(k, v) for k, v in self._asked.items() if k.startswith(head)]
        return {k[len(head) :]: v.partition(" ")[0] for k, v in mine}

    async def submit_many(
        self, session_id: str, calls: Sequence[ToolCall], *, traceparent: str | None = None,
        as_of: AsOf | None = None,
    ) -> list[CallResult | None]:  # fmt: skip
        """Append the calls (one round trip). Returns, per call, None when sent (or already
        known with the same scope) and a final `CallResult` when it was refused without
        sending (an invalid id, oversized input, or an id taken by another call)."""
        prepared = self._prepare(session_id, calls, traceparent, as_of)
        return (await self._submit(session_id, calls, traceparent, prepared))[0].out

    async def admitted(self, session_id: str, ids: Sequence[str], timeout: float) -> set[str]:
        """The ids whose call record exists (admitted, or refused as another call's), waiting up
        to `timeout` s while dropped requests are sent again (inside `async with` only). A
        caller that submits and leaves at once awaits this: a request a hostile submitter drops
        before admission is not lost with the process that could send it again."""
        part, left, done = self.keys.for_session(session_id), list(dict.fromkeys(ids)), set[str]()
        with anyio.move_on_after(timeout):
            while left:
                pipe = self.redis.pipeline(transaction=False)
                for tool_call_id in left:
                    pipe.hget(part.call(session_id, tool_call_id), SCOPE_KEY)
                rows = await execute(pipe)
                done.update(i for i, row in zip(left, rows, strict=True) if row is not None)
                left = [i for i in left if i not in done]
                if left:
                    await anyio.sleep(0.05)
        return done

    def _prepare(
        self, session_id: str, calls: Sequence[ToolCall], traceparent: str | None = None,
        as_of: AsOf | None = None,
    ) -> Prepared:  # fmt: skip
        if not is_valid_session_id(session_id):
            raise InvalidSessionId(session_id)
        prepared = prepare(
            self.keys.for_session(session_id),  # every key of the session: one partition
            session_id,
            calls,
            bounds=self.settings.bounds,
            argument_max_bytes=self.settings.argument_max_bytes,
            traceparent=traceparent,
            as_of_ms=self.as_of_ms(session_id, as_of),
        )
        seen: dict[str, str] = {}
        for at in prepared.positions:
            call, scope = calls[at], prepared.scope_keys[at]
            # One id twice in one submission: the first is the call; another scope conflicts.
            first = seen.setdefault(call.tool_call_id, scope)
            if first != scope:
                prepared.out[at] = rejected_locally(
                    call, session_id, self.settings.bounds, _conflict(call)
                )
            else:
                self._remember(session_id, call.tool_call_id, scope, str(call.tool))
        return prepared

    async def _submit(
        self,
        session_id: str,
        calls: Sequence[ToolCall],
        traceparent: str | None = None,
        prepared: Prepared | None = None,
    ) -> tuple[Prepared, dict[str, CallResult]]:
        # Also returns the results found final already (of this scope), read in the same
        # round trip as the requests were appended.
        prepared = prepared or self._prepare(session_id, calls, traceparent)
        if not prepared.commands:
            return prepared, {}
        if self._here.enabled:
            here = await self._admit_here(session_id, calls, prepared)
            if here is not None:
                return prepared, here
        replies = await self._run(prepared.commands)
        part = self.keys.for_session(session_id)
        known: list[str] = []
        for n, at in enumerate(prepared.positions):
            call, scope = calls[at], prepared.scope_keys[at]
            recorded = replies[2 * n + 1]
            if prepared.out[at] is not None:  # a conflict within the submission
                continue
            if recorded is None:  # not admitted yet (so not final either)
                self.unadmitted.add(session_id, call, prepared.envelopes[n], scope, part)
            elif recorded.decode("utf-8", "replace") != scope:
                bounds = self.settings.bounds
                prepared.out[at] = rejected_locally(call, session_id, bounds, _conflict(call))
            else:  # the same call, admitted before: perhaps final already
                known.append(call.tool_call_id)
        # A call admitted before may be final: its result is read once (after the listener
        # took its cursors, when waiting), so a view published earlier is not missed.
        found = await self._read_final(session_id, known) if known else {}
        return prepared, found

    async def _run(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        if self._submits is not None:
            return await self._submits.run(commands)
        lane = Lane(self.redis)  # used outside `async with`: a lane of its own
        wait = self._wait if self._wait[0] > 0 else None  # as the batcher's (ACI_WAIT_REPLICAS)
        try:
            replies = await lane.call(commands, _CALL_TIMEOUT_S, wait)
        finally:
            await lane.aclose()
        # Refused as the batcher says it (`pipeline.admit_here` reads the code: NOSCRIPT, NOPERM).
        refused = next((r for r in replies if isinstance(r, Exception)), None)
        if refused is not None:
            raise RedisProtocolError(reply_code(refused))
        return replies

    async def _admit_here(
        self, session_id: str, calls: Sequence[ToolCall], prepared: Prepared
    ) -> dict[str, CallResult] | None:
        # `pipeline.admit_here`: the calls admitted in this round trip, or None (then they go
        # through the workers' admission). Returns the results of calls final already.
        part = self.keys.for_session(session_id)
        if not await self._here.agrees(part):  # the workers' settings are not this client's
            return None
        sent = [(n, at) for n, at in enumerate(prepared.positions) if prepared.out[at] is None]
        commands = self._here.commands(
            part,
            session_id,
            [prepared.envelopes[n] for n, _ in sent],
            [prepared.decoded[n] for n, _ in sent],
        )
        if commands is None:
            return None
        for attempt in (1, 2):
            try:
                replies = await self._run(commands)
                break
            except RedisProtocolError as exc:
                if attempt == 2 or not await self._here.refused(exc):
                    return None
        self._here.learn(part, replies[-1])  # the workers' settings, for the next call
        found = outcomes(replies[:-1], len(sent))
        if found is None:
            return None
        known: list[str] = []
        for (_n, at), outcome in zip(sent, found, strict=True):
            call = calls[at]
            if outcome == ADMIT_CONFLICT:
                bounds = self.settings.bounds
                prepared.out[at] = rejected_locally(call, session_id, bounds, _conflict(call))
            elif outcome == ADMIT_KNOWN:  # the same call, admitted before: perhaps final
                known.append(call.tool_call_id)
        return await self._read_final(session_id, known) if known else {}

    async def result(self, session_id: str, tool_call_id: str) -> CallResult | None:
        """The final result of one invocation, or None while it is not final (or unknown).
        A call this client submitted is answered only with a result of its scope (another
        scope under its id: `DUPLICATE_TOOL_CALL_ID`)."""
        found = await self._read_final(session_id, [tool_call_id])
        return found.get(tool_call_id)

    async def _read_final(self, session_id: str, ids: Sequence[str]) -> dict[str, CallResult]:
        pipe = self.redis.pipeline(transaction=False)
        for tool_call_id in ids:
            pipe.hmget(self.keys.result(session_id, tool_call_id), *RESULT_ROW)
            pipe.hget(self.keys.call(session_id, tool_call_id), SCOPE_KEY)
        rows = await execute(pipe)
        finals = await with_views(self.redis, self.keys, session_id, rows[0::2])
        out: dict[str, CallResult] = {}
        for n, tool_call_id in enumerate(ids):
            row, recorded = finals[n], rows[2 * n + 1]
            expect = self._expect(session_id, tool_call_id)
            if expect is not None and recorded is not None and recorded != expect:
                out[tool_call_id] = self._conflict(session_id, tool_call_id)  # another scope's
                continue
            final = verified(tool_call_id, row, None if expect is None else expect.decode())
            if final is not None:
                self.unadmitted.admitted(session_id, tool_call_id)
                out[tool_call_id] = final
        return out

    async def _register(self, session_id: str, ids: Sequence[str]) -> dict[str, _Waiter]:
        """Waiters for `ids`, once the session is followed (its cursors taken): every view
        published from then on reaches them (checked against what this client submitted)."""
        if self._tg is None:
            raise RuntimeError("use `async with EvidenceClient(...)` to wait for results")
        listener = self._listeners.get(session_id)
        if listener is None:
            part = self.keys.for_session(session_id)
            listener = _Listener(session_id, part.model(session_id), part.control(session_id))
            self._listeners[session_id] = listener
            joining = anyio.Event()
            listener.joined = joining
            try:
                await self._hubs[part.index].join(listener)
            except BaseException:
                if self._listeners.get(session_id) is listener:
                    del self._listeners[session_id]
                listener.stop()
                raise
            finally:
                joining.set()
        elif not listener.joined.is_set():
            await listener.joined.wait()  # a concurrent wait is taking the cursors
            if self._listeners.get(session_id) is not listener:  # that failed: try again
                return await self._register(session_id, ids)
        return self._watch(listener, ids)

    def _watch(self, listener: _Listener, ids: Sequence[str]) -> dict[str, _Waiter]:
        # Waiters for `ids` on a joined listener, and a read that follows it (no checkpoint).
        mine = listener.add(ids, self._expects(listener.session_id, ids))
        self._hubs[self.keys.for_session(listener.session_id).index].watch(listener, self._tg)
        return mine

    def _expects(self, session_id: str, ids: Sequence[str]) -> dict[str, bytes]:
        return {i: e for i in ids if (e := self._expect(session_id, i)) is not None}

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
        return await self._await(session_id, ids, waiters, left, found=None)

    async def _register_within(
        self, session_id: str, ids: Sequence[str], timeout: float
    ) -> dict[str, _Waiter]:
        """`_register`, given up after `timeout` (then {}): a listener waits for a free
        listening slot, and that wait counts against the caller's timeout."""
        if not ids:
            return {}
        listener = self._listeners.get(session_id)
        if self._tg is not None and listener is not None and listener.joined.is_set():
            # Followed already (its cursors taken): no wait, so no scope and no checkpoint.
            return self._watch(listener, ids)
        with anyio.move_on_after(timeout):
            return await self._register(session_id, ids)
        return {}

    async def _await(
        self,
        session_id: str,
        ids: Sequence[str],
        waiters: dict[str, _Waiter],
        timeout: float,
        found: dict[str, CallResult] | None,
    ) -> dict[str, CallResult]:
        # `found`: the state was read after the listener's cursors were taken (by the submit's
        # round trip), with these results final already: it is not read again.
        done: dict[str, CallResult] = dict(found or {})
        pending = list(dict.fromkeys(ids))

        def conflict(tool_call_id: str) -> CallResult:
            return self._conflict(session_id, tool_call_id)

        try:
            with anyio.move_on_after(timeout):
                if found is None:
                    done = await self._read_final(session_id, pending)
                while pending := _collect(pending, waiters, done, conflict):
                    wake = next(iter(waiters.values())).wake
                    await wake.event.wait()
                    wake.event.clear()
                    if not wake.stopped or not (
                        pending := _collect(pending, waiters, done, conflict)
                    ):
                        continue
                    # The listener stopped (Redis trouble): listen again first, then read the
                    # state, so nothing published in between is missed.
                    self._unregister(session_id, waiters)
                    waiters = {}
                    waiters = await self._register(session_id, pending)
                    done.update(await self._read_final(session_id, pending))
            pending = _collect(pending, waiters, done, conflict)
            if pending:
                # Timed out: one last read of the state, so a result the listener had not
                # delivered yet is not reported as pending.
                with anyio.move_on_after(1.0), contextlib.suppress(PipelineError):
                    done.update(await self._read_final(session_id, pending))
        finally:
            self._unregister(session_id, waiters)
        for tool_call_id in done:
            self.unadmitted.admitted(session_id, tool_call_id)
        return done

    async def call_many(
        self,
        session_id: str,
        calls: Sequence[ToolCall],
        timeout: float = 30.0,
        *,
        cancel_on_exit: bool = True,
        on_progress: ProgressCallback | None = None,
        as_of: AsOf | None = None,
    ) -> list[CallResult | None]:
        """Submit parallel tool calls and await them; None for a call still pending at timeout.
        Cancelling this coroutine cancels its calls (`cancel_on_exit=False`: they run on);
        `on_progress(id, Progress)` hears each call's new stages (`pipeline.client_cancel`);
        `as_of` pins the log calls among them to an incident time (`pipeline.window`)."""
        started = anyio.current_time()
        prepared = self._prepare(session_id, calls, as_of=as_of)
        ids = [calls[at].tool_call_id for at in prepared.positions if prepared.out[at] is None]
        # Listen before submitting, so no view published in between can be missed.
        waiters = await self._register_within(session_id, ids, timeout)
        try:
            async with (
                self._cancelling(session_id, ids, cancel_on_exit)
                if on_progress is None  # the common case: one context manager, not three
                else self._around_wait(session_id, ids, cancel_on_exit, on_progress)
            ):
                prepared, found = await self._submit(session_id, calls, prepared=prepared)
                # A call refused at submit (e.g. a conflicting reuse of its id) is not waited for.
                ids = [
                    c.tool_call_id for c, r in zip(calls, prepared.out, strict=True) if r is None
                ]
                left = max(0.0, timeout - (anyio.current_time() - started))
                if not ids:
                    done: dict[str, CallResult] = {}
                elif waiters:
                    done = await self._await(session_id, ids, waiters, left, found)
                else:  # no listener in time: what is final already
                    done = found
        finally:
            # Also when nothing was waited for (every call refused): no waiter outlives this.
            self._unregister(session_id, waiters)
        bounds = self.settings.bounds
        out: list[CallResult | None] = []
        for call, refused, key in zip(calls, prepared.out, prepared.scope_keys, strict=True):
            result = refused if refused is not None else done.get(call.tool_call_id)
            if refused is None and result is not None and not _ran(key, result):
                result = rejected_locally(call, session_id, bounds, _conflict(call))
            out.append(result)
        return out

    async def call(
        self, session_id: str, call: ToolCall, timeout: float = 30.0, **options: Any
    ) -> CallResult | None:
        """Submit one call and await its result (None if still pending at timeout); `options`
        as `call_many`'s (`cancel_on_exit`, `on_progress`, `as_of`)."""
        return (await self.call_many(session_id, [call], timeout, **options))[0]
