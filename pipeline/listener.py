"""How results are awaited: one listener per session follows its model and control streams.

A listener makes one blocking `XREAD` over both view streams of its session, on a connection of
its own, and hands each awaited tool call id its two views as they are published; every wait
registers a waiter per id, and the waiters of one wait share one wake-up. `EvidenceClient`
starts a listener when a wait needs one and bounds how many read at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Final

import anyio
import msgspec

from contracts import LifecycleStatus
from pipeline.call import CallResult
from pipeline.lane import Lane, stream_entries
from pipeline.record import view_entry
from pipeline.redis_io import PipelineError, Redis, RedisProtocolError, reply_code

__all__: list[str] = []  # used by pipeline.client only

_LISTEN_BLOCK_MS: Final = 1000
_LINGER_S: Final = 1.0  # a session's listener outlives its last waiter by this long
_CALL_TIMEOUT_S: Final = 10.0
_IDLE_LANES: Final = 8  # listener connections kept for the next listener


class _Wake:
    """Shared by the waiters of one wait: set when any of them has news (a view arrived, or
    the listener stopped), so a wait on many ids sees every result as it comes."""

    __slots__ = ("event", "stopped")

    def __init__(self) -> None:
        # asyncio's own Event (the client runs on asyncio, as its lanes do): anyio.Event
        # looks up the running async library each time it is made.
        self.event = asyncio.Event()
        self.stopped = False


class _Waiter:
    """One awaited tool call id: the two views as the listener sees them arrive, accepted only
    when they carry the scope key the waiter expects (`expect`: the scope key its call was
    submitted with, when this client submitted it)."""

    __slots__ = ("conflicted", "control", "expect", "model", "scope_key", "wake")

    def __init__(self, wake: _Wake, expect: bytes | None = None) -> None:
        self.wake = wake
        self.expect = expect
        self.model: bytes | None = None
        self.control: bytes | None = None
        self.scope_key = b""
        # A result of another scope arrived for this id (or admission recorded another scope):
        # that id is another call's, so this one is answered DUPLICATE_TOOL_CALL_ID.
        self.conflicted = False

    def offer(self, view: str, data: bytes | None, scope_key: bytes) -> None:
        """A view published for this id: taken when of the expected scope (or with no scope
        key: an ERROR for an envelope that did not decode); another scope is a conflict."""
        if self.expect is not None and scope_key and scope_key != self.expect:
            self.conflicted = True
            self.wake.event.set()
            return
        setattr(self, view, data)
        self.scope_key = scope_key
        if self.model is not None and self.control is not None:
            self.wake.event.set()

    def result(self, tool_call_id: str) -> CallResult | None:
        if self.model is None or self.control is None:
            return None
        status = _STATUS_DECODER.decode(self.control).status
        return CallResult(
            tool_call_id=tool_call_id,
            lifecycle=status,
            model=msgspec.Raw(self.model),
            control=msgspec.Raw(self.control),
            scope_key=self.scope_key.decode("utf-8", "replace"),
        )


def _collect(
    pending: list[str],
    waiters: dict[str, _Waiter],
    done: dict[str, CallResult],
    conflict: Callable[[str], CallResult],
) -> list[str]:
    """Moves every pending id whose views have arrived (or that turned out a conflict, answered
    by `conflict(id)`) into `done`; the ids still pending."""
    left: list[str] = []
    for tool_call_id in pending:
        if tool_call_id in done:
            continue
        waiter = waiters.get(tool_call_id)
        if waiter is not None and waiter.conflicted:
            done[tool_call_id] = conflict(tool_call_id)
            continue
        found = waiter.result(tool_call_id) if waiter is not None else None
        if found is None:
            left.append(tool_call_id)
        else:
            done[tool_call_id] = found
    return left


class _StatusOnly(msgspec.Struct):
    status: LifecycleStatus


_STATUS_DECODER: Final = msgspec.json.Decoder(_StatusOnly)


class _Listener:
    """Follows one session's model and control streams (one blocking read for both) and hands
    each awaited id its two views as they are published."""

    def __init__(self) -> None:
        # Every wait registers its own waiter per id, so concurrent waits on one id are
        # independent: one leaving (timeout, cancel) never deafens another.
        self.waiters: dict[str, list[_Waiter]] = {}
        self.ready = anyio.Event()
        self.running = False

    def add(
        self, ids: Sequence[str], expects: Mapping[str, bytes] | None = None
    ) -> dict[str, _Waiter]:
        wake = _Wake()
        expects = expects or {}
        mine = {i: _Waiter(wake, expects.get(i)) for i in dict.fromkeys(ids)}
        for i, waiter in mine.items():
            self.waiters.setdefault(i, []).append(waiter)
        return mine

    def remove(self, mine: dict[str, _Waiter]) -> None:
        for i, waiter in mine.items():
            group = self.waiters.get(i)
            if group is None:
                continue
            with contextlib.suppress(ValueError):
                group.remove(waiter)
            if not group:
                del self.waiters[i]

    async def follow(
        self, redis: Redis, model: str, control: str, slots: anyio.Semaphore, idle: list[Lane]
    ) -> None:
        """Reads the session's `model` and `control` streams until no waiter is left (and the
        linger is over): on a free listening slot of `slots`, on a lane from `idle` (or a new
        one), given back there when done."""
        # One blocking read over both view streams, on a connection of its own. The listener
        # lingers a little after its last waiter leaves, so a session with steady calls keeps
        # one listener (and its cursors) instead of starting a new one per call.
        names = {model.encode(): "model", control.encode(): "control"}
        lane: Lane | None = None
        try:
            await slots.acquire()  # at most the client's _MAX_LISTENERS sessions read at once
            lane = idle.pop() if idle else Lane(redis)
            newest = await lane.call(
                [("XREVRANGE", model, "+", "-", "COUNT", 1),
                 ("XREVRANGE", control, "+", "-", "COUNT", 1)],
                timeout=_CALL_TIMEOUT_S,
            )  # fmt: skip
            cursors: dict[str, bytes] = {}
            for key, last in zip((model, control), newest, strict=True):
                if isinstance(last, Exception):
                    raise RedisProtocolError(reply_code(last))
                cursors[key] = last[0][0] if last else b"0-0"
            self.ready.set()
            busy_at = time.monotonic()
            while self.waiters or (
                time.monotonic() - busy_at < _LINGER_S
                and not slots.statistics().tasks_waiting  # others need the slot
            ):
                if self.waiters:
                    busy_at = time.monotonic()
                [reply] = await lane.call(
                    [("XREAD", "COUNT", 1024, "BLOCK", _LISTEN_BLOCK_MS, "STREAMS",
                      model, control, cursors[model], cursors[control])],
                    timeout=_LISTEN_BLOCK_MS / 1000 + _CALL_TIMEOUT_S,
                )  # fmt: skip
                for stream, entry_id, fields in stream_entries(reply):
                    view = names[stream]
                    cursors[model if view == "model" else control] = entry_id
                    entry = view_entry(fields)
                    for waiter in self.waiters.get(entry.tool_call_id, ()):
                        waiter.offer(view, entry.data, entry.scope_key)
        except PipelineError:
            await anyio.sleep(0.2)  # waiters re-check and surface the error themselves
        finally:
            if lane is not None:
                slots.release()
                if lane.open and len(idle) < _IDLE_LANES:
                    idle.append(lane)  # reused by the next listener
                else:
                    await lane.aclose()
            self.running = False
            self.ready.set()
            for group in self.waiters.values():
                for waiter in group:
                    waiter.wake.stopped = True  # waiters re-check the state themselves
                    waiter.wake.event.set()
