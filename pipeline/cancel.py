"""Cancelling a call, and seeing where it is (issue 32): the keys and arguments of the two
scripts, the cancel request, and a call's progress as a submitter reads it.

A submitter's only channel is its request stream, so a cancel is a request: the call's own
envelope with `cancel: true` (`cancel_envelope`). A worker's admission judges it as it judges
any request (so the scope key it is checked with is computed by admission, from the envelope),
admits it as the call itself when the call is new (a cancel that overtook its request, or whose
request was dropped) and, in the step that acks it, sets the call's cancel mark `cx` (so an acked
cancel is never lost); then it runs `cancel.lua` (`cancel_calls`): unless a finish won the race,
the call is finished ERROR/CANCELLED there, once — and if that never runs, the worker that meets
the call next finishes it so from the mark. A cancel for an id held by another scope changes
nothing (the same check as a result's), and a final call is never marked.

A worker learns of a cancel from the mark on the call hash: `mark.lua` (`mark_call`), run as
it takes a call and before its source is called, refuses a cancelled or final call (the source
is never called) and otherwise marks the attempt it runs (`tk`, `ta`); while the source runs,
the worker polls the mark (`cancel_requested`) and stops the source when it appears.

`Progress` is what a submitter can read of a call: not admitted yet (QUEUED), admitted and
waiting for a worker (ADMITTED), taken by a worker (RUNNING, attempt k), or FINAL.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

import msgspec

from pipeline.envelope import Invocation, decode_envelope, encode_envelope
from pipeline.keys import Partition
from pipeline.record import (
    CANCELLED_AT,
    ENVELOPE,
    FINISHED_AT,
    SCOPE_KEY,
    STATUS,
    SUBMITTED_AT,
    TAKEN,
    TAKEN_AT,
)
from pipeline.redis_io import Redis, execute

__all__ = [
    "CANCEL_APPLIED",
    "CANCEL_FINAL",
    "CANCEL_FOREIGN",
    "MARK_CANCELLED",
    "MARK_FINAL",
    "MARK_FOREIGN",
    "MARK_RUN",
    "Progress",
    "Stage",
    "ToCancel",
    "cancel_calls",
    "cancel_envelope",
    "cancel_mark",
    "mark_call",
    "read_progress",
    "recorded_call",
]

# cancel.lua's replies, per call
CANCEL_APPLIED: Final = 1  # finished ERROR/CANCELLED now
CANCEL_FINAL: Final = 0  # final already: a finish won the race, nothing changed
CANCEL_FOREIGN: Final = 2  # the id holds another scope's call (or none): nothing changed
# mark.lua's replies
MARK_RUN: Final = 1
MARK_FINAL: Final = 0
MARK_CANCELLED: Final = 3
MARK_FOREIGN: Final = -1
WRONG_TYPE: Final = -2


def cancel_envelope(envelope: bytes) -> bytes:
    """The cancel request of the call whose envelope is `envelope` (as submitted, or as read
    from its call record): the same call, with `cancel: true`. Raises `EnvelopeError` for an
    envelope that does not decode."""
    invocation = decode_envelope(envelope)
    return encode_envelope(msgspec.structs.replace(invocation, cancel=True))


def is_cancel(invocation: Invocation | None) -> bool:
    """Whether a judged request is a cancel (`cancel_envelope`)."""
    return invocation is not None and invocation.cancel is True


class ToCancel(NamedTuple):
    """One admitted cancel: its call, the scope key admission computed, and the two prebuilt
    ERROR/CANCELLED results and views ("before it ran", "while it ran") as JSON."""

    session_id: str
    tool_call_id: str
    tool: str
    scope_key: str
    before: tuple[bytes, bytes, bytes]  # result, model view, control view
    running: tuple[bytes, bytes, bytes]


def cancel_calls(
    part: Partition,
    cancels: Sequence[ToCancel],
    *,
    now_ms: int,
    retention_ms: int,
    maxlen: int,
) -> tuple[list[str], list[Any]]:
    """The keys and arguments of one `cancel.lua` call for a partition's admitted cancels."""
    keys = [part.lifecycle]
    args: list[Any] = [now_ms, retention_ms, maxlen, len(cancels)]
    for c in cancels:
        session, call = c.session_id, c.tool_call_id
        keys += [part.call(session, call), part.model(session), part.control(session),
                 part.result(session, call), part.raw(session, call)]  # fmt: skip
        args += [c.scope_key, session, call, c.tool, "ERROR", *c.before, *c.running]
    return keys, args


def mark_call(
    part: Partition, session_id: str, tool_call_id: str, entry_id: str, attempt: int, now_ms: int
) -> tuple[list[str], list[Any]]:
    """The keys and arguments of `mark.lua`: a worker takes a call (attempt `attempt`)."""
    keys = [part.call(session_id, tool_call_id), part.result(session_id, tool_call_id)]
    return keys, [entry_id, attempt, now_ms]


def cancel_mark(part: Partition, session_id: str, tool_call_id: str) -> tuple[str, ...]:
    """The command a running worker polls: not nil once a cancel of the call was admitted (an
    HGET: the worker's ACL has it, not HEXISTS)."""
    return ("HGET", part.call(session_id, tool_call_id), CANCELLED_AT)


async def recorded_call(
    redis: Redis, part: Partition, session_id: str, tool_call_id: str
) -> tuple[bytes | None, str | None]:
    """(the envelope, the scope key) admission recorded for a call; (None, None) when unknown."""
    pipe = redis.pipeline(transaction=False)
    pipe.hmget(part.call(session_id, tool_call_id), ENVELOPE, SCOPE_KEY)
    [(envelope, scope)] = await execute(pipe)
    return envelope, None if scope is None else scope.decode("utf-8", "replace")


class Stage(enum.StrEnum):
    """Where a call is, as a submitter can see it."""

    QUEUED = "queued"  # asked; no call record yet (not admitted, or unknown)
    ADMITTED = "admitted"  # a call record, no worker has taken it yet
    RUNNING = "running"  # a worker runs attempt `attempt`
    FINAL = "final"  # READY or ERROR (CANCELLED included)


class Progress(NamedTuple):
    """One reading of a call's progress: its stage, the attempt a worker runs (0 before),
    and since when (epoch ms, 0 when unknown; final: when it finished); `step` orders
    readings (it only grows as a call moves on: 1 queued, 2 admitted, 2 + k running attempt
    k, 1,000 final)."""

    stage: Stage
    attempt: int = 0
    since_ms: int = 0
    cancelled: bool = False  # a cancel was admitted (the call ends or ended CANCELLED)
    submitted_ms: int = 0  # when admission recorded it (epoch ms; 0 before)

    @property
    def step(self) -> int:
        if self.stage is Stage.FINAL:
            return 1000
        return {Stage.QUEUED: 1, Stage.ADMITTED: 2}.get(self.stage, 2 + self.attempt)


def _int(value: bytes | None) -> int:
    try:
        return int(value) if value is not None else 0
    except ValueError:
        return 0


async def read_progress(
    redis: Redis, part: Partition, session_id: str, tool_call_id: str
) -> tuple[Progress, str | None]:
    """A call's progress and the scope key it was admitted with (None: no record), in one
    round trip of reads a submitter may make."""
    pipe = redis.pipeline(transaction=False)
    call = part.call(session_id, tool_call_id)
    pipe.hmget(call, SCOPE_KEY, TAKEN, TAKEN_AT, CANCELLED_AT, SUBMITTED_AT)
    pipe.hmget(part.result(session_id, tool_call_id), STATUS, FINISHED_AT)
    (scope, taken, taken_at, cancelled, t0), (status, t1) = await execute(pipe)
    recorded = None if scope is None else scope.decode("utf-8", "replace")
    was = cancelled is not None
    if status is not None and status != b"PROJECTING":
        return Progress(Stage.FINAL, _int(taken), _int(t1), was, _int(t0)), recorded
    if scope is None:
        return Progress(Stage.QUEUED), None
    if taken is None:
        return Progress(Stage.ADMITTED, 0, 0, was, _int(t0)), recorded
    return Progress(Stage.RUNNING, _int(taken), _int(taken_at), was, _int(t0)), recorded
