"""The admission loop of a worker: requests become invocations (`pipeline.admission`).

Each round takes a batch from the request stream of each partition (one take script per
partition, all in one round trip on a connection of its own), validates the requests here,
and admits them (one admit script per partition, one more round trip). A round that found
requests is followed at once by the next; an empty one sleeps, from 0.25 ms doubling up to
`_BUSY_MAX_S` while requests came in the last `_BUSY_S`, else up to `_IDLE_MAX_S` (a script
cannot block, and a blocking read would hand the worker whatever a submitter wrote, oversized
or not): a call after a long quiet waits at most 20 ms for admission, one in steady traffic at
most 2 ms. With more partitions than `_ROUND_PARTS`, each round takes
from the next `_ROUND_PARTS` of them in turn.

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
_ROUND_PARTS: Final = 16
_TAKEOVER_MS: Final = 5000  # a taken request left this long unadmitted is taken over
_HANDOFF_MAX: Final = 4096  # admitted calls remembered for this worker's own reader


async def admission_loop(state: WorkerState, stop: anyio.Event) -> None:
    """Admit requests until `stop`."""
    lane = Lane(state.redis)
    parts = state.parts
    turn, idle, backoff = 0, 0.00025, 0.05
    active_at = 0.0
    try:
        while not stop.is_set():
            chosen = parts[turn : turn + _ROUND_PARTS] or parts[:_ROUND_PARTS]
            turn = (turn + _ROUND_PARTS) % len(parts) if len(parts) > _ROUND_PARTS else 0
            try:
                found = await admit_round(state, lane, chosen)
                backoff = 0.05
            except RedisUnavailable:
                log.debug("admission: redis unavailable; retrying in %.2fs", backoff)  # said once
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            except PipelineError as exc:
                log.error("admission: redis refused (%s)", exc)
                await anyio.sleep(0.5)
                continue
            now = time.monotonic()
            if found:
                idle, active_at = 0.00025, now
                continue
            with anyio.move_on_after(idle):
                await stop.wait()
            idle = min(idle * 2, _BUSY_MAX_S if now - active_at < _BUSY_S else _IDLE_MAX_S)
    finally:
        await lane.aclose()


async def admit_round(state: WorkerState, lane: Lane, parts: list[Partition]) -> int:
    """One round over `parts`: take, judge, admit. Returns how many requests it handled."""
    settings, scripts = state.settings, state.scripts
    max_bytes = request_max_bytes(settings.argument_max_bytes)
    takes = [
        take_call(p, consumer=state.consumer, count=_TAKE, max_bytes=max_bytes,
                  min_idle_ms=_TAKEOVER_MS, maxlen=settings.stream_maxlen)
        for p in parts
    ]  # fmt: skip
    replies = await run_scripts(lane, scripts, scripts.take_sha, takes, errors_in_place=True)
    judged: list[tuple[Partition, list[Admission], list[Refusal]]] = []
    handled = 0
    for part, reply in zip(parts, replies, strict=True):
        if isinstance(reply, Exception):
            log.error("admission: take refused (%s)", reply_code(reply))
            continue
        refused_in_redis, pairs = taken(reply)
        if refused_in_redis < 0:
            log.error("admission: the request stream of partition %d is not a stream", part.index)
            continue
        handled += refused_in_redis + len(pairs)
        if refused_in_redis:
            log.warning("admission: %d oversized or malformed requests refused", refused_in_redis)
        if pairs:
            judged.append((part, *_judge(state, part, pairs)))
    cancels: list[tuple[Partition, list[ToCancel]]] = []
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


async def _admit(
    state: WorkerState,
    lane: Lane,
    judged: list[tuple[Partition, list[Admission], list[Refusal]]],
    cancels: list[tuple[Partition, list[ToCancel]]],
) -> list[tuple[Partition, list[Admission], list[Refusal]]]:
    """Admit each partition's batch (one script each, one round trip); returns the batches to
    admit again: a call one of whose keys has the wrong type (never a submitter's doing: only
    workers write them) is refused alone, and the rest of its batch goes again."""
    settings, scripts = state.settings, state.scripts
    now_ms = int(time.time() * 1000)
    calls = [
        admit_call(part, admitted, refused, now_ms=now_ms, maxlen=settings.stream_maxlen,
                   retention_ms=settings.retention_s * 1000)
        for part, admitted, refused in judged
    ]  # fmt: skip
    done = await run_scripts(lane, scripts, scripts.admit_sha, calls, errors_in_place=True)
    again: list[tuple[Partition, list[Admission], list[Refusal]]] = []
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
