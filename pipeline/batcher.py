"""Commands from concurrent callers, coalesced: one pipeline in flight at a time.

A lone call goes out at once, sent by its caller; calls made while a pipeline is in flight
go together in the next one. Under load this turns many small round trips (each with a
connection of its own) into a few large ones, so a burst of callers does not grow the
connection pool, and a hiccup does not cascade into more connections and more round trips.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Sequence
from typing import Any, Final

import anyio
from anyio.abc import TaskGroup

from pipeline.lane import Lane
from pipeline.redis_io import PipelineError, Redis, RedisProtocolError, reply_code

__all__ = ["CommandBatcher"]

_MAX_CALLS: Final = 3072  # commands per pipeline
_TIMEOUT_S: Final = 10.0


class _Pending:
    __slots__ = ("calls", "done", "error", "replies")

    def __init__(self, calls: Sequence[Sequence[Any]]) -> None:
        self.calls = calls
        # asyncio's own Event (a lane is asyncio-only): anyio.Event looks up the running
        # async library each time it is made, for every submit.
        self.done = asyncio.Event()
        self.replies: list[Any] = []
        self.error: PipelineError | None = None

    def result(self) -> list[Any]:
        if self.error is not None:
            raise self.error
        return self.replies


class CommandBatcher:
    """Runs commands for many callers on a connection of its own (idempotent ones only: a
    caller cancelled while waiting leaves its commands to go out anyway).

    A caller that finds nothing in flight sends its calls itself (no hand-off to another
    task); callers that arrive while a pipeline is in flight queue up, and a task in
    `task_group` sends the queue, in pipelines, until it is empty."""

    def __init__(
        self, redis: Redis, task_group: TaskGroup, wait: tuple[int, int] | None = None
    ) -> None:
        self._lane = Lane(redis)
        self._wait = wait  # WAIT for replicas after each pipeline (`ACI_WAIT_REPLICAS`)
        self._task_group = task_group
        self._queue: collections.deque[_Pending] = collections.deque()
        self._busy = False  # a pipeline is in flight; whoever sends it drains the queue after

    async def run(self, calls: Sequence[Sequence[Any]]) -> list[Any]:
        """The replies to `calls` (commands), in order; raises `PipelineError`, also when
        one of the caller's own commands was refused."""
        pending = _Pending(calls)
        if self._busy:
            self._queue.append(pending)
            await pending.done.wait()
            return pending.result()
        self._busy = True
        try:
            await self._flush([pending])
        finally:
            if self._queue:
                self._task_group.start_soon(self._drain)  # stays busy until drained
            else:
                self._busy = False
        return pending.result()

    async def _drain(self) -> None:
        try:
            while self._queue:
                batch = [self._queue.popleft()]
                size = len(batch[0].calls)
                while self._queue and size + len(self._queue[0].calls) <= _MAX_CALLS:
                    batch.append(self._queue.popleft())
                    size += len(batch[-1].calls)
                await self._flush(batch)
        finally:
            # Drained, or closed (the owner's task group is cancelled): nobody left hanging.
            self._busy = False
            for pending in self._queue:
                pending.error = PipelineError("the client was closed")
                pending.done.set()
            self._queue.clear()

    async def aclose(self) -> None:
        """Close the connection (the owner's task group is done)."""
        await self._lane.aclose()

    async def _flush(self, batch: list[_Pending]) -> None:
        calls = [call for pending in batch for call in pending.calls]
        try:
            with anyio.CancelScope(shield=True):
                replies = await self._lane.call(calls, _TIMEOUT_S, self._wait)
        except PipelineError as exc:
            for pending in batch:
                pending.error = exc
        except Exception as exc:  # a driver surprise reaches the callers, not the task group
            for pending in batch:
                pending.error = RedisProtocolError(type(exc).__name__)
        else:
            start = 0
            for pending in batch:
                mine = replies[start : start + len(pending.calls)]
                start += len(pending.calls)
                # Only a caller whose own call was refused hears of it.
                refused = next((r for r in mine if isinstance(r, Exception)), None)
                if refused is not None:
                    pending.error = RedisProtocolError(reply_code(refused))
                else:
                    pending.replies = mine
        finally:
            for pending in batch:
                pending.done.set()
