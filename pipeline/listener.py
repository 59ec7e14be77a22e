"""How results are awaited: one hub per partition follows the view streams of every session
being waited on, in one blocking read.

A hub makes one blocking `XREAD` over the control streams of all its partition's waiting
sessions, and in the same round trip a non-blocking `XREAD` of their model streams, which Redis
runs once the blocking one returns (a command pipelined behind a blocked one waits for it).
Every writer of views (the finish and cancel scripts, replay's transaction) appends a call's
model view before its control view in one atomic step, so a control view read means its model
view is there for the second read: one round trip per wake-up. (One blocking read over both
streams would return on Redis 7.0 with the first stream written alone, the model view, and
take a second round trip for the control view.) They share the partition's hash tag, so both
reads are one slot, also on a Redis Cluster; they run on a connection of the hub's own, and
each awaited tool call id is handed its two views as they are published; every wait registers
a waiter per id, and the waiters of one wait share one wake-up. A session joining while the
read blocks does not wait for it to end: a second read including it starts at once (at most
`_READS` per hub at a time; the older one ends when it returns, and with every read taken the
oldest one blocked is given up, its connection dropped), and entries two reads both return are
handed over once (each stream's cursor). So one client serves any number of
waiting sessions on a few connections, with no slot cap.

A read follows only the sessions someone waits on. A session whose last waiter left keeps its
cursors for `_LINGER_S` (a next wait there takes no round trip to join) but no read blocks on
it: a read with nobody left to wait for waits out the linger off Redis, woken at once by a new
waiter, and ends. (Before, ended reads went on blocking on finished sessions: with a new session
per call, as a 2026-07-28 MCP request is, every third call waited ~1 s for one to time out.)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import anyio
import anyio.lowlevel
import msgspec

from contracts import LifecycleStatus
from pipeline.call import CallResult
from pipeline.lane import Lane, stream_pages
from pipeline.record import view_entry_flat
from pipeline.redis_io import PipelineError, Redis, RedisProtocolError, reply_code

__all__: list[str] = []  # used by pipeline.client only

_LISTEN_BLOCK_MS: Final = 1000
_LINGER_S: Final = 0.5  # a session stays followed this long after its last waiter left
_CALL_TIMEOUT_S: Final = 10.0
_IDLE_LANES: Final = 8  # hub connections kept for the next read
_READS: Final = 3  # blocking reads of one hub at a time (a newer one covers new sessions)
_COUNT: Final = 1024


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


def _order(entry_id: bytes) -> tuple[int, int]:
    ms, _, seq = entry_id.partition(b"-")
    return int(ms), int(seq or 0)


class _Listener:
    """One followed session: its waiters, and the cursors of its two view streams."""

    def __init__(self, session_id: str, model: str, control: str) -> None:
        self.session_id = session_id
        self.model = model
        self.control = control
        # Every wait registers its own waiter per id, so concurrent waits on one id are
        # independent: one leaving (timeout, cancel) never deafens another.
        self.waiters: dict[str, list[_Waiter]] = {}
        self.cursors: dict[str, bytes] = {}  # stream → last entry id handed over
        self.idle_since = time.monotonic()
        self.joined = anyio.Event()  # set once the cursors are taken (or that failed)

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
        waiters = self.waiters
        for i, waiter in mine.items():
            group = waiters.get(i)
            if group is None:
                continue
            if len(group) == 1:  # the common case: this wait alone on the id
                if group[0] is waiter:
                    del waiters[i]
                continue
            try:
                group.remove(waiter)
            except ValueError:
                continue
            if not group:
                del waiters[i]
        if not self.waiters:
            self.idle_since = time.monotonic()

    def stop(self) -> None:
        """The hub lost its connection: every waiter re-checks the state itself."""
        for group in self.waiters.values():
            for waiter in group:
                waiter.wake.stopped = True
                waiter.wake.event.set()


class _Hub:
    """Follows the view streams of one partition's waiting sessions (see the module
    docstring). `sessions` is shared with the client (session id → `_Listener`)."""

    def __init__(self, redis: Redis, idle: list[Lane], sessions: dict[str, _Listener]) -> None:
        self.redis = redis
        self.idle = idle
        self.sessions: dict[str, _Listener] = {}  # this partition's
        self.all = sessions  # the client's, over every partition
        self.epoch = 0  # bumped by each session that needs a read (joined, or waited on again)
        self.covering = 0  # the newest epoch a read has started with
        self.reads = 0
        self.watched: frozenset[str] = frozenset()  # the sessions the newest read follows
        self.lingering: asyncio.Event | None = None  # set to wake a read waiting out a linger
        # The reads blocked in Redis now: each one's cancel scope, and the epoch it covers.
        self.blocked: dict[anyio.CancelScope, int] = {}

    async def join(self, listener: _Listener) -> None:
        """Take the session's cursors (the newest entry of each stream: anything published
        from now on reaches its waiters); a read follows it once it has a waiter (`watch`)."""
        lane = self.idle.pop() if self.idle else Lane(self.redis)
        try:
            newest = await lane.call(
                [("XREVRANGE", listener.model, "+", "-", "COUNT", 1),
                 ("XREVRANGE", listener.control, "+", "-", "COUNT", 1)],
                timeout=_CALL_TIMEOUT_S,
            )  # fmt: skip
        finally:
            await self._give_back(lane)
        for key, last in zip((listener.model, listener.control), newest, strict=True):
            if isinstance(last, Exception):
                raise RedisProtocolError(reply_code(last))
            listener.cursors[key] = last[0][0] if last else b"0-0"
        self.sessions[listener.session_id] = listener

    def watch(self, listener: _Listener, tg: Any) -> None:
        """A waiter was added to `listener` (joined): make sure a read follows it. Called
        right after `_Listener.add`, with no checkpoint in between."""
        if listener.session_id in self.watched:
            return  # the newest read blocks on its streams already
        self.epoch += 1
        if self.lingering is not None:
            self.lingering.set()  # that read takes it at once
        elif self.reads < _READS:
            self.reads += 1
            tg.start_soon(self._read)
        elif self.blocked:
            # Every read is taken: the oldest one blocked in Redis (on sessions that may wait
            # on slow calls for its whole second) is given up, its connection dropped, and a
            # new read covers every session. Waiting for one to return cost a new session's
            # call up to 1 s beside slow sessions. Its cursors were not moved: nothing is lost.
            oldest = min(self.blocked, key=self.blocked.__getitem__)
            del self.blocked[oldest]
            oldest.cancel()
            self.reads += 1
            tg.start_soon(self._read)
        # else: the first of the reads to return takes it (`_read`: a newer epoch is pending)

    async def _give_back(self, lane: Lane) -> None:
        if lane.open and len(self.idle) < _IDLE_LANES:
            self.idle.append(lane)  # reused by the next read or join
        else:
            await lane.aclose()

    def _forget_idle(self) -> None:
        now = time.monotonic()
        for sid, listener in list(self.sessions.items()):
            if not listener.waiters and now - listener.idle_since >= _LINGER_S:
                del self.sessions[sid]
                if self.all.get(sid) is listener:
                    del self.all[sid]

    async def _linger(self) -> bool:
        """No session is waited on: wait (off Redis) until a waiter arrives or the lingering
        sessions can be forgotten. False when this read should end."""
        self.watched = frozenset()
        if not self.sessions or self.lingering is not None:
            return False  # nothing to forget, or another read waits it out
        oldest = min(s.idle_since for s in self.sessions.values())
        wake = self.lingering = asyncio.Event()
        try:
            with anyio.move_on_after(max(0.0, oldest + _LINGER_S - time.monotonic())):
                await wake.wait()
        finally:
            self.lingering = None
        return True

    async def _read(self) -> None:
        lane = self.idle.pop() if self.idle else Lane(self.redis)
        scope = anyio.CancelScope()
        try:
            with scope:
                await self._follow(lane, scope)
        except PipelineError:
            for listener in list(self.sessions.values()):
                listener.stop()
                if self.all.get(listener.session_id) is listener:
                    del self.all[listener.session_id]
            self.sessions.clear()
            self.watched = frozenset()
            await anyio.sleep(0.2)
        finally:
            self.blocked.pop(scope, None)
            self.reads -= 1
            with anyio.CancelScope(shield=True):
                await self._give_back(lane)

    async def _follow(self, lane: Lane, scope: anyio.CancelScope) -> None:
        """A read's rounds, until nobody is left to wait for or a newer read covers them."""
        full = False  # the last read returned a full page of some stream
        while True:
            self._forget_idle()
            followed = [s for s in self.sessions.values() if s.waiters]
            if not followed:
                if await self._linger():
                    continue
                return
            epoch = self.covering = self.epoch
            self.watched = frozenset(s.session_id for s in followed)
            controls = [s.control for s in followed]
            models = [s.model for s in followed]
            # Blocks on the control streams; the model streams are read in the same round
            # trip, by a command Redis runs once the blocking one returns (module
            # docstring). A full page means more waits: the next read does not block.
            block = ("BLOCK", _LISTEN_BLOCK_MS) if not full else ()
            self.blocked[scope] = epoch
            replies = await lane.call(
                [("XREAD", "COUNT", _COUNT, *block, "STREAMS",
                  *controls, *[s.cursors[s.control] for s in followed]),
                 ("XREAD", "COUNT", _COUNT, "STREAMS",
                  *models, *[s.cursors[s.model] for s in followed])],
                timeout=_LISTEN_BLOCK_MS / 1000 + _CALL_TIMEOUT_S,
            )  # fmt: skip
            self.blocked.pop(scope, None)
            offered, full = self._hand_over(followed, replies)
            if offered:
                # The calls answered return before the next read is sent (its send wakes
                # Redis: on a busy host that costs them tens of microseconds).
                await anyio.lowlevel.checkpoint()
            if self.covering > epoch and self.covering == self.epoch:
                return  # a newer read covers the sessions that joined meanwhile
            # (Still the newest, or some joined after every read started: go on.)

    def _hand_over(self, followed: list[_Listener], replies: list[Any]) -> tuple[bool, bool]:
        # Offers each view read to its waiters: (whether any was offered, whether a stream
        # returned a full page). Each stream is read by one of the replies (the control
        # streams by the first, the model streams by the second), its entries in order: an
        # entry not above the cursor was handed over already (by another read), and once one
        # is above it, so are the rest.
        by_stream: dict[bytes, tuple[_Listener, str, str]] = {}
        for s in followed:
            by_stream[s.model.encode()] = (s, s.model, "model")
            by_stream[s.control.encode()] = (s, s.control, "control")
        offered = full = False
        for reply in replies:
            for stream, entries in stream_pages(reply):
                read = 0
                found = by_stream.get(stream)
                if found is None:
                    full = full or sum(1 for _, flat in entries if flat is not None) >= _COUNT
                    continue
                listener, key, view = found
                waiters = listener.waiters
                floor: tuple[int, int] | None = _order(listener.cursors[key])
                for entry_id, flat in entries:
                    if flat is None:
                        continue  # deleted while pending: skipped
                    read += 1
                    if floor is not None:
                        if _order(entry_id) <= floor:
                            continue  # handed over already (by another read)
                        floor = None
                    listener.cursors[key] = entry_id
                    entry = view_entry_flat(flat)
                    for waiter in waiters.get(entry.tool_call_id, ()):
                        waiter.offer(view, entry.data, entry.scope_key)
                        offered = True
                full = full or read >= _COUNT
        return offered, full
