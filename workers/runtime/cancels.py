"""A worker's half of cancellation (issue 32; the protocol is in `pipeline.cancel`).

- `cancels_of` / `apply_cancels`: admission, after admitting a batch, finishes the calls whose
  cancel it admitted (`cancel.lua`), with ERROR/CANCELLED views built here.
- `take`: before a call's source is called, one round trip (`mark.lua`) marks the attempt the
  worker runs and tells whether the call may run at all (a cancelled or final call never does).
- `stoppable`: runs a call's stages while polling its cancel mark every `CANCEL_POLL_S`; a
  cancel admitted meanwhile cancels the source's scope (each source stops its own work on
  cancellation: MySQL `KILL QUERY`, a FILE scan's stop flag, an HTTP request closed).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal

import anyio
import msgspec

from contracts import build_views, cancelled_result
from pipeline.admission import Admission
from pipeline.cancel import (
    CANCEL_APPLIED,
    MARK_CANCELLED,
    MARK_FINAL,
    MARK_FOREIGN,
    MARK_RUN,
    ToCancel,
    cancel_calls,
    cancel_mark,
    is_cancel,
    mark_call,
)
from pipeline.envelope import Invocation
from pipeline.keys import Partition
from pipeline.lane import Lane, run_scripts
from pipeline.redis_io import PipelineError, RedisProtocolError, execute, reply_code
from workers.runtime.state import WorkerState
from workers.stage import Outcome

__all__ = ["CANCEL_POLL_S", "apply_cancels", "cancels_of", "stoppable", "take"]

log = logging.getLogger("aci.worker")
# How often a running call's cancel mark is read: a cancelled source is stopped within this
# (plus its own stop, e.g. a KILL QUERY) of the cancel's admission.
CANCEL_POLL_S: Final = 0.2
_ENCODER: Final = msgspec.json.Encoder()


def _views(state: WorkerState, a: Admission, started: bool) -> tuple[bytes, bytes, bytes]:
    result = cancelled_result(a.tool_call_id, started=started)
    scoped = a.scope is not None
    observation, control = build_views(
        result,
        state.settings.bounds,
        tool=a.tool,
        session_id=a.session_id,
        scope=a.scope if scoped else msgspec.UNSET,
        fingerprint=a.fingerprint if scoped and a.fingerprint else msgspec.UNSET,
        attempts=1 if started else 0,
    )
    return _ENCODER.encode(result), _ENCODER.encode(observation), _ENCODER.encode(control)


def cancels_of(state: WorkerState, admitted: list[Admission], reply: list[Any]) -> list[ToCancel]:
    """The cancels of an admitted batch whose call exists now with their scope (admitted now,
    or before): a conflicting one (reply 2) changes nothing."""
    out: list[ToCancel] = []
    for a, outcome in zip(admitted, reply, strict=True):
        if is_cancel(a.invocation) and (isinstance(outcome, bytes) or outcome == 0):
            out.append(
                ToCancel(a.session_id, a.tool_call_id, a.tool, a.scope_key,
                         _views(state, a, False), _views(state, a, True))
            )  # fmt: skip
    return out


async def apply_cancels(
    state: WorkerState, lane: Lane, batches: list[tuple[Partition, list[ToCancel]]]
) -> None:
    """Finish the admitted cancels, one `cancel.lua` per partition, in one round trip. A
    failure is logged and loses nothing: `admit.lua` set each call's cancel mark in the step
    that acked its request, so whoever meets the call next ends it CANCELLED (`take` refuses
    to run it, `stoppable` stops it)."""
    settings, scripts = state.settings, state.scripts
    now_ms = int(time.time() * 1000)
    calls = [
        cancel_calls(part, cancels, now_ms=now_ms, maxlen=settings.stream_maxlen,
                     retention_ms=settings.retention_s * 1000)
        for part, cancels in batches
    ]  # fmt: skip
    replies = await run_scripts(lane, scripts, scripts.cancel_sha, calls, errors_in_place=True)
    for (_part, cancels), reply in zip(batches, replies, strict=True):
        if isinstance(reply, Exception) or len(reply) != len(cancels):
            log.error("admission: cancel refused (%s)", reply_code(reply) if isinstance(
                reply, Exception) else "WRONGTYPE")  # fmt: skip
            continue
        applied = sum(1 for r in reply if r == CANCEL_APPLIED)
        log.info("admission: %d of %d cancels applied", applied, len(cancels))


Taken = Literal["run", "final", "cancelled", "foreign"]
_TAKEN: Final[dict[int, Taken]] = {
    MARK_RUN: "run", MARK_FINAL: "final", MARK_CANCELLED: "cancelled", MARK_FOREIGN: "foreign",
}  # fmt: skip


async def _commands(state: WorkerState, commands: list[tuple[Any, ...]]) -> list[Any]:
    # Through the worker's batcher (coalesced with every other running call's), or pooled.
    if state.marks is not None:
        return await state.marks.run(commands)
    pipe = state.redis.pipeline(transaction=False)
    for command in commands:
        pipe.execute_command(*command)
    return await execute(pipe)


async def take(
    state: WorkerState, part: Partition, invocation: Invocation, entry_id: str, attempt: int
) -> Taken:
    """Mark the call taken (attempt `attempt`) unless it is final, cancelled or not this
    entry's; a key of the wrong type reads as "foreign" (the finish refuses it too)."""
    keys, args = mark_call(
        part, invocation.session_id, invocation.tool_call_id, entry_id, attempt,
        int(time.time() * 1000),
    )  # fmt: skip
    scripts = state.scripts
    command = ("EVALSHA", scripts.mark_sha, len(keys), *keys, *args)
    try:
        [reply] = await _commands(state, [command])
    except RedisProtocolError as exc:
        if str(exc) != "NOSCRIPT":
            raise
        await scripts.load()  # a restarted Redis lost its scripts
        [reply] = await _commands(state, [command])
    return _TAKEN.get(int(reply), "foreign")


async def stoppable(
    state: WorkerState,
    part: Partition,
    invocation: Invocation,
    run: Callable[[], Awaitable[Outcome]],
) -> Outcome | None:
    """`run()`, or None when a cancel of the call was admitted while it ran (its source was
    stopped by cancelling its scope)."""
    outcome: Outcome | None = None

    async def watch(scope: anyio.CancelScope) -> None:
        session, call = invocation.session_id, invocation.tool_call_id
        while True:
            await anyio.sleep(CANCEL_POLL_S)
            with contextlib.suppress(PipelineError):
                [found] = await _commands(state, [cancel_mark(part, session, call)])
                if found is not None:
                    scope.cancel()
                    return

    with anyio.CancelScope() as stop:
        async with anyio.create_task_group() as group:
            group.start_soon(watch, stop)
            outcome = await run()
            group.cancel_scope.cancel()
    return outcome
