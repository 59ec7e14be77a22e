"""The readers of a worker: `XREADGROUP` for as many entries as there are free slots, each
read started as work (`workers.runtime.work`) in the worker's task group.

One reader per partition, up to `_READ_LANES`, each over the partitions `i mod lanes` on a
connection of its own (a `pipeline.lane.Lane`), so no partition waits on another's blocking
read. A call that needs no I/O (an `ImmediateSource`, no trace to record) runs inline, the
whole read batch at once, and goes straight to the finisher: no task, no await per call. A call
that does I/O runs in a task, unless its session holds its share of the slots already while
others may wait (`workers.runtime.share`): then it is put back at the end of the stream. A
read whose every entry went back is followed by a pause (others' turn), unless a call of a
session under its share waits behind them: then the reader reads on at once to reach it (a
hog's backlog of 48 calls in front of it took 8 reads and 8 pauses, about 0.5 s, before).
"""

from __future__ import annotations

import logging
from typing import Final

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from pipeline.consumer import (
    GroupLost,
    ReadEntry,
    read_group,
    recreate_group,
    requeue,
    waiting_sessions,
)
from pipeline.envelope import Invocation
from pipeline.keys import Partition
from pipeline.lane import Lane
from pipeline.redis_io import PipelineError, RedisUnavailable
from workers.logging_setup import invocation_context, records_spans
from workers.runtime.entry import Entry, finished_scope, read_entry, stage_run
from workers.runtime.slots import Finish
from workers.runtime.state import WorkerState
from workers.runtime.work import process
from workers.stage import is_immediate

__all__ = ["read_loop"]

log = logging.getLogger("aci.worker")
# An entry to put back: (partition, entry id, fields, what was read of it, its invocation).
_Back = tuple[Partition, str, dict[str, bytes], Entry | None, Invocation]
_PEEK: Final = 256  # undelivered entries looked at before putting a session's entries back
_READ_BLOCK_MS: Final = 500
_SHARED_BLOCK_MS: Final = 100  # a reader over several partitions blocks on one this long
_READ_LANES: Final = 16  # readers per worker: one per partition up to this many
_PUT_BACK_PAUSE_S: Final = 0.05  # after a read whose every entry went back: others' turn


async def read_loop(state: WorkerState, stop: anyio.Event, work: TaskGroup) -> None:
    """Read until `stop`, starting each entry in `work`; returns once every reader stopped."""
    parts = state.parts
    lanes = min(len(parts), _READ_LANES)
    readers = [(Lane(state.redis), parts[i::lanes]) for i in range(lanes)]
    # A reader takes at most its share of the slots, so no partition waits on another's
    # blocking read for a free slot.
    share = max(1, min(state.settings.read_batch, -(-state.concurrency // lanes)))
    try:
        if len(readers) == 1:
            lane, mine = readers[0]
            await _read_lane(state, lane, mine, share, stop, work)
            return
        async with anyio.create_task_group() as group:
            for lane, mine in readers:
                group.start_soon(_read_lane, state, lane, mine, share, stop, work)
    finally:
        for lane, _parts in readers:
            await lane.aclose()


async def _read_lane(
    state: WorkerState,
    lane: Lane,
    parts: list[Partition],
    share: int,
    stop: anyio.Event,
    work: TaskGroup,
) -> None:
    # One partition: a blocking read on it. Several (more partitions than lanes): a sweep
    # of non-blocking reads over them, from a rotating start; when every one is empty, a
    # short blocking read on the next in turn (a blocking read cannot span partitions:
    # their streams are in different slots). Idle, that is one sweep per short block.
    slots, consumer = state.slots, state.consumer
    backoff = 0.05
    turn = 0
    while not stop.is_set():
        taken = await slots.take(share)
        if stop.is_set():  # stopped while every slot was busy: no new reads
            slots.give(taken)
            return
        order = parts[turn:] + parts[:turn]
        turn = (turn + 1) % len(parts)
        try:
            if len(parts) == 1:
                entries = await read_group(lane, order[:1], consumer, taken, _READ_BLOCK_MS)
            else:
                sweep = order[: max(1, taken)]
                each = max(1, taken // len(sweep))
                entries = await read_group(lane, sweep, consumer, each, None)
                if not entries:
                    entries = await read_group(lane, order[:1], consumer, taken, _SHARED_BLOCK_MS)
            backoff = 0.05
        except RedisUnavailable:
            slots.give(taken)
            log.debug("redis unavailable; retrying in %.2fs", backoff)  # the heartbeat says it
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)
            continue
        except GroupLost as lost:
            slots.give(taken)
            await recreate_group(state.redis, lost.part)
            continue
        slots.give(taken - len(entries))
        if back := _start(state, entries, work, full=len(entries) >= taken):
            # Every entry read went back: put back here, then read on at once if a call that
            # may start now waits behind them, else pause (others' turn, and no busy loop
            # over entries that would only go back again).
            if not await _put_back(state, back, work, ask=True):
                await anyio.sleep(_PUT_BACK_PAUSE_S)
        elif entries:
            # The finisher sends what ran here before this reader sends its next blocking
            # read (each send wakes Redis: on a busy host, tens of microseconds a call).
            await anyio.lowlevel.checkpoint()


def _start(
    state: WorkerState, entries: list[ReadEntry], work: TaskGroup, full: bool
) -> list[_Back]:
    """Calls that need no I/O run here, the batch at once; the others each in a task (with
    the entry as read here: it is not decoded again), or back to the end of the stream when
    their session holds its share while others may wait (`full`: the read filled every slot
    it asked for), by a task. When every entry goes back: them, for the reader to put back
    itself (else [])."""
    done: list[Finish] = []
    later: list[tuple[Partition, str, dict[str, bytes], Entry | None]] = []
    # Asked once a batch (its answer is looked up at most once a second anyway).
    inline = not records_spans()
    for part, raw_id, fields in entries:
        entry_id = raw_id.decode()
        entry = item = None
        try:
            entry = read_entry(fields, state.handoff.pop((part.index, entry_id), None))
            item = _run_now(state, part, entry_id, entry) if inline else None
        except Exception:  # a bug on odd input: the guarded path below handles it
            item = None
        if item is None:
            later.append((part, entry_id, fields, entry))
        else:
            done.append(item)
    if done:
        state.finishing.put(done)
    invocations = [e.invocation if e is not None else None for *_, e in later]
    contested = full or len({i.session_id for i in invocations if i is not None}) > 1
    back: list[_Back] = []
    for (part, entry_id, fields, entry), inv in zip(later, invocations, strict=True):
        if inv is None:
            work.start_soon(process, state, part, entry_id, fields, 1, entry)
        elif state.share.take(inv.session_id, contested=contested):
            work.start_soon(_counted, state, inv.session_id, part, entry_id, fields, entry)
        else:
            back.append((part, entry_id, fields, entry, inv))
    if back and len(back) == len(entries):
        return back
    if back:
        work.start_soon(_put_back, state, back, work)
    return []


async def _counted(
    state: WorkerState,
    session_id: str,
    part: Partition,
    entry_id: str,
    fields: dict[str, bytes],
    entry: Entry | None,
) -> None:
    try:
        await process(state, part, entry_id, fields, 1, entry)
    finally:
        state.share.done(session_id)


async def _put_back(
    state: WorkerState, back: list[_Back], work: TaskGroup, *, ask: bool = False
) -> bool:
    # Entries over their session's share go to the end of their stream, unless no other
    # session's entry waits behind them (`waiting_sessions`: the next `_PEEK` undelivered ones
    # are looked at): a session alone runs them here after all, up to every slot but one
    # share's worth (`SessionShare.take_alone`), and they keep their slots until finished.
    # The slots of those put back are freed once they are back in their streams (or, when
    # Redis fails, left pending for takeover after the visibility timeout). `ask`: also
    # whether an entry of a session under its share waits behind them (it may start now).
    held = len(back)
    runnable = False
    try:
        with anyio.CancelScope(shield=True):
            alone, runnable = await _alone(state, back, ask)
            later: list[tuple[Partition, str, str, str]] = []
            for part, entry_id, fields, entry, inv in back:
                if (part.index, inv.session_id) in alone and state.share.take_alone(
                    inv.session_id, state.concurrency
                ):
                    work.start_soon(_counted, state, inv.session_id, part, entry_id, fields, entry)
                    held -= 1
                else:
                    later.append((part, entry_id, inv.session_id, inv.tool_call_id))
            if later:
                await requeue(state.scripts, later)
    except PipelineError as exc:
        log.warning("could not put %d entries back (%s); left for takeover", held, exc)
    finally:
        state.slots.give(held)
    return runnable


async def _alone(
    state: WorkerState, back: list[_Back], ask: bool
) -> tuple[set[tuple[int, str]], bool]:
    # (partition, session) of the entries to put back whose session nobody else waits behind
    # (only a partition whose entries to put back are all of one session can be); and, `ask`,
    # whether an entry of another session, under its share, waits behind them in any partition.
    sessions: dict[int, set[str]] = {}
    parts: dict[int, Partition] = {}
    for part, *_rest, inv in back:
        sessions.setdefault(part.index, set()).add(inv.session_id)
        parts[part.index] = part
    alone: set[tuple[int, str]] = set()
    runnable = False
    share = state.share
    for index, found in sessions.items():
        if len(found) > 1 and not ask:
            continue  # not alone, and not asked who waits
        waiting = await waiting_sessions(state.redis, parts[index], _PEEK)
        if waiting is None:
            continue  # more wait than were looked at: someone may, not known who
        others = waiting - found
        if not others and len(found) == 1:
            alone.add((index, next(iter(found))))
        runnable = runnable or any(share.running.get(s, 0) < share.cap for s in others)
    return alone, runnable


def _run_now(state: WorkerState, part: Partition, entry_id: str, entry: Entry) -> Finish | None:
    # A first delivery of a call that needs no I/O (and records no span: `_start` asks);
    # else None.
    invocation = entry.invocation
    if (
        invocation is None
        or invocation.cancel is True  # a cancel admitted as its call: `work` ends it
        or invocation.traceparent
        or state.keys.partition_of(invocation.session_id) != part.index
        or not is_immediate(invocation.tool, state.sources)
    ):
        return None
    with invocation_context(
        session=invocation.session_id,
        tool=invocation.tool,
        tool_call_id=invocation.tool_call_id,
        entry_id=entry_id,
    ):
        run = stage_run(state, invocation, entry.duplicate_of, 1, entry.handed)
        outcome = run.run_now(state.sources)
    return Finish(
        invocation=invocation,
        part=part,
        entry_id=entry_id,
        outcome=outcome,
        scope_key=finished_scope(invocation, run, entry.scope_key),
    )
