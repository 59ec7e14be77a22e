"""The submitter's half of a submit: append requests, learn what became of them, send again.

A submitter writes only request stream entries (`pipeline.admission`); a worker's admission
decides what each becomes. In the same round trip as the appends, the client reads each call's
record (its scope key, written only by admission) and result, so it learns at once whether the
id is already taken by another scope (a conflict: the call is answered `DUPLICATE_TOOL_CALL_ID`
here, never with that scope's evidence), already final (the result, checked against this scope
key), or not admitted yet.

A request not admitted yet is remembered (`Unadmitted`) until its call record appears. Anyone
who may append requests can also drop those not admitted yet (XADD's `MAXLEN 0`/`MINID` cannot
be refused by ACL), so one whose call record is still missing after `Settings.admit_resend_s`
is sent again, up to `_TRIES` times, each wait twice the one before (at most `_BACKOFF_MAX`
times the first): admission is idempotent, so a request admitted twice is one call. The client
cannot tell a dropped request from one still queued behind a busy admission: the request
stream is write-only for submitters (readable, it named every session's new calls to anyone
holding the submitter password), so a request queued longer than the bound is sent again too,
a few times at most (it is then admitted as the call it already is).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple

import msgspec
from msgspec import UNSET

from contracts import (
    Bounds,
    ErrorCode,
    ErrorResult,
    LifecycleStatus,
    Request,
    decode_invocation,
    error_result,
    is_valid_tool_call_id,
)
from pipeline.admission import request_max_bytes
from pipeline.call import (
    CallResult,
    ToolCall,
    _arguments_text,
    _oversized,
    rejected_locally,
)
from pipeline.envelope import Invocation, encode_envelope, scope_key_of
from pipeline.keys import Keys, Partition
from pipeline.record import ENTRY_DATA, SCOPE_KEY, final_row
from pipeline.redis_io import Redis, execute
from pipeline.window import LOG_TOOL

__all__ = ["Prepared", "Unadmitted", "prepare", "verified"]

log = logging.getLogger("aci.client")
_TRIES: Final = 10  # sends of one request before the client stops watching it
_BACKOFF_MAX: Final = 8  # the longest wait before sending again, in `admit_resend_s`


class Prepared(NamedTuple):
    """A batch of calls ready to send: per call, an answer known before sending (a local
    refusal) or None; its scope key ('' when refused); and the commands to send."""

    out: list[CallResult | None]
    scope_keys: list[str]
    positions: list[int]  # the calls sent, in command order (2 commands each)
    envelopes: list[bytes]
    commands: list[tuple[Any, ...]]
    # Per call sent: the invocation its envelope encodes, its request as decoded (or the
    # ERROR of arguments that do not decode) and its scope key, for a client that judges its
    # own calls (`pipeline.admit_here`), so they are not decoded or hashed again.
    decoded: list[tuple[Invocation, Request | ErrorResult, str]]


def prepare(
    part: Partition,
    session_id: str,
    calls: Sequence[ToolCall],
    *,
    bounds: Bounds,
    argument_max_bytes: int,
    traceparent: str | None,
    as_of_ms: int | None = None,
) -> Prepared:
    """Validate and encode `calls` (pure): invalid ids and oversized input are answered here
    and never sent; the others get their envelope, their scope key and two commands (the
    request, and a read of the call record's scope key). `as_of_ms` pins the log calls among
    them to an incident time (part of their scope; `pipeline.window`)."""
    now = int(time.time() * 1000)
    limit = request_max_bytes(argument_max_bytes)
    prepared = Prepared([], [], [], [], [], [])
    for call in calls:
        prepared.scope_keys.append("")
        if not is_valid_tool_call_id(call.tool_call_id):
            prepared.out.append(rejected_locally(call, session_id, bounds))
            continue
        arguments = _arguments_text(call.arguments)
        refused = _oversized(call, arguments, argument_max_bytes)
        tool = str(call.tool)
        as_of = as_of_ms if as_of_ms is not None and tool == LOG_TOOL else UNSET
        envelope = b""
        if refused is None:
            invocation = Invocation(
                session_id=session_id,
                tool=tool,
                tool_call_id=call.tool_call_id,
                arguments=arguments,
                submitted_at_ms=now,
                traceparent=traceparent if traceparent else UNSET,
                as_of_ms=as_of,
            )
            envelope = encode_envelope(invocation)
            if len(envelope) > limit:  # arguments that escape to more than admission reads
                refused = error_result(
                    ErrorCode.SCHEMA,
                    f"the arguments exceed {argument_max_bytes} bytes",
                    call.tool_call_id,
                )
        if refused is not None:
            prepared.out.append(rejected_locally(call, session_id, bounds, refused))
            continue
        prepared.positions.append(len(prepared.out))
        prepared.out.append(None)
        decoded = decode_invocation(tool, call.tool_call_id, arguments)
        key = prepared.scope_keys[-1] = scope_key_of(tool, decoded, arguments, as_of)
        prepared.envelopes.append(envelope)
        prepared.decoded.append((invocation, decoded, key))
        prepared.commands.extend(
            [
                ("XADD", part.requests, "*", ENTRY_DATA, envelope),
                ("HGET", part.call(session_id, call.tool_call_id), SCOPE_KEY),
            ]
        )
    return prepared


def verified(
    tool_call_id: str, row: Sequence[bytes | None], expect: str | None
) -> CallResult | None:
    """A final result from a result hash row, or None while there is none — or when it is of
    another scope than `expect` (None: the reader did not submit the call and checks nothing;
    a result with no scope key is an ERROR for an envelope that did not decode)."""
    final = final_row(row)
    if final is None or (expect is not None and final.scope_key not in (expect, "")):
        return None
    return CallResult(
        tool_call_id=tool_call_id,
        lifecycle=LifecycleStatus(final.status),
        model=msgspec.Raw(final.model),
        control=msgspec.Raw(final.control),
        scope_key=final.scope_key,
    )


class _Sent:
    __slots__ = (
        "call", "envelope", "part", "scope_key", "sent_at", "session_id", "tries",
    )  # fmt: skip

    def __init__(
        self,
        part: Partition,
        session_id: str,
        call: ToolCall,
        envelope: bytes,
        scope: str,
    ) -> None:
        # One per request sent and not seen admitted: kept small (slots, no dict).
        self.part = part
        self.session_id = session_id
        self.call = call
        self.envelope = envelope
        self.scope_key = scope
        self.sent_at = time.monotonic()
        self.tries = 1


class Unadmitted:
    """Requests sent whose call record has not been seen yet (see the module docstring)."""

    def __init__(self, keys: Keys, resend_s: float, bounds: Bounds) -> None:
        self.keys = keys
        self.resend_s = resend_s
        self.bounds = bounds
        self.sent: dict[tuple[str, str], _Sent] = {}
        self.resent = 0  # requests sent again (a measure of drops)

    def add(
        self,
        session_id: str,
        call: ToolCall,
        envelope: bytes,
        scope: str,
        part: Partition,
    ) -> None:
        self.sent[(session_id, call.tool_call_id)] = _Sent(part, session_id, call, envelope, scope)

    def admitted(self, session_id: str, tool_call_id: str) -> None:
        self.sent.pop((session_id, tool_call_id), None)

    def _due(self, s: _Sent, now: float) -> bool:
        return now - s.sent_at >= self.resend_s * min(1 << (s.tries - 1), _BACKOFF_MAX)

    async def check(self, redis: Redis, conflict: Callable[[str, str, str], None]) -> None:
        """One pass over the requests whose wait is over: admitted ones are forgotten,
        conflicting ones reported through `conflict(session, id, scope)`, and the others
        (dropped, or still queued behind a busy admission) sent again."""
        now = time.monotonic()
        due = [s for s in self.sent.values() if self._due(s, now)]
        for start in range(0, len(due), 1000):
            chunk = due[start : start + 1000]
            pipe = redis.pipeline(transaction=False)
            for s in chunk:
                pipe.hget(s.part.call(s.session_id, s.call.tool_call_id), SCOPE_KEY)
            rows = await execute(pipe)
            again: list[_Sent] = []
            for n, s in enumerate(chunk):
                recorded = rows[n]
                key = (s.session_id, s.call.tool_call_id)
                if recorded is not None:
                    self.sent.pop(key, None)
                    if recorded.decode("utf-8", "replace") != s.scope_key:
                        conflict(s.session_id, s.call.tool_call_id, s.scope_key)
                elif s.tries >= _TRIES:
                    self.sent.pop(key, None)
                    log.warning("a request was not admitted after %d sends", s.tries)
                else:
                    again.append(s)
            if again:
                pipe = redis.pipeline(transaction=False)
                for s in again:
                    pipe.xadd(s.part.requests, {ENTRY_DATA: s.envelope})
                await execute(pipe)
                for s in again:
                    s.tries += 1
                    s.sent_at = now
                self.resent += len(again)
