"""Admission: how a request a submitter appended becomes an invocation, decided by a worker.

A submitter writes one thing, an entry of its session's partition's request stream (`request`).
Everything a worker or another session trusts — the call record, the scope key a repeat is
compared with, the fingerprints behind `duplicate_of`, the invocation entry, the lifecycle
entry, the sessions index — is written by a worker's admission loop
(`workers.runtime.admission`) in two scripts per batch:

- `take` (`pipeline/lua/take.lua`): read a batch from the request stream in its own consumer
  group; an entry that is not one envelope field within `request_max_bytes` is refused inside
  Redis, so an oversized request never reaches a worker's memory;
- `judge` (here, pure): decode and validate each envelope (contract version, session id and
  partition, tool call id, tool name and argument sizes), and compute its scope key and scope
  fingerprint, as the client computes the scope key of what it asked;
- `admit` (`pipeline/lua/admit.lua`): the idempotency and conflict check per call, then the
  record, the invocation, the lifecycle entry, the sessions index and the fingerprints, once;
  a cancel request's mark `cx` on its call (same scope key only, not on a final call), so a
  cancel acked is never lost; every request of the batch acked and deleted, refused ones
  dead-lettered.

What a submitter can still do to the request stream (XADD's `MAXLEN 0` or `MINID`, which ACLs
cannot refuse) only drops requests not admitted yet; `EvidenceClient` sends a request again
when its call record has not appeared within `Settings.admit_resend_s` (idempotent).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from contracts import (
    ErrorResult,
    Request,
    decode_invocation,
    fingerprint_scope,
    is_valid_tool_call_id,
    normalise_scope,
)
from contracts.window import pin_scope
from pipeline.cancel import is_cancel
from pipeline.envelope import (
    EnvelopeError,
    Invocation,
    decode_envelope,
    encode_envelope,
    scope_key_of,
)
from pipeline.keys import ADMISSION_GROUP, Keys, Partition
from pipeline.record import ENTRY_DATA
from pipeline.window import admit_window

__all__ = [
    "ADMIT_CONFLICT",
    "ADMIT_KNOWN",
    "ADMIT_NEW",
    "FIRST_CALL_KEY",
    "TAKE_BUDGET",
    "TOOL_NAME_MAX",
    "WRONG_TYPE",
    "Admission",
    "Refusal",
    "admit_call",
    "judge",
    "request",
    "request_max_bytes",
    "take_call",
    "taken",
]

ADMIT_NEW: Final = 1  # admitted now
ADMIT_KNOWN: Final = 0  # the same call (same scope) was admitted before
ADMIT_CONFLICT: Final = 2  # the id is taken by a call of another scope
WRONG_TYPE: Final = -1  # a script found a key of the wrong type and wrote nothing
FIRST_CALL_KEY: Final = 6  # admit.lua: KEYS[6], KEYS[7] are the first call's (1-based)
TOOL_NAME_MAX: Final = 64  # bytes; no tool has a longer name
TRACEPARENT_MAX: Final = 256
_ENVELOPE_ROOM: Final = 4096  # session, id, tool, times, traceparent and JSON punctuation


def request_max_bytes(argument_max_bytes: int) -> int:
    """The largest request entry admission reads: the arguments once escaped (quotes and
    backslashes double) plus the rest of the envelope. The client refuses a larger one."""
    return 2 * argument_max_bytes + _ENVELOPE_ROOM


def request(envelope: bytes) -> dict[str, bytes]:
    """The fields of a request stream entry: the envelope alone."""
    return {ENTRY_DATA: envelope}


TAKE_BUDGET: Final = 4 * 1024 * 1024  # bytes of envelopes one take returns, at most (+16 more)


def take_call(
    part: Partition, *, consumer: str, count: int, max_bytes: int, min_idle_ms: int, maxlen: int
) -> tuple[list[str], list[Any]]:
    """The keys and arguments of one take script call (`pipeline/lua/take.lua`)."""
    return [part.requests, part.dead], [
        ADMISSION_GROUP, consumer, count, max_bytes, min_idle_ms, maxlen, TAKE_BUDGET,
    ]  # fmt: skip


def taken(reply: Sequence[Any]) -> tuple[int, list[tuple[str, bytes]]]:
    """A take reply: (requests refused in Redis, [(entry id, envelope), ...]); (-1, []) when the
    request key is not a stream."""
    refused = int(reply[0])
    pairs = [
        (reply[i].decode() if isinstance(reply[i], bytes) else str(reply[i]), reply[i + 1])
        for i in range(1, len(reply) - 1, 2)
    ]
    return refused, pairs


class Admission(NamedTuple):
    """A request that passed validation: what the admit script needs of it."""

    entry_id: str
    envelope: bytes
    session_id: str
    tool_call_id: str
    tool: str
    fingerprint: str  # '' when the arguments do not decode (the worker answers SCHEMA)
    scope_key: str
    # What judging decoded, handed to this worker's own run of the call when it reads the
    # entry (`workers.runtime.admission`), so it is not decoded again.
    invocation: Any = None
    decoded: Any = None  # the request, or the ERROR of arguments that do not decode
    scope: Any = None  # the normalised scope (None when the arguments do not decode)


class Refusal(NamedTuple):
    """A request admission refuses: dead-lettered with its reason, nothing else written."""

    entry_id: str
    reason: str
    session_id: str = ""
    tool_call_id: str = ""


def judge(
    keys: Keys,
    part: Partition,
    entry_id: str,
    envelope: bytes,
    *,
    argument_max_bytes: int,
    default_lookback: int,
    now_ms: int | None = None,
    mine: tuple[Invocation, Request | ErrorResult, str] | None = None,
) -> Admission | Refusal:
    """Validate one request (pure but for the clock a log call's window ends at, `now_ms`
    when given); see the module docstring. `mine`: the invocation `envelope` was encoded from,
    its request as `decode_invocation` decoded it and the scope key `scope_key_of` gave for
    them, given by a client that judges its own calls (`pipeline.admit_here`): they are what
    decoding would give, so they are neither decoded nor hashed again; every check after
    decoding runs as for any request."""
    if mine is not None:
        inv = mine[0]
    else:
        try:
            inv = decode_envelope(envelope)  # contract version, shape, a valid session id
        except EnvelopeError:
            return Refusal(entry_id, "not an invocation envelope of this contract version")
    session = inv.session_id
    if keys.partition_of(session) != part.index:
        return Refusal(entry_id, "not in its session's partition", session)
    if not is_valid_tool_call_id(inv.tool_call_id):
        return Refusal(entry_id, "invalid tool call id", session)
    tool_call_id = inv.tool_call_id
    if len(inv.tool.encode("utf-8", "replace")) > TOOL_NAME_MAX:
        return Refusal(entry_id, "tool name over its bound", session, tool_call_id)
    if len(inv.arguments.encode("utf-8", "replace")) > argument_max_bytes:
        return Refusal(entry_id, "arguments over their bound", session, tool_call_id)
    if inv.traceparent and len(inv.traceparent) > TRACEPARENT_MAX:
        return Refusal(entry_id, "traceparent over its bound", session, tool_call_id)
    inv, envelope = _with_window(inv, envelope, now_ms)
    # The window changes neither tool, arguments nor as-of: what `mine` decoded and the scope
    # key computed from it still hold.
    if mine is not None:
        decoded, sk = mine[1], mine[2]
    else:
        decoded = decode_invocation(inv.tool, tool_call_id, inv.arguments)
        sk = scope_key_of(inv.tool, decoded, inv.arguments, inv.as_of_ms)
    scope = (
        None
        if isinstance(decoded, ErrorResult)
        else normalise_scope(inv.tool, decoded, default_lookback)
    )
    as_of = inv.as_of_ms if isinstance(inv.as_of_ms, int) else None
    fingerprint = "" if scope is None else fingerprint_scope(pin_scope(scope, as_of))
    return Admission(
        entry_id, envelope, session, tool_call_id, inv.tool, fingerprint, sk, inv, decoded, scope
    )


def _with_window(inv: Invocation, envelope: bytes, now_ms: int | None) -> tuple[Invocation, bytes]:
    # A log call's window is decided here, once (`pipeline.window`): the envelope recorded
    # carries its end, so the worker and any later re-execute read the same window.
    windowed = admit_window(inv, int(time.time() * 1000) if now_ms is None else now_ms)
    return (inv, envelope) if windowed is None else (windowed, encode_envelope(windowed))


def admit_call(
    part: Partition,
    admitted: Sequence[Admission],
    refused: Sequence[Refusal],
    *,
    now_ms: int,
    maxlen: int,
    retention_ms: int,
) -> tuple[list[str], list[Any]]:
    """The keys and arguments of one admit script call (`pipeline/lua/admit.lua`)."""
    keys = [part.requests, part.invocations, part.lifecycle, part.sessions, part.dead]
    args: list[Any] = [
        ADMISSION_GROUP, now_ms, maxlen, retention_ms, len(admitted), len(refused),
    ]  # fmt: skip
    for a in admitted:
        keys += [part.call(a.session_id, a.tool_call_id), part.fingerprints(a.session_id)]
        args += [a.entry_id, a.envelope, a.session_id, a.tool_call_id, a.tool, a.fingerprint,
                 a.scope_key, "1" if is_cancel(a.invocation) else ""]  # fmt: skip
    for r in refused:
        args += [r.entry_id, r.reason, r.session_id, r.tool_call_id]
    return keys, args
