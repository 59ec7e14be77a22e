"""The work of one stream entry, in its own task: decode the envelope (unless the reader
did: `workers.runtime.entry`), check a redelivery, run the stages (`workers.stage`) and hand
the outcome, with the scope key it is finished with, to the finisher.

What cannot be run still ends somewhere: an envelope that does not decode, or lies in another
partition than its session's, or is not the entry its call recorded, is dead-lettered (and its
call, when it can be named, finishes as ERROR); an entry delivered more than `max_attempts`
times finishes as ERROR/GAVE_UP; a call found final already is only acknowledged. Redis
trouble mid-way leaves the entry pending, for the janitor to take over.
"""

from __future__ import annotations

import logging

from msgspec import UNSET

from contracts import ErrorCode, cancelled_result, error_result, is_valid_tool_call_id
from pipeline.cancel import is_cancel
from pipeline.consumer import CallState, ack, call_state, dead_letter_entry
from pipeline.envelope import Invocation, peek_identity, scope_key
from pipeline.keys import Partition, is_valid_session_id
from pipeline.record import invocation_entry
from pipeline.redis_io import PipelineError
from workers.logging_setup import invocation_context, parse_traceparent, span
from workers.runtime.cancels import stoppable, take
from workers.runtime.entry import Entry, finished_scope, read_entry, stage_run
from workers.runtime.slots import Finish
from workers.runtime.state import WorkerState
from workers.stage import Outcome, StageRun, build_outcome

__all__ = ["process"]

log = logging.getLogger("aci.worker")


async def process(
    state: WorkerState,
    part: Partition,
    entry_id: str,
    fields: dict[str, bytes],
    attempts: int,
    entry: Entry | None = None,
) -> None:
    """Run one entry (delivery number `attempts`; `entry`: already read) to its end. Holds
    one slot; an outcome handed to the finisher takes the slot along."""
    handed = False
    try:
        handed = await _process(state, part, entry_id, fields, attempts, entry)
    except PipelineError as exc:
        # Redis trouble mid-invocation: the entry stays pending and is taken over later.
        log.warning("entry %s left for takeover: %s", entry_id, type(exc).__name__)
    except Exception as exc:
        # One entry must never take the worker down (nor, redelivered, the next one): it
        # is dead-lettered, and its call, when it can be named, finishes as ERROR.
        log.error("entry %s failed in the worker: %s", entry_id, type(exc).__name__)
        handed = await _give_up_on(state, part, entry_id, fields, entry)
    finally:
        if not handed:
            state.slots.give(1)


async def _give_up_on(
    state: WorkerState,
    part: Partition,
    entry_id: str,
    fields: dict[str, bytes],
    entry: Entry | None,
) -> bool:
    reason = "the worker failed on this entry"
    try:
        await _dead_letter(state, part, entry_id, fields, reason)
        data = entry.data if entry is not None else invocation_entry(fields)[0]
        return await _finish_foreign(state, part, entry_id, data, reason)
    except Exception as exc:  # Redis trouble too: left pending, taken over later
        log.error("entry %s could not be dead-lettered: %s", entry_id, type(exc).__name__)
        return False


async def _process(
    state: WorkerState,
    part: Partition,
    entry_id: str,
    fields: dict[str, bytes],
    attempts: int,
    entry: Entry | None,
) -> bool:
    if entry is None:
        entry = read_entry(fields)
    invocation = entry.invocation
    if invocation is None:
        with invocation_context(entry_id=entry_id):
            await _dead_letter(state, part, entry_id, fields, entry.problem)
            return await _finish_foreign(state, part, entry_id, entry.data, entry.problem)
    parent = parse_traceparent(invocation.traceparent) if invocation.traceparent else None
    with (
        invocation_context(
            session=invocation.session_id,
            tool=invocation.tool,
            tool_call_id=invocation.tool_call_id,
            entry_id=entry_id,
            trace_id=parent.trace_id if parent else None,
        ),
        span(
            "aci.invocation",
            parent,
            session=invocation.session_id,
            tool=invocation.tool,
            tool_call_id=invocation.tool_call_id,
            entry_id=entry_id,
        ),
    ):
        return await _run(state, part, entry_id, fields, attempts, invocation, entry)


async def _run(
    state: WorkerState,
    part: Partition,
    entry_id: str,
    fields: dict[str, bytes],
    attempts: int,
    invocation: Invocation,
    entry: Entry,
) -> bool:
    # A redelivery may find its call final already, or be a forged entry taken over. (A
    # first delivery is not checked here: the finish script refuses any entry that is not
    # the call's, so a forged envelope's result is never published, and an extra round
    # trip per call would cost the hot path more than running it.)
    if state.keys.partition_of(invocation.session_id) != part.index:
        # An envelope XADDed into another partition's stream than its session's: it can
        # never be the entry the submit recorded (nothing crosses partitions).
        await _dead_letter(state, part, entry_id, fields, "not in its session's partition")
        return False
    found = await _call_state(state, part, invocation, entry_id) if attempts > 1 else "open"
    if found == "foreign":
        await _dead_letter(state, part, entry_id, fields, "not the entry recorded for this call")
        return False
    if found == "final":
        await ack(state.redis, part, entry_id)
        return False
    if attempts > state.settings.max_attempts:
        result = error_result(
            ErrorCode.GAVE_UP,
            f"the invocation failed {attempts - 1} times and was given up",
            invocation.tool_call_id,
        )
        outcome = build_outcome(
            result=result,
            raw=None,
            tool=invocation.tool,
            session_id=invocation.session_id,
            settings=state.settings,
            duplicate_of=entry.duplicate_of,
            attempts=attempts,
        )
        scope = scope_key(
            invocation.tool, invocation.tool_call_id, invocation.arguments, invocation.as_of_ms
        )
    else:
        run = stage_run(state, invocation, entry.duplicate_of, attempts, entry.handed)
        ran = await _run_unless_cancelled(state, part, invocation, entry_id, attempts, run)
        if ran is None:  # final already (a cancel finished it): only acked
            await ack(state.redis, part, entry_id)
            return False
        outcome = ran
        scope = finished_scope(invocation, run, entry.scope_key)
    _hand_over(state, part, invocation, entry_id, outcome, scope, attempts)
    return True


async def _run_unless_cancelled(
    state: WorkerState,
    part: Partition,
    invocation: Invocation,
    entry_id: str,
    attempts: int,
    run: StageRun,
) -> Outcome | None:
    """The stages' outcome; ERROR/CANCELLED when a cancel was admitted before the source was
    called (it never is) or while it ran (it is stopped); None when the call is final already
    (issue 32, `workers.runtime.cancels`)."""
    taken = await take(state, part, invocation, entry_id, attempts)
    if taken == "final":
        return None
    if taken == "run" and is_cancel(invocation):
        # A cancel admitted as its call (it overtook its request): admit.lua records it with
        # its mark, so mark.lua refuses it; the entry itself says so too (a record admitted
        # without the mark, e.g. by an older admit.lua). Never run.
        taken = "cancelled"
    outcome: Outcome | None = None
    if taken != "cancelled":
        with span("aci.stages", None):
            outcome = await stoppable(state, part, invocation, lambda: run.run(state.sources))
    if outcome is None:
        log.info(
            "cancelled %s its source was called", "before" if taken == "cancelled" else "after"
        )
        outcome = build_outcome(
            result=cancelled_result(invocation.tool_call_id, started=taken != "cancelled"),
            raw=None,
            tool=invocation.tool,
            session_id=invocation.session_id,
            settings=state.settings,
            duplicate_of=run.duplicate_of,
            attempts=attempts,
        )
    return outcome


async def _finish_foreign(
    state: WorkerState, part: Partition, entry_id: str, data: bytes, reason: str
) -> bool:
    # An envelope this worker cannot run (another contract version, a broken shape) still
    # belongs to an invocation when its identity can be read: finish that one as ERROR, so
    # every accepted invocation reaches a final state.
    identity = peek_identity(data)
    if (
        identity is None
        or not is_valid_session_id(identity.session_id)
        or state.keys.partition_of(identity.session_id) != part.index
        or await _call_state(state, part, identity, entry_id) != "open"
    ):
        return False
    result = error_result(
        ErrorCode.EXECUTION,
        f"this invocation could not be run by this worker: {reason}",
        identity.tool_call_id if is_valid_tool_call_id(identity.tool_call_id) else UNSET,
    )
    outcome = build_outcome(
        result=result,
        raw=None,
        tool=identity.tool,
        session_id=identity.session_id,
        settings=state.settings,
    )
    _hand_over(state, part, identity, entry_id, outcome, "")
    return True


def _hand_over(
    state: WorkerState,
    part: Partition,
    invocation: Invocation,
    entry_id: str,
    outcome: Outcome,
    scope: str,
    attempts: int = 1,
) -> None:
    """Hand an outcome (and the slot it holds) to the batched finisher; `scope`: the scope key
    it is finished with ('' for an envelope that did not decode)."""
    item = Finish(
        invocation=invocation,
        part=part,
        entry_id=entry_id,
        outcome=outcome,
        scope_key=scope,
        attempts=attempts,
    )
    state.finishing.put([item])


async def _call_state(
    state: WorkerState, part: Partition, invocation: Invocation, entry_id: str
) -> CallState:
    return await call_state(
        state.redis, part, invocation.session_id, invocation.tool_call_id, entry_id
    )


async def _dead_letter(
    state: WorkerState, part: Partition, entry_id: str, fields: dict[str, bytes], reason: str
) -> None:
    log.error("dead-lettering stream entry %s: %s", entry_id, reason)
    if state.metrics is not None:
        state.metrics.dead_letters.inc()
    await dead_letter_entry(
        state.redis, part, entry_id, fields, reason, state.settings.stream_maxlen
    )
