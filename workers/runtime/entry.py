"""An invocation stream entry as the worker carries it: read once, where it is first seen
(by the reader, or by the work of an entry taken over), and not decoded again on its way.

`read_entry` gives the envelope decoded, or why it did not decode; `stage_run` the stages of
its call; `finished_scope` the scope key the finish is checked with, computed from the request
the stages decoded, so the call's arguments are decoded once too.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from pipeline.envelope import EnvelopeError, Invocation, decode_envelope, scope_key, scope_key_of
from pipeline.record import invocation_entry, invocation_scope
from workers.runtime.state import WorkerState
from workers.stage import StageRun

__all__ = ["Entry", "finished_scope", "read_entry", "stage_run"]


class Entry(msgspec.Struct):
    """An invocation stream entry, read once: its envelope, decoded or not."""

    data: bytes  # the envelope as it came
    duplicate_of: str | UnsetType
    invocation: Invocation | None  # None: the envelope did not decode
    problem: str = ""  # why it did not
    scope_key: str = ""  # what admission recorded ('' on an entry without one)
    handed: Any = None  # this worker's admission of it (`pipeline.admission.Admission`), if any


def read_entry(fields: dict[str, bytes], handed: Any = None) -> Entry:
    """The envelope of an invocation stream entry, decoded (or why not); `handed`: what this
    worker's admission decoded for it, used instead of decoding again."""
    data, duplicate_of = invocation_entry(fields)
    if handed is not None and handed.invocation is not None and handed.envelope == data:
        return Entry(data, duplicate_of, handed.invocation, "", invocation_scope(fields), handed)
    try:
        return Entry(data, duplicate_of, decode_envelope(data), "", invocation_scope(fields))
    except EnvelopeError as exc:
        return Entry(data, duplicate_of, None, str(exc))


def stage_run(
    state: WorkerState,
    invocation: Invocation,
    duplicate_of: str | UnsetType,
    attempts: int,
    handed: Any = None,
) -> StageRun:
    """The stages of one decoded invocation, ready to run (with what admission decoded, when
    `handed`: its request and scope are not computed again)."""
    scoped = handed is not None and handed.scope is not None
    # Queue time counts for a first delivery only (a retry's wait is the takeover's).
    queued_ms = max(0.0, time.time() * 1000 - invocation.submitted_at_ms)
    return StageRun(
        tool=invocation.tool,
        tool_call_id=invocation.tool_call_id,
        arguments=invocation.arguments,
        session_id=invocation.session_id,
        settings=state.settings,
        attempts=attempts,
        duplicate_of=duplicate_of,
        queued_ms=queued_ms if attempts == 1 else 0.0,
        decoded=handed.decoded if handed is not None else None,
        scope=handed.scope if scoped else UNSET,
        fingerprint=handed.fingerprint if scoped else UNSET,
        as_of_ms=_ms(invocation.as_of_ms),
        window_end_ms=_ms(invocation.window_end_ms),
    )


def _ms(value: int | UnsetType) -> int | None:
    return value if isinstance(value, int) else None


def finished_scope(invocation: Invocation, run: StageRun, recorded: str = "") -> str:
    """The scope key of a call the stages ran: the one admission recorded on its entry, else
    from the request they decoded (its arguments are not decoded again)."""
    if recorded:
        return recorded
    decoded = run.decoded
    if decoded is None:  # not decoded by the run: decode here
        return scope_key(
            invocation.tool, invocation.tool_call_id, invocation.arguments, invocation.as_of_ms
        )
    return scope_key_of(invocation.tool, decoded, invocation.arguments, invocation.as_of_ms)
