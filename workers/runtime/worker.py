"""The worker process: a consumer group reader, a takeover janitor and a batched finisher,
each a task in one anyio task group.

- read: `XREADGROUP … BLOCK` for as many entries as there are free slots (`--concurrency`);
- work: each entry runs the stages (`workers.stage`) in its own task;
- finish: outcomes are finished in batches — one pipeline of finish scripts, each atomic and
  idempotent (state, result, raw record, both views and the ack, once);
- janitor: `XAUTOCLAIM` takes over entries idle past the visibility timeout; an entry delivered
  more than `max_attempts` times finishes as ERROR/GAVE_UP; streams are trimmed by the
  retention policy, never past an unfinished entry.

SIGTERM/SIGINT (see `workers.cli`) set `stop`: no new reads, in-flight work finishes (or is
left pending for takeover), nothing is lost.
"""

from __future__ import annotations

import collections
import logging
import os
import secrets
import socket
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import anyio
import msgspec
from anyio.abc import TaskGroup
from msgspec import UNSET, UnsetType

from contracts import ErrorCode, error_result, is_valid_tool_call_id
from pipeline.consumer import (
    GroupLost,
    ReadEntry,
    ack,
    call_state,
    claim_idle,
    dead_letter_entry,
    delivery_counts,
    is_group_lost,
    read_group,
    recreate_group,
    wait_for_groups,
)
from pipeline.envelope import (
    EnvelopeError,
    Invocation,
    decode_envelope,
    peek_identity,
    scope_key,
)
from pipeline.keys import Partition, is_valid_session_id
from pipeline.lane import Lane, run_scripts
from pipeline.record import FINISH_REFUSED, finish_call, invocation_entry
from pipeline.redis_io import (
    PipelineError,
    Redis,
    RedisProtocolError,
    RedisUnavailable,
    Scripts,
    reply_code,
)
from pipeline.settings import Settings
from pipeline.trim import trim_streams
from workers.logging_setup import invocation_context, parse_traceparent, records_spans, span
from workers.sources import Source
from workers.stage import Outcome, StageRun, build_outcome, is_immediate

if TYPE_CHECKING:
    from workers.metrics import WorkerMetrics

__all__ = ["consumer_name", "run_worker"]

log = logging.getLogger("aci.worker")
_ENCODER: Final = msgspec.json.Encoder()
_FINISH_BATCH: Final = 256
_READ_BLOCK_MS: Final = 500
_SHARED_BLOCK_MS: Final = 100  # a reader over several partitions blocks on one this long
_READ_LANES: Final = 16  # readers per worker: one per partition up to this many


def consumer_name() -> str:
    """A consumer name unique to this process: host, pid and a random suffix."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


class _Finish(msgspec.Struct, kw_only=True):
    """One outcome handed to the finisher; it holds one of the worker's slots until written."""

    invocation: Invocation
    part: Partition  # the partition whose stream holds the entry (the session's)
    entry_id: str
    outcome: Outcome
    attempts: int = 1
    decoded: bool = True  # False: an envelope that did not decode (finished as ERROR only)
    applied: bool | None = None  # set by the finisher: True applied, False already final


class _Slots:
    """The worker's `--concurrency`: how many invocations it holds at once (read, running,
    or waiting to be finished). Taken many at a time by the reader, freed in batches by
    the finisher: a counter, not a semaphore, so neither costs a step per slot. Waiters
    are served in turn (the janitor is not starved by the reader taking every free slot)."""

    def __init__(self, total: int) -> None:
        self.free = total
        self._queue: collections.deque[list[anyio.Event]] = collections.deque()

    async def take(self, most: int) -> int:
        """At least one slot and at most `most`, waiting for the first (in turn)."""
        if self.free <= 0 or self._queue:
            turn = [anyio.Event()]
            self._queue.append(turn)
            try:
                while self.free <= 0 or self._queue[0] is not turn:
                    await turn[0].wait()
                    turn[0] = anyio.Event()
            finally:
                self._queue.remove(turn)
                if self._queue and self.free > 0:
                    self._queue[0][0].set()  # the next in line
        taken = min(self.free, most)
        self.free -= taken
        return taken

    def give(self, count: int) -> None:
        if count > 0:
            self.free += count
            if self._queue:
                self._queue[0][0].set()


class _FinishQueue:
    """Outcomes waiting for the batched finisher (one consumer). Bounded by the worker's
    slots: every queued outcome holds one until its batch is written."""

    def __init__(self) -> None:
        self.items: collections.deque[_Finish] = collections.deque()
        self.wake = anyio.Event()
        self.closed = False

    def put(self, items: list[_Finish]) -> None:
        self.items.extend(items)
        self.wake.set()

    def close(self) -> None:
        self.closed = True
        self.wake.set()

    async def batch(self, limit: int) -> list[_Finish] | None:
        """Up to `limit` outcomes, waiting for the first; None once closed and empty."""
        while not self.items:
            if self.closed:
                return None
            await self.wake.wait()
            self.wake = anyio.Event()
        count = min(limit, len(self.items))
        return [self.items.popleft() for _ in range(count)]


class _Worker:
    def __init__(
        self,
        redis: Redis,
        settings: Settings,
        sources: Mapping[str, Source],
        concurrency: int,
        consumer: str,
        metrics: WorkerMetrics | None = None,
        partitions: Sequence[int] | None = None,
    ) -> None:
        self.metrics = metrics
        self.redis = redis
        self.settings = settings
        self.sources = sources
        self.consumer = consumer
        self.keys = settings.keys()
        chosen = range(self.keys.count) if partitions is None else sorted(set(partitions))
        self.parts = [self.keys.parts[i] for i in chosen]
        self.by_stream = {p.invocations.encode(): p for p in self.parts}
        self.scripts = Scripts(redis, (settings.wait_replicas, settings.wait_timeout_ms))
        self.slots = _Slots(concurrency)
        self.concurrency = concurrency
        self.finishing = _FinishQueue()
        # The readers' and the finisher's round trips go over connections of their own: one
        # reader per partition up to _READ_LANES, each over the partitions `i mod lanes`.
        lanes = min(len(self.parts), _READ_LANES)
        self.readers = [(Lane(redis), self.parts[i::lanes]) for i in range(lanes)]
        # A reader takes at most its share of the slots, so no partition waits on another's
        # blocking read for a free slot.
        self.read_share = max(1, min(settings.read_batch, -(-concurrency // lanes)))
        self.finisher = Lane(redis)

    # -- read ---------------------------------------------------------------------------
    async def read_loop(self, stop: anyio.Event, work: TaskGroup) -> None:
        if len(self.readers) == 1:
            lane, parts = self.readers[0]
            await self._read_lane(lane, parts, stop, work)
            return
        async with anyio.create_task_group() as readers:
            for lane, parts in self.readers:
                readers.start_soon(self._read_lane, lane, parts, stop, work)

    async def _read_lane(
        self, lane: Lane, parts: list[Partition], stop: anyio.Event, work: TaskGroup
    ) -> None:
        # One partition: a blocking read on it. Several (more partitions than lanes): a sweep
        # of non-blocking reads over them, from a rotating start; when every one is empty, a
        # short blocking read on the next in turn (a blocking read cannot span partitions:
        # their streams are in different slots). Idle, that is one sweep per short block.
        backoff = 0.05
        turn = 0
        while not stop.is_set():
            taken = await self.slots.take(self.read_share)
            if stop.is_set():  # stopped while every slot was busy: no new reads
                self.slots.give(taken)
                return
            order = parts[turn:] + parts[:turn]
            turn = (turn + 1) % len(parts)
            try:
                if len(parts) == 1:
                    entries = await self._read(lane, order[:1], taken, _READ_BLOCK_MS)
                else:
                    sweep = order[: max(1, taken)]
                    entries = await self._read(lane, sweep, max(1, taken // len(sweep)), None)
                    if not entries:
                        entries = await self._read(lane, order[:1], taken, _SHARED_BLOCK_MS)
                backoff = 0.05
            except RedisUnavailable:
                self.slots.give(taken)
                log.warning("redis unavailable; retrying in %.2fs", backoff)
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            except GroupLost as lost:
                self.slots.give(taken)
                await recreate_group(self.redis, lost.part)
                continue
            self.slots.give(taken - len(entries))
            self._start(entries, work)

    async def _read(
        self, lane: Lane, parts: list[Partition], count: int, block_ms: int | None
    ) -> list[ReadEntry]:
        return await read_group(lane, parts, self.consumer, count, block_ms)

    def _start(self, entries: list[ReadEntry], work: TaskGroup) -> None:
        """Calls that need no I/O run here, the batch at once; the others each in a task."""
        done: list[_Finish] = []
        for part, raw_id, fields in entries:
            entry_id = raw_id.decode()
            try:
                item = self._run_now(part, entry_id, fields)
            except Exception:  # a bug on odd input: the guarded path below handles it
                item = None
            if item is None:
                work.start_soon(self.process, part, entry_id, fields, 1)
            else:
                done.append(item)
        if done:
            self.finishing.put(done)

    def _run_now(self, part: Partition, entry_id: str, fields: dict[str, bytes]) -> _Finish | None:
        # A first delivery of a call that needs no I/O and records no span; else None.
        data, duplicate_of = invocation_entry(fields)
        try:
            invocation = decode_envelope(data)
        except EnvelopeError:
            return None
        if (
            invocation.traceparent
            or self.keys.partition_of(invocation.session_id) != part.index
            or records_spans()
            or not is_immediate(invocation.tool, self.sources)
        ):
            return None
        with invocation_context(
            session=invocation.session_id,
            tool=invocation.tool,
            tool_call_id=invocation.tool_call_id,
            entry_id=entry_id,
        ):
            run = self._stages(invocation, duplicate_of, attempts=1)
            outcome = run.run_now(self.sources)
        return _Finish(invocation=invocation, part=part, entry_id=entry_id, outcome=outcome)

    def _stages(
        self, invocation: Invocation, duplicate_of: str | UnsetType, attempts: int
    ) -> StageRun:
        # Queue time counts for a first delivery only (a retry's wait is the takeover's).
        queued_ms = max(0.0, time.time() * 1000 - invocation.submitted_at_ms)
        return StageRun(
            tool=invocation.tool,
            tool_call_id=invocation.tool_call_id,
            arguments=invocation.arguments,
            session_id=invocation.session_id,
            settings=self.settings,
            attempts=attempts,
            duplicate_of=duplicate_of,
            queued_ms=queued_ms if attempts == 1 else 0.0,
        )

    # -- work ---------------------------------------------------------------------------
    async def process(
        self, part: Partition, entry_id: str, fields: dict[str, bytes], attempts: int
    ) -> None:
        # Holds one slot; an outcome handed to the finisher takes the slot along.
        handed = False
        try:
            handed = await self._process(part, entry_id, fields, attempts)
        except PipelineError as exc:
            # Redis trouble mid-invocation: the entry stays pending and is taken over later.
            log.warning("entry %s left for takeover: %s", entry_id, type(exc).__name__)
        except Exception as exc:
            # One entry must never take the worker down (nor, redelivered, the next one): it
            # is dead-lettered, and its call, when it can be named, finishes as ERROR.
            log.error("entry %s failed in the worker: %s", entry_id, type(exc).__name__)
            handed = await self._give_up_on(part, entry_id, fields)
        finally:
            if not handed:
                self.slots.give(1)

    async def _give_up_on(self, part: Partition, entry_id: str, fields: dict[str, bytes]) -> bool:
        reason = "the worker failed on this entry"
        try:
            await self._dead_letter(part, entry_id, fields, reason)
            return await self._finish_foreign(part, entry_id, fields, reason)
        except Exception as exc:  # Redis trouble too: left pending, taken over later
            log.error("entry %s could not be dead-lettered: %s", entry_id, type(exc).__name__)
            return False

    async def _process(
        self, part: Partition, entry_id: str, fields: dict[str, bytes], attempts: int
    ) -> bool:
        try:
            invocation = decode_envelope(invocation_entry(fields)[0])
        except EnvelopeError as exc:
            with invocation_context(entry_id=entry_id):
                await self._dead_letter(part, entry_id, fields, str(exc))
                return await self._finish_foreign(part, entry_id, fields, str(exc))
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
            return await self._run(part, entry_id, fields, attempts, invocation)

    async def _run(
        self,
        part: Partition,
        entry_id: str,
        fields: dict[str, bytes],
        attempts: int,
        invocation: Invocation,
    ) -> bool:
        # A redelivery may find its call final already, or be a forged entry taken over. (A
        # first delivery is not checked here: the finish script refuses any entry that is not
        # the call's, so a forged envelope's result is never published, and an extra round
        # trip per call would cost the hot path more than running it.)
        if self.keys.partition_of(invocation.session_id) != part.index:
            # An envelope XADDed into another partition's stream than its session's: it can
            # never be the entry the submit recorded (nothing crosses partitions).
            await self._dead_letter(part, entry_id, fields, "not in its session's partition")
            return False
        state = await self._state(part, invocation, entry_id) if attempts > 1 else "open"
        if state == "foreign":
            await self._dead_letter(part, entry_id, fields, "not the entry recorded for this call")
            return False
        if state == "final":
            await ack(self.redis, part, entry_id)
            return False
        duplicate_of = invocation_entry(fields)[1]
        if attempts > self.settings.max_attempts:
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
                settings=self.settings,
                duplicate_of=duplicate_of,
                attempts=attempts,
            )
        else:
            with span("aci.stages", None):
                outcome = await self._stages(invocation, duplicate_of, attempts).run(self.sources)
        self._finish(part, invocation, entry_id, outcome, attempts)
        return True

    async def _finish_foreign(
        self, part: Partition, entry_id: str, fields: dict[str, bytes], reason: str
    ) -> bool:
        # An envelope this worker cannot run (another contract version, a broken shape) still
        # belongs to an invocation when its identity can be read: finish that one as ERROR, so
        # every accepted invocation reaches a final state.
        identity = peek_identity(invocation_entry(fields)[0])
        if (
            identity is None
            or not is_valid_session_id(identity.session_id)
            or self.keys.partition_of(identity.session_id) != part.index
            or await self._state(part, identity, entry_id) != "open"
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
            settings=self.settings,
        )
        self._finish(part, identity, entry_id, outcome, decoded=False)
        return True

    def _finish(
        self,
        part: Partition,
        invocation: Invocation,
        entry_id: str,
        outcome: Outcome,
        attempts: int = 1,
        decoded: bool = True,
    ) -> None:
        """Hand an outcome (and the slot it holds) to the batched finisher."""
        item = _Finish(
            invocation=invocation,
            part=part,
            entry_id=entry_id,
            outcome=outcome,
            attempts=attempts,
            decoded=decoded,
        )
        self.finishing.put([item])

    async def _state(self, part: Partition, invocation: Invocation, entry_id: str) -> str:
        return await call_state(
            self.redis, part, invocation.session_id, invocation.tool_call_id, entry_id
        )

    async def _dead_letter(
        self, part: Partition, entry_id: str, fields: dict[str, bytes], reason: str
    ) -> None:
        log.error("dead-lettering stream entry %s: %s", entry_id, reason)
        if self.metrics is not None:
            self.metrics.dead_letters.inc()
        await dead_letter_entry(
            self.redis, part, entry_id, fields, reason, self.settings.stream_maxlen
        )

    # -- finish -------------------------------------------------------------------------
    async def finish_loop(self) -> None:
        while (batch := await self.finishing.batch(_FINISH_BATCH)) is not None:
            with anyio.CancelScope(shield=True):
                await self._flush(batch)
            self._finished(batch)

    def _finished(self, batch: list[_Finish]) -> None:
        # Written (or left pending for takeover): log, and free the slots.
        if log.isEnabledFor(logging.INFO):
            for item in batch:
                self._log_finished(item)
        self.slots.give(len(batch))

    @staticmethod
    def _log_finished(item: _Finish) -> None:
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
                log.info(
                    "finished %s/%s (attempt %d)",
                    outcome.control.status.value,
                    outcome.result.evidence_status.value,
                    item.attempts,
                )
            elif item.applied is False:
                log.info("already final: another finisher applied it first")

    async def _flush(self, batch: list[_Finish]) -> None:
        backoff = 0.05
        deadline = time.monotonic() + self.settings.visibility_timeout_s
        while True:
            try:
                calls = [self._finish_call(item) for item in batch]
                started = time.perf_counter()
                applied = await run_scripts(
                    self.finisher,
                    self.scripts,
                    self.scripts.finish_sha,
                    calls,
                    errors_in_place=True,
                )
                self._record(batch, applied, time.perf_counter() - started)
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

    def _record(self, batch: list[_Finish], applied: list[Any], finish_s: float) -> None:
        refused: list[Exception] = []
        for item, done in zip(batch, applied, strict=True):
            if isinstance(done, Exception):  # e.g. OOM: left pending, taken over later
                refused.append(done)
                continue
            item.applied = done == 1
            if done == FINISH_REFUSED:
                item.applied = None
                self._log_foreign(item)
            elif item.applied and self.metrics is not None:
                self.metrics.finished(item.invocation.tool, item.outcome, finish_s)
        if refused:
            log.error(
                "finish refused by redis (%s); %d left for takeover",
                reply_code(refused[0]),
                len(refused),
            )

    def _log_foreign(self, item: _Finish) -> None:
        # The finish script dead-lettered an entry that is not the one the call recorded.
        with invocation_context(entry_id=item.entry_id):
            log.error("dead-lettered stream entry %s: not the entry recorded for this call",
                      item.entry_id)  # fmt: skip
        if self.metrics is not None:
            self.metrics.dead_letters.inc()

    def _finish_call(self, item: _Finish) -> tuple[list[str], list[Any]]:
        inv, out = item.invocation, item.outcome
        return finish_call(
            item.part,
            session_id=inv.session_id,
            tool_call_id=inv.tool_call_id,
            tool=inv.tool,
            entry_id=item.entry_id,
            status=out.control.status.value,
            evidence_status=out.result.evidence_status.value,
            result=_ENCODER.encode(out.result),
            raw=out.raw,
            model=_ENCODER.encode(out.observation),
            control=_ENCODER.encode(out.control),
            now_ms=int(time.time() * 1000),
            retention_ms=self.settings.retention_s * 1000,
            maxlen=self.settings.stream_maxlen,
            # The scope the worker ran, checked against the one the submit recorded; none
            # for an envelope that could not be decoded (it only finishes as ERROR).
            scope_key=scope_key(inv.tool, inv.tool_call_id, inv.arguments) if item.decoded else "",
        )

    # -- janitor ------------------------------------------------------------------------
    async def janitor_loop(self, stop: anyio.Event, work: TaskGroup) -> None:
        interval = max(0.2, self.settings.visibility_timeout_s / 4)
        last_trim = 0.0
        while not stop.is_set():
            with anyio.move_on_after(interval):
                await stop.wait()
            if stop.is_set():
                return
            trim = time.monotonic() - last_trim > 30
            for part in self.parts:  # each partition in turn: one failing spares the others
                if stop.is_set():
                    return
                try:
                    await self._take_over(part, stop, work)
                    if trim:
                        await trim_streams(self.redis, part, self.settings)
                except RedisUnavailable:
                    log.warning("janitor: redis unavailable (partition %d)", part.index)
                except RedisProtocolError as exc:
                    if is_group_lost(exc):
                        await recreate_group(self.redis, part)
                    else:
                        log.error("janitor: redis refused (%s)", exc)
            if trim:
                last_trim = time.monotonic()

    async def _take_over(self, part: Partition, stop: anyio.Event, work: TaskGroup) -> None:
        min_idle = int(self.settings.visibility_timeout_s * 1000)
        start = "0-0"
        while not stop.is_set():
            start, claimed = await claim_idle(
                self.redis, part, self.consumer, min_idle, start, count=64
            )
            if claimed:
                counts = await delivery_counts(self.redis, part, [eid for eid, _ in claimed])
                for eid, fields in claimed:
                    await self.slots.take(1)
                    with invocation_context(entry_id=eid):
                        log.warning("took over %s (delivery %d)", eid, counts.get(eid, 2))
                    if self.metrics is not None:
                        self.metrics.takeovers.inc()
                    work.start_soon(self.process, part, eid, fields, counts.get(eid, 2))
            if start == "0-0":
                return


async def run_worker(
    redis: Redis,
    settings: Settings,
    sources: Mapping[str, Source],
    *,
    concurrency: int = 16,
    consumer: str | None = None,
    stop: anyio.Event | None = None,
    metrics: WorkerMetrics | None = None,
    partitions: Sequence[int] | None = None,
) -> None:
    """Run one worker until `stop` is set; returns after in-flight work is finished.
    `metrics` (optional) counts what this worker does (see `workers.metrics`); `partitions`
    (optional) the partition indexes it reads (default: every partition)."""
    stop = stop or anyio.Event()
    if partitions is not None and not all(0 <= i < settings.partitions for i in partitions):
        raise ValueError(f"partitions are 0 to {settings.partitions - 1}")
    worker = _Worker(
        redis,
        settings,
        sources,
        concurrency,
        consumer or consumer_name(),
        metrics=metrics,
        partitions=partitions,
    )
    await wait_for_groups(redis, worker.parts, stop)
    log.info(
        "worker %s started (concurrency %d, partitions %s)",
        worker.consumer,
        concurrency,
        ",".join(str(p.index) for p in worker.parts),
    )
    try:
        async with anyio.create_task_group() as outer:
            outer.start_soon(worker.finish_loop)
            async with anyio.create_task_group() as work:
                work.start_soon(worker.janitor_loop, stop, work)
                await worker.read_loop(stop, work)
            worker.finishing.close()
    finally:
        for lane, _parts in worker.readers:
            await lane.aclose()
        await worker.finisher.aclose()
    log.info("worker %s stopped", worker.consumer)
