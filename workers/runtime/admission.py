"""The admission loop of a worker: requests become invocations (`pipeline.admission`).

Each round takes a batch from the request stream of each partition that rang (one take
script per partition, all in one round trip on a connection of its own), validates the
requests here, and admits them (one admit script per partition) in one round trip together
with the next take of the partitions that had requests, so a busy admission costs one round
trip per batch.

**Learning of requests without polling.** A partition rings (`pipeline.doorbell`: Redis pushes
the name of the request stream a command modified, on a connection per server that only
listens) and admission takes from it at once; idle, it waits for a ring, taking every
partition once a second anyway (`_SAFETY_S`: a ring missed while a connection or a cluster's
topology changed). A ring names a key of the worker's own prefix, never anything a submitter
wrote: the requests are read only by the take script, which refuses oversized ones inside
Redis. Where the server or the ACL refuses `CLIENT TRACKING`, or while a connection is lost,
admission polls as before: an empty round sleeps from 0.25 ms doubling up to `_BUSY_MAX_S`
while requests came in the last `_BUSY_S`, else up to `_IDLE_MAX_S`. With more partitions
than `_ROUND_PARTS`, each round takes from at most that many of them, in turn.

Admission never waits for a slot: it only writes records and queues invocations, so a worker
busy with slow calls still admits (and answers conflicts) at once.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Final

import anyio

from pipeline.admission import (
    FIRST_CALL_KEY,
    WRONG_TYPE,
    Admission,
    Refusal,
    admit_call,
    judge,
    request_max_bytes,
    take_call,
    taken,
)
from pipeline.cancel import ToCancel
from pipeline.doorbell import Doorbell
from pipeline.keys import Partition
from pipeline.lane import Lane, run_scripts
from pipeline.redis_io import PipelineError, RedisUnavailable, reply_code
from workers.runtime.cancels import apply_cancels, cancels_of
from workers.runtime.state import WorkerState

__all__ = ["admission_loop", "admit_round"]

log = logging.getLogger("aci.worker")
_TAKE: Final = 256  # requests per partition per round
_BUSY_MAX_S: Final = 0.002
_IDLE_MAX_S: Final = 0.02
_BUSY_S: Final = 2.0
_SAFETY_S: Final = 1.0  # rung by the doorbell: every partition is still taken this often
_ROUND_PARTS: Final = 16
_TAKEOVER_MS: Final = 5000  # a taken request left this long unadmitted is taken over
_HANDOFF_MAX: Final = 4096  # admitted calls remembered for this worker's own reader

_Judged = list[tuple[Partition, list[Admission], list[Refusal]]]
_Cancels = list[tuple[Partition, list[ToCancel]]]


async def admission_loop(state: WorkerState, stop: anyio.Event) -> None:
    """Admit requests until `stop`."""
    lane = Lane(state.redis)
    bell = Doorbell(state.redis, state.parts)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(bell.run, stop)
            await _admit_until(state, lane, bell, stop)
            group.cancel_scope.cancel()
    finally:
        await lane.aclose()


async def _admit_until(state: WorkerState, lane: Lane, bell: Doorbell, stop: anyio.Event) -> None:
    parts = state.parts
    by_index = {p.index: p for p in parts}
    pending: list[Partition] = list(parts)  # to take next; the first round takes them all
    replies: list[Any] | None = None  # takes already answered (sent with the last admit)
    idle, backoff, active_at = 0.00025, 0.05, 0.0
    while not stop.is_set():
        try:
            if replies is None:
                if not pending:
                    pending = await _next(state, bell, stop, by_index, idle, active_at)
                    idle = min(idle * 2, _BUSY_MAX_S if time.monotonic() - active_at < _BUSY_S
                               else _IDLE_MAX_S)  # fmt: skip
                    continue
                chosen, pending = pending[:_ROUND_PARTS], pending[_ROUND_PARTS:]
                bell.clear(p.index for p in chosen)
                replies = await _take(state, lane, chosen)
            chosen = replies.pop()
            judged, found = _taken(state, chosen, replies)
            replies = None
            backoff = 0.05
            if found:
                idle, active_at = 0.00025, time.monotonic()
            if not judged:
                pending += [p for p in found if p not in pending]
                continue
            # The partitions that had requests are taken again at once, in the admit's round
            # trip (rings cleared first: a request appended after that take rings again).
            again = [p for p, _a, _r in judged]
            pending = [p for p in pending if p not in again]
            bell.clear(p.index for p in again)
            replies = await _admit_then_take(state, lane, judged, again)
        except RedisUnavailable:
            log.debug("admission: redis unavailable; retrying in %.2fs", backoff)  # said once
            replies, pending = None, list(parts)
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)
        except PipelineError as exc:
            log.error("admission: redis refused (%s)", exc)
            replies, pending = None, list(parts)
            await anyio.sleep(0.5)


async def _next(
    state: WorkerState,
    bell: Doorbell,
    stop: anyio.Event,
    by_index: dict[int, Partition],
    idle: float,
    active_at: float,
) -> list[Partition]:
    """The partitions to take next, once there is reason to: a ring (or `_SAFETY_S` without
    one) when the doorbell is armed, else the poll's sleep."""
    if bell.armed:
        rung = await bell.wait(_SAFETY_S, stop)
        if rung:
            return [by_index[i] for i in sorted(rung) if i in by_index]
        return list(state.parts)
    with anyio.move_on_after(idle):
        await stop.wait()
    return list(state.parts)


async def _take(state: WorkerState, lane: Lane, parts: list[Partition]) -> list[Any]:
    replies = await run_scripts(
        lane, state.scripts, state.scripts.take_sha, _takes(state, parts), errors_in_place=True
    )
    return [*replies, parts]


def _takes(state: WorkerState, parts: list[Partition]) -> list[tuple[list[str], list[Any]]]:
    max_bytes = request_max_bytes(state.settings.argument_max_bytes)
    return [
        take_call(p, consumer=state.consumer, count=_TAKE, max_bytes=max_bytes,
                  min_idle_ms=_TAKEOVER_MS, maxlen=state.settings.stream_maxlen)
        for p in parts
    ]  # fmt: skip


def _taken(
    state: WorkerState, parts: list[Partition], replies: list[Any]
) -> tuple[_Judged, list[Partition]]:
    """Judge the take replies of `parts`: (what to admit per partition, the partitions that
    had requests, refused in Redis or not)."""
    judged: _Judged = []
    found: list[Partition] = []
    for part, reply in zip(parts, replies, strict=True):
        if isinstance(reply, Exception):
            log.error("admission: take refused (%s)", reply_code(reply))
            continue
        refused_in_redis, pairs = taken(reply)
        if refused_in_redis < 0:
            log.error("admission: the request stream of partition %d is not a stream", part.index)
            continue
        if refused_in_redis or pairs:
            found.append(part)
        if refused_in_redis:
            log.warning("admission: %d oversized or malformed requests refused", refused_in_redis)
        if pairs:
            judged.append((part, *_judge(state, part, pairs)))
    return judged, found


async def _admit_then_take(
    state: WorkerState, lane: Lane, judged: _Judged, then: list[Partition]
) -> list[Any]:
    """Admit `judged` and take from `then` in one round trip; returns the takes' replies
    (with `then` last, as `_take` does)."""
    scripts = state.scripts
    admits = _admits(state, judged)
    calls = [*admits, *_takes(state, then)]
    shas = [scripts.admit_sha] * len(admits) + [scripts.take_sha] * len(then)
    replies = await run_scripts(lane, scripts, shas, calls, errors_in_place=True)
    cancels: _Cancels = []
    again = _admitted(state, judged, replies[: len(admits)], cancels)
    while again:  # a call with a key of the wrong type: refused alone, the rest again
        again = await _admit(state, lane, again, cancels)
    if cancels:  # issue 32: the calls whose cancel was admitted end CANCELLED
        await apply_cancels(state, lane, cancels)
    return [*replies[len(admits) :], then]


async def admit_round(state: WorkerState, lane: Lane, parts: list[Partition]) -> int:
    """One round over `parts`: take, judge, admit. Returns how many requests it handled."""
    replies = await _take(state, lane, parts)
    judged, _found = _taken(state, parts, replies[:-1])
    handled = 0
    for reply in replies[:-1]:
        if not isinstance(reply, Exception):
            refused_in_redis, pairs = taken(reply)
            handled += max(0, refused_in_redis) + len(pairs)
    cancels: _Cancels = []
    while judged:
        judged = await _admit(state, lane, judged, cancels)
    if cancels:  # issue 32: the calls whose cancel was admitted end CANCELLED
        await apply_cancels(state, lane, cancels)
    return handled


def _judge(
    state: WorkerState, part: Partition, pairs: list[tuple[str, bytes]]
) -> tuple[list[Admission], list[Refusal]]:
    settings = state.settings
    admitted: list[Admission] = []
    refused: list[Refusal] = []
    for entry_id, envelope in pairs:
        verdict = judge(
            state.keys, part, entry_id, envelope,
            argument_max_bytes=settings.argument_max_bytes,
            default_lookback=settings.default_lookback,
        )  # fmt: skip
        if isinstance(verdict, Admission):
            admitted.append(verdict)
        else:
            refused.append(verdict)
    if refused:
        log.warning("admission: %d requests refused (%s)", len(refused), refused[0].reason)
    return admitted, refused


def _admits(state: WorkerState, judged: _Judged) -> list[tuple[list[str], list[Any]]]:
    settings = state.settings
    now_ms = int(time.time() * 1000)
    return [
        admit_call(part, admitted, refused, now_ms=now_ms, maxlen=settings.stream_maxlen,
                   retention_ms=settings.retention_s * 1000)
        for part, admitted, refused in judged
    ]  # fmt: skip


async def _admit(state: WorkerState, lane: Lane, judged: _Judged, cancels: _Cancels) -> _Judged:
    """Admit each partition's batch (one script each, one round trip); returns the batches to
    admit again (`_admitted`)."""
    scripts = state.scripts
    calls = _admits(state, judged)
    done = await run_scripts(lane, scripts, scripts.admit_sha, calls, errors_in_place=True)
    return _admitted(state, judged, done, cancels)


def _admitted(state: WorkerState, judged: _Judged, done: list[Any], cancels: _Cancels) -> _Judged:
    """Hand the admitted calls to this worker's reader; returns the batches to admit again: a
    call one of whose keys has the wrong type (never a submitter's doing: only workers write
    them) is refused alone, and the rest of its batch goes again."""
    again: _Judged = []
    for (part, admitted, refused), reply in zip(judged, done, strict=True):
        if isinstance(reply, Exception):  # left pending: taken over after _TAKEOVER_MS
            log.error("admission: admit refused (%s)", reply_code(reply))
        elif reply and reply[0] == WRONG_TYPE:
            at = (int(reply[1]) - FIRST_CALL_KEY) // 2
            if at < 0:
                log.error("admission: a key of partition %d has the wrong type", part.index)
                continue
            bad = admitted[at]
            log.error("admission: a key of one call has the wrong type; refused")
            reason = "a key of this call has the wrong type"
            again.append(
                (part, admitted[:at] + admitted[at + 1 :],
                 [*refused, Refusal(bad.entry_id, reason, bad.session_id, bad.tool_call_id)])
            )  # fmt: skip
        else:
            _hand_off(state, part, admitted, reply)
            if found := cancels_of(state, admitted, reply):
                cancels.append((part, found))
    return again


def _hand_off(
    state: WorkerState, part: Partition, admitted: list[Admission], reply: list[Any]
) -> None:
    # A call admitted now (its reply is its entry id) is remembered for this worker's reader:
    # when it reads that entry, it runs what was decoded here instead of decoding it again.
    handoff = state.handoff
    for admission, outcome in zip(admitted, reply, strict=True):
        if isinstance(outcome, bytes):
            handoff[(part.index, outcome.decode())] = admission  # ids are per stream
    while len(handoff) > _HANDOFF_MAX:
        handoff.popitem(last=False)
