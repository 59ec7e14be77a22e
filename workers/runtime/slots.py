"""What bounds a worker and hands work between its loops: the slots (`--concurrency`, how
many invocations a worker holds at once) and the queue of outcomes waiting for the finisher.

A slot is taken when an entry is read (or taken over) and freed once its outcome is written
(or the entry is left for takeover): so a worker never holds more than its concurrency, read,
running or waiting to be finished, and the finish queue needs no bound of its own.
"""

from __future__ import annotations

import collections

import anyio
import msgspec

from pipeline.envelope import Invocation
from pipeline.keys import Partition
from workers.stage import Outcome

__all__ = ["Finish", "FinishQueue", "Slots"]


class Finish(msgspec.Struct, kw_only=True):
    """One outcome handed to the finisher; it holds one of the worker's slots until written."""

    invocation: Invocation
    part: Partition  # the partition whose stream holds the entry (the session's)
    entry_id: str
    outcome: Outcome
    # The scope the worker ran (`pipeline.envelope.scope_key`), checked by the finish script
    # against the one the submit recorded; '' for an envelope that did not decode (it only
    # finishes as ERROR).
    scope_key: str
    attempts: int = 1
    applied: bool | None = None  # set by the finisher: True applied, False already final


class Slots:
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
        """Free `count` slots (none when `count` is 0 or less); wakes the next in line."""
        if count > 0:
            self.free += count
            if self._queue:
                self._queue[0][0].set()


class FinishQueue:
    """Outcomes waiting for the batched finisher (one consumer). Bounded by the worker's
    slots: every queued outcome holds one until its batch is written."""

    def __init__(self) -> None:
        self.items: collections.deque[Finish] = collections.deque()
        self.wake = anyio.Event()
        self.closed = False

    def put(self, items: list[Finish]) -> None:
        """Queue outcomes (with the slots they hold) and wake the finisher."""
        self.items.extend(items)
        self.wake.set()

    def close(self) -> None:
        """No more outcomes: the finisher writes what is queued, then returns."""
        self.closed = True
        self.wake.set()

    async def batch(self, limit: int) -> list[Finish] | None:
        """Up to `limit` outcomes, waiting for the first; None once closed and empty."""
        while not self.items:
            if self.closed:
                return None
            await self.wake.wait()
            self.wake = anyio.Event()
        count = min(limit, len(self.items))
        return [self.items.popleft() for _ in range(count)]
