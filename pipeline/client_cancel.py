"""`EvidenceClient`'s cancel and progress (issue 32; the protocol is in `pipeline.cancel`).

    sent = await client.cancel("sess-1", "call_1")   # True: a cancel request was appended
    final = await client.wait("sess-1", ["call_1"], timeout=5)   # ERROR/CANCELLED, or READY
                                                                 # if it finished first
    async for step in client.follow("sess-1", "call_2"):   # queued → admitted → running → final
        print(step.stage, step.attempt)

A cancel goes where every request goes, the session's request stream; a worker's admission
checks it against the call's scope (a client cancels only calls of the scope it submitted,
never the call of another scope under the same id) and ends the call ERROR/CANCELLED, exactly
once: a call that finished first keeps its result. Cancelling the coroutine that awaits
`call`/`call_many` cancels its calls that are not final (pass `cancel_on_exit=False` to
leave them running: their results stay readable with `result`).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Final

import anyio

from pipeline.cancel import Progress, Stage, cancel_envelope, read_progress, recorded_call
from pipeline.envelope import EnvelopeError
from pipeline.keys import is_valid_session_id
from pipeline.record import ENTRY_DATA
from pipeline.redis_io import PipelineError, execute

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from pipeline.batcher import CommandBatcher
    from pipeline.keys import Keys
    from pipeline.redis_io import Redis
    from pipeline.submitter import Unadmitted

__all__ = ["CancelAndProgress", "Progress", "ProgressCallback", "Stage"]

log = logging.getLogger("aci.client")
_CANCEL_ON_EXIT_S: Final = 2.0  # the most a cancelled `call` spends sending its cancels
_FOLLOW_S: Final = 0.1  # how often `follow` reads a call's progress

# Called with (tool call id, progress); may be a coroutine function (it is awaited).
ProgressCallback = Callable[[str, Progress], object]


async def _heard(callback: ProgressCallback, tool_call_id: str, step: Progress) -> None:
    answer = callback(tool_call_id, step)
    if inspect.isawaitable(answer):
        await answer


class CancelAndProgress:
    """Mixed into `EvidenceClient`: `cancel`, `progress`, `follow`."""

    keys: Keys
    redis: Redis
    unadmitted: Unadmitted
    _submits: CommandBatcher | None  # inside `async with`: the submits' coalescing lane
    _tg: TaskGroup | None  # inside `async with`: the client's own tasks

    def _expect(self, session_id: str, tool_call_id: str) -> bytes | None:
        raise NotImplementedError  # EvidenceClient's: the scope key it submitted the id with

    async def cancel(self, session_id: str, tool_call_id: str) -> bool:
        """Ask that a call be cancelled. True when a cancel request was appended: the call will
        end ERROR/CANCELLED unless it is final first (its result then stands); False when there
        is no call of this client's scope under the id to cancel (never submitted, not admitted
        and not submitted by this client, or another scope's). Idempotent: send it again when
        in doubt. Await `wait`/`result` for the outcome."""
        if not is_valid_session_id(session_id):
            return False
        part = self.keys.for_session(session_id)
        sent = self.unadmitted.sent.get((session_id, tool_call_id))
        if sent is not None:  # not seen admitted: this client has its envelope
            envelope: bytes | None = sent.envelope
        else:
            envelope, recorded = await recorded_call(self.redis, part, session_id, tool_call_id)
            expect = self._expect(session_id, tool_call_id)
            if envelope is None or (expect is not None and recorded != expect.decode()):
                return False
        if envelope is None:
            return False
        try:
            data = cancel_envelope(envelope)
        except EnvelopeError:
            return False
        if self._submits is not None:  # with the submits: coalesced, no pooled connection
            await self._submits.run([("XADD", part.requests, "*", ENTRY_DATA, data)])
        else:
            pipe = self.redis.pipeline(transaction=False)
            pipe.xadd(part.requests, {ENTRY_DATA: data})
            await execute(pipe)
        if sent is not None:
            sent.envelope = data  # sent again until admitted: as the cancel
        return True

    async def progress(self, session_id: str, tool_call_id: str) -> Progress:
        """Where a call is now: queued, admitted, running (attempt k) or final (one round
        trip). A call of another scope under the id reads as FINAL (it is answered
        DUPLICATE_TOOL_CALL_ID)."""
        part = self.keys.for_session(session_id)
        found, recorded = await read_progress(self.redis, part, session_id, tool_call_id)
        expect = self._expect(session_id, tool_call_id)
        if recorded is not None and expect is not None and recorded != expect.decode():
            return Progress(Stage.FINAL)
        return found

    async def follow(
        self, session_id: str, tool_call_id: str, interval: float = _FOLLOW_S
    ) -> AsyncIterator[Progress]:
        """Each new stage of a call, in order (`Progress.step` only grows), until it is final;
        read every `interval` seconds. Stop iterating whenever you like."""
        last = 0
        while True:
            with contextlib.suppress(PipelineError):
                now = await self.progress(session_id, tool_call_id)
                if now.step > last:
                    last = now.step
                    yield now
                if now.stage is Stage.FINAL:
                    return
            await anyio.sleep(interval)

    async def _report(
        self,
        session_id: str,
        ids: Sequence[str],
        callback: ProgressCallback,
        reported: dict[str, int],
        interval: float = _FOLLOW_S,
    ) -> None:
        # `call_many(on_progress=...)`: each id's new stages, until every one is final.
        async def one(tool_call_id: str) -> None:
            async for step in self.follow(session_id, tool_call_id, interval):
                if step.step > reported.get(tool_call_id, 0):
                    reported[tool_call_id] = step.step
                    await _heard(callback, tool_call_id, step)

        async with anyio.create_task_group() as group:
            for tool_call_id in dict.fromkeys(ids):
                group.start_soon(one, tool_call_id)

    @contextlib.asynccontextmanager
    async def _around_wait(
        self,
        session_id: str,
        ids: Sequence[str],
        cancel_on_exit: bool,
        on_progress: ProgressCallback | None,
    ) -> AsyncIterator[None]:
        # `call_many`'s wait: cancelled with its coroutine, reporting progress when asked.
        async with (
            self._cancelling(session_id, ids, cancel_on_exit),
            self._progress_of(session_id, ids, on_progress),
        ):
            yield

    @contextlib.asynccontextmanager
    async def _progress_of(
        self, session_id: str, ids: Sequence[str], callback: ProgressCallback | None
    ) -> AsyncIterator[None]:
        # Around the wait of `call_many(on_progress=...)`: a task reporting each id's stages.
        if callback is None or not ids:
            yield
            return
        reported: dict[str, int] = {}
        async with anyio.create_task_group() as group:
            group.start_soon(self._report, session_id, ids, callback, reported)
            try:
                yield
            finally:
                group.cancel_scope.cancel()
        # The wait is over: the last stage of each call is heard before `call_many` returns.
        for tool_call_id in dict.fromkeys(ids):
            with contextlib.suppress(PipelineError):
                step = await self.progress(session_id, tool_call_id)
                if step.step > reported.get(tool_call_id, 0):
                    reported[tool_call_id] = step.step
                    await _heard(callback, tool_call_id, step)

    @contextlib.asynccontextmanager
    async def _cancelling(
        self, session_id: str, ids: Sequence[str], enabled: bool
    ) -> AsyncIterator[None]:
        # Around the wait of `call_many`: when the awaiting coroutine is cancelled, its calls
        # that are not final are cancelled too (shielded, bounded), then the cancellation goes on.
        try:
            yield
        except anyio.get_cancelled_exc_class():
            if enabled and ids:
                # Sent from a task of the client's own: a host that awaits this coroutine in a
                # task of its own (LangChain's tools) cancels it natively, again and again, and
                # no shield holds that off; the cancels must not hang on this task's awaits.
                sent = anyio.Event()
                if self._tg is not None:
                    self._tg.start_soon(self._cancel_all, session_id, list(ids), sent)
                else:
                    await self._cancel_all(session_id, ids, sent)
                with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_ON_EXIT_S):
                    await sent.wait()
            raise

    async def _cancel_all(self, session_id: str, ids: Sequence[str], sent: anyio.Event) -> None:
        try:
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_ON_EXIT_S):
                for tool_call_id in dict.fromkeys(ids):
                    try:
                        await self.cancel(session_id, tool_call_id)
                    except PipelineError:
                        log.warning("a cancelled call's cancel could not be sent")
        finally:
            sent.set()
