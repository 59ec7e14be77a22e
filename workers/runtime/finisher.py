"""The finisher of a worker: outcomes written in batches, one finish script per partition of a
batch (`pipeline/lua/finish.lua`), sent together on a connection of its own, then their slots
freed.

Each finish is atomic and idempotent: state, result, raw record, both views and the ack
become visible together, once, even when two workers race for one entry. A batch is written
shielded (a stopping worker never leaves one half-sent); while Redis is unreachable it is
retried until the visibility timeout, then left pending for another worker to take over.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Final

import anyio
import msgspec

from contracts import ErrorResult
from pipeline.lane import Lane, run_scripts
from pipeline.record import (
    FINISH_APPLIED,
    FINISH_REFUSED,
    FINISH_WRONG_TYPE,
    ToFinish,
    finish_calls,
)
from pipeline.redis_io import RedisProtocolError, RedisUnavailable, reply_code
from workers.logging_setup import invocation_context, parse_traceparent
from workers.runtime.slots import Finish
from workers.runtime.state import WorkerState

__all__ = ["finish_loop"]

log = logging.getLogger("aci.worker")
_ENCODER: Final = msgspec.json.Encoder()
_FINISH_BATCH: Final = 256


async def finish_loop(state: WorkerState) -> None:
    """Write outcomes as they are queued, until the finish queue is closed and empty."""
    lane = Lane(state.redis)
    try:
        while (batch := await state.finishing.batch(_FINISH_BATCH)) is not None:
            with anyio.CancelScope(shield=True):
                await _flush(state, lane, batch)
            _finished(state, batch)
    finally:
        await lane.aclose()


def _finished(state: WorkerState, batch: list[Finish]) -> None:
    # Written (or left pending for takeover): log, and free the slots.
    if log.isEnabledFor(logging.INFO):
        for item in batch:
            _log_finished(item)
    state.slots.give(len(batch))


def _log_finished(item: Finish) -> None:
    inv, outcome = item.invocation, item.outcome
    parent = parse_traceparent(inv.traceparent) if inv.traceparent else None
    with invocation_context(
        session=inv.session_id,
        tool=inv.tool,
        tool_call_id=inv.tool_call_id,
        entry_id=item.entry_id,
        trace_id=parent.trace_id if parent else None,
    ):
        if item.applied:
            result = outcome.result
            # An ERROR names its code (ERROR/UNAVAILABLE), never only ERROR/ERROR.
            kind = result.error.code.value if isinstance(result, ErrorResult) else None
            log.info(
                "finished %s/%s (attempt %d)",
                outcome.control.status.value,
                kind or result.evidence_status.value,
                item.attempts,
            )
        elif item.applied is False:
            log.info("already final: another finisher applied it first")


async def _flush(state: WorkerState, lane: Lane, batch: list[Finish]) -> None:
    backoff = 0.05
    deadline = time.monotonic() + state.settings.visibility_timeout_s
    groups = _by_partition(batch)
    calls = [_finish_calls(state, group) for group in groups]
    while True:
        try:
            started = time.perf_counter()
            scripts = state.scripts
            replies = await run_scripts(
                lane, scripts, scripts.finish_sha, calls, errors_in_place=True
            )
            _record(state, groups, replies, time.perf_counter() - started)
            return
        except RedisUnavailable:
            if time.monotonic() > deadline:
                # Left pending: another worker takes it over after the visibility timeout.
                log.error("could not finish %d invocations; left for takeover", len(batch))
                return
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)
        except RedisProtocolError as exc:  # e.g. OOM or READONLY: not retryable here
            log.error("finish refused by redis (%s); %d left for takeover", exc, len(batch))
            return


def _by_partition(batch: list[Finish]) -> list[list[Finish]]:
    # One finish script per partition (its keys share one slot), in order of first appearance.
    groups: dict[int, list[Finish]] = {}
    for item in batch:
        groups.setdefault(item.part.index, []).append(item)
    return list(groups.values())


def _record(
    state: WorkerState, groups: list[list[Finish]], replies: list[Any], finish_s: float
) -> None:
    metrics = state.metrics
    refused: list[str] = []
    left = 0
    for group, reply in zip(groups, replies, strict=True):
        if isinstance(reply, Exception) or len(reply) != len(group):
            # e.g. OOM, or a stream of the partition of the wrong type: left pending, taken
            # over later
            refused.append(reply_code(reply) if isinstance(reply, Exception) else "WRONGTYPE")
            left += len(group)
            continue
        for item, done in zip(group, reply, strict=True):
            item.applied = done == FINISH_APPLIED
            if done == FINISH_WRONG_TYPE:  # nothing written, not acked: left pending
                item.applied = None
                refused.append("WRONGTYPE")
                left += 1
            elif done == FINISH_REFUSED:
                item.applied = None
                _log_foreign(state, item)
            elif item.applied and metrics is not None:
                metrics.finished(item.invocation.tool, item.outcome, finish_s)
    if refused:
        log.error("finish refused by redis (%s); %d left for takeover", refused[0], left)


def _log_foreign(state: WorkerState, item: Finish) -> None:
    # The finish script dead-lettered an entry that is not the one the call recorded.
    with invocation_context(entry_id=item.entry_id):
        log.error("dead-lettered stream entry %s: not the entry recorded for this call",
                  item.entry_id)  # fmt: skip
    if state.metrics is not None:
        state.metrics.dead_letters.inc()


def _finish_calls(state: WorkerState, group: list[Finish]) -> tuple[list[str], list[Any]]:
    settings = state.settings
    encode = _ENCODER.encode
    finishes = []
    for item in group:
        inv, outcome = item.invocation, item.outcome
        result, control = outcome.result, outcome.control
        finishes.append(
            ToFinish(
                inv.session_id,  # session_id
                inv.tool_call_id,  # tool_call_id
                inv.tool,  # tool
                item.entry_id,  # entry_id
                # An enum's `_value_` is its value without `.value`'s descriptor (~0.5 µs).
                control.status._value_,  # status
                result.evidence_status._value_,  # evidence_status
                encode(result),  # result
                outcome.raw,  # raw
                encode(outcome.observation),  # model
                encode(control),  # control
                item.scope_key,  # scope_key: computed where the call was decoded
            )
        )
    return finish_calls(
        group[0].part,
        finishes,
        now_ms=int(time.time() * 1000),
        retention_ms=settings.retention_s * 1000,
        maxlen=settings.stream_maxlen,
    )
