"""The consumer-group operations of a worker: the Redis commands a worker issues itself (the
finish script aside, which `pipeline.lane.run_scripts` sends), each a small typed function.

- `read_group`: one round trip of `XREADGROUP` over a few partitions, on a lane; a stream or
  group that is gone raises `GroupLost` (create it again with `recreate_group`);
- `wait_for_groups`: create the groups at start, waiting for a Redis that is not up yet;
- `call_state`: whether a redelivered entry is still its call's, and not final yet;
- `dead_letter_entry` (XADD to the dead letters and XACK, in one MULTI/EXEC) and `ack`;
- `claim_idle` (`XAUTOCLAIM`) and `delivery_counts` (`XPENDING` per entry): takeover;
- `requeue`: entries put back at the end of their stream (`pipeline/lua/requeue.lua`), for
  a session over its share of a worker's slots, when `waiting_sessions` (whose entries wait,
  not delivered yet) says someone else may wait.

Logs go to the worker's logger (`aci.worker`): these are a worker's steps.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import anyio

from pipeline.envelope import peek_identity
from pipeline.keys import GROUP, Partition
from pipeline.lane import Lane, stream_entries
from pipeline.record import ENTRY_ID, dead_letter, invocation_entry
from pipeline.redis_io import (
    PipelineError,
    Redis,
    RedisProtocolError,
    RedisUnavailable,
    Scripts,
    call_redis,
    decode_fields,
    ensure_group,
    execute,
)

__all__ = [
    "CallState",
    "GroupLost",
    "ReadEntry",
    "ack",
    "call_state",
    "claim_idle",
    "dead_letter_entry",
    "delivery_counts",
    "is_group_lost",
    "read_group",
    "recreate_group",
    "requeue",
    "wait_for_groups",
    "waiting_sessions",
]

log = logging.getLogger("aci.worker")
_REPLY_MARGIN_S: Final = 10.0  # a blocking read's reply is awaited this long past its block
_GROUP_LOST: Final = frozenset({"NOGROUP", "UNBLOCKED"})

# (the partition read, the entry id, its fields)
ReadEntry = tuple[Partition, bytes, dict[str, bytes]]
# "open": the entry is its call's and the call is not final; "final": it is; "foreign": the
# call does not exist or recorded another entry (a forged or stray envelope).
CallState = Literal["open", "final", "foreign"]


class GroupLost(RedisProtocolError):
    """A partition's stream or consumer group is gone (NOGROUP): create it again."""

    def __init__(self, part: Partition, code: str) -> None:
        super().__init__(code)
        self.part = part


def is_group_lost(exc: RedisProtocolError) -> bool:
    """Whether Redis refused because the stream or the consumer group is gone."""
    return str(exc) in _GROUP_LOST


async def read_group(
    lane: Lane, parts: Sequence[Partition], consumer: str, count: int, block_ms: int | None
) -> list[ReadEntry]:
    """New entries for `consumer`, up to `count` from each partition, in one round trip; with
    `block_ms`, waiting that long for one (a blocking read names a single partition)."""
    block = ("BLOCK", block_ms) if block_ms is not None else ()
    replies = await lane.call(
        [("XREADGROUP", "GROUP", GROUP, consumer, "COUNT", count, *block,
          "STREAMS", p.invocations, ">") for p in parts],
        timeout=(block_ms or 0) / 1000 + _REPLY_MARGIN_S,
    )  # fmt: skip
    out: list[ReadEntry] = []
    for part, reply in zip(parts, replies, strict=True):
        try:
            found = stream_entries(reply)
        except RedisProtocolError as exc:
            if not is_group_lost(exc):
                raise
            raise GroupLost(part, str(exc)) from None
        out.extend((part, entry_id, fields) for _stream, entry_id, fields in found)
    return out


async def wait_for_groups(redis: Redis, parts: Sequence[Partition], stop: anyio.Event) -> None:
    """Create each partition's consumer group (idempotent); a worker may start before Redis
    does: wait with backoff instead of exiting, until `stop`."""
    backoff = 0.1
    while not stop.is_set():
        try:
            for part in parts:
                await ensure_group(redis, part)
            return
        except RedisUnavailable:
            log.warning("redis unavailable at start; retrying in %.1fs", backoff)
            with anyio.move_on_after(backoff):
                await stop.wait()
            backoff = min(backoff * 2, 5.0)


async def recreate_group(redis: Redis, part: Partition) -> None:
    """Create a lost group again (Redis restarted without persistence, or the stream was
    deleted while a reader blocked); on failure pause a little: the caller's loop retries."""
    log.warning(
        "the consumer group of %s is gone (Redis restarted without its data, or the stream was "
        "deleted): creating it again; what it held is lost",
        part.invocations,
    )
    try:
        await ensure_group(redis, part)
    except PipelineError:
        await anyio.sleep(0.5)


async def call_state(
    redis: Redis, part: Partition, session_id: str, tool_call_id: str, entry_id: str
) -> CallState:
    """The state of the call an entry names, seen from that entry (see `CallState`)."""
    pipe = redis.pipeline(transaction=False)
    pipe.hget(part.call(session_id, tool_call_id), ENTRY_ID)
    pipe.exists(part.result(session_id, tool_call_id))
    recorded, final = await execute(pipe)
    if recorded is None or recorded.decode("utf-8", "replace") != entry_id:
        return "foreign"
    return "final" if final else "open"


async def dead_letter_entry(
    redis: Redis,
    part: Partition,
    entry_id: str,
    fields: Mapping[Any, bytes],
    reason: str,
    maxlen: int,
) -> None:
    """Move an entry to the partition's dead letters and acknowledge it, at once (shielded:
    never left half-written by a cancellation)."""
    pipe = redis.pipeline(transaction=True)
    pipe.xadd(part.dead, dead_letter(entry_id, reason, fields), maxlen=maxlen, approximate=True)
    pipe.xack(part.invocations, GROUP, entry_id)
    with anyio.CancelScope(shield=True):
        await execute(pipe)


async def ack(redis: Redis, part: Partition, entry_id: str) -> None:
    """Acknowledge an entry (its call is final already)."""
    await call_redis(redis.xack(part.invocations, GROUP, entry_id))


async def claim_idle(
    redis: Redis, part: Partition, consumer: str, min_idle_ms: int, start: str, count: int
) -> tuple[str, list[tuple[str, dict[str, bytes]]]]:
    """One step of `XAUTOCLAIM`: entries idle at least `min_idle_ms`, now `consumer`'s (an entry
    deleted while pending is skipped), and where to go on ("0-0" once the scan is done)."""
    reply = await call_redis(
        redis.xautoclaim(
            part.invocations, GROUP, consumer, min_idle_ms, start_id=start, count=count
        )
    )
    following, claimed = reply[0], reply[1]
    if isinstance(following, bytes):
        following = following.decode()
    return following, [(eid.decode(), decode_fields(f)) for eid, f in claimed if f is not None]


async def delivery_counts(redis: Redis, part: Partition, ids: Sequence[str]) -> dict[str, int]:
    """How many times each entry has been delivered (XPENDING, one per entry)."""
    pipe = redis.pipeline(transaction=False)
    for eid in ids:
        pipe.xpending_range(part.invocations, GROUP, min=eid, max=eid, count=1)
    rows = await execute(pipe)
    out: dict[str, int] = {}
    for row in rows:
        for info in row:
            mid = info["message_id"]
            out[mid.decode() if isinstance(mid, bytes) else mid] = int(info["times_delivered"])
    return out


async def waiting_sessions(redis: Redis, part: Partition, peek: int) -> frozenset[str] | None:
    """The sessions of the entries waiting in the partition's stream, not delivered to any
    worker yet; None when it cannot be told from the first `peek` of them (more wait, an
    entry's session cannot be read, or the group is gone)."""
    groups = await call_redis(redis.xinfo_groups(part.invocations))
    last = next(
        (_text(g.get("last-delivered-id")) for g in groups if _text(g.get("name")) == GROUP), ""
    )
    if not last:
        return None
    after = await call_redis(redis.xrange(part.invocations, f"({last}", "+", count=peek + 1))
    if len(after) > peek:
        return None
    sessions: set[str] = set()
    for _entry_id, fields in after:
        identity = peek_identity(invocation_entry(fields)[0])
        if identity is None:
            return None
        sessions.add(identity.session_id)
    return frozenset(sessions)


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value or "")


async def requeue(scripts: Scripts, items: Sequence[tuple[Partition, str, str, str]]) -> list[Any]:
    """Put (partition, entry id, session, tool call id) entries back at the end of their
    streams, one script each in one pipeline; replies: the new ids ('' for an entry only
    acked: not its call's, or its call final)."""

    def fill(pipe: Any) -> None:
        for part, entry_id, session, tool_call_id in items:
            keys = [part.invocations, part.call(session, tool_call_id),
                    part.result(session, tool_call_id)]  # fmt: skip
            scripts.queue(pipe, scripts.requeue_sha, keys, [GROUP, entry_id])

    return await scripts.run(fill)
