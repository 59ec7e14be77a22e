"""Every Redis key, stream and group name of the pipeline, built in one place.

The pipeline is one logical queue over `ACI_PARTITIONS` partitions. Each partition's keys
share one hash tag, so on a Redis Cluster a partition lives in one slot and the submit and
finish scripts (which touch the invocation stream, the call's state, result and raw keys and
three output streams at once) stay single-slot and atomic; nothing ever crosses partitions.

- One partition (the default; a single Redis): the tag is `{prefix}`, so every name is
  exactly what it was before partitions existed (`{aci}:invocations`, `{aci}:call:s:id`, ...).
- N partitions: partition `i` has the tag `{prefix:i.salt}`, where `salt` is the smallest
  non-negative integer putting the tag's hash slot (CRC16 mod 16384, as Redis Cluster computes
  it) into the i-th of N equal slot ranges, so partitions spread evenly over shards that hold
  equal slot ranges (what `redis-cli --cluster create` makes).
- A session belongs to partition `zlib.crc32(session_id as UTF-8) mod N`: the same on every
  process and machine, and every key of the session (call/res/raw keys, fingerprints, model
  and control streams) and every entry about it (its invocations, lifecycle entries and dead
  letters) uses that partition's tag.

A submitter writes one key of a partition, its `requests` stream; everything else is written by
workers: an invocation's record is split over `call` (admission-time, written by a worker's
admission), `res` (final, written by a worker's finish) and `raw` (never readable by
submitters), so Redis ACLs can tell them apart; `pipeline.record` reads them as one. Session
ids are restricted to `[A-Za-z0-9._-]`, so `:` separates unambiguously.
"""

from __future__ import annotations

import binascii
import functools
import string
import zlib
from typing import Final

__all__ = [
    "ADMISSION_GROUP",
    "GROUP",
    "MAX_PARTITIONS",
    "Keys",
    "Partition",
    "is_valid_session_id",
    "key_slot",
]

GROUP: Final = "workers"  # the workers' group on each partition's invocations stream
ADMISSION_GROUP: Final = "admission"  # the admitters' group on each partition's request stream
MAX_PARTITIONS: Final = 256
SLOTS: Final = 16384
_SESSION_CHARS: Final = string.ascii_letters + string.digits + "._-"
_SESSION_MAX: Final = 128


def is_valid_session_id(session_id: object) -> bool:
    """Session ids: 1-128 characters of letters, digits, `.`, `_` and `-`."""
    # Nothing left once every allowed character is stripped from both ends: every character
    # is one (what a full match of `[A-Za-z0-9._-]{1,128}` says, at a fraction of its cost).
    return (
        isinstance(session_id, str)
        and 0 < len(session_id) <= _SESSION_MAX
        and not session_id.strip(_SESSION_CHARS)
    )


def key_slot(key: str | bytes) -> int:
    """The Redis Cluster hash slot of a key (CRC16/XMODEM of its hash tag, mod 16384)."""
    raw = key.encode() if isinstance(key, str) else key
    start = raw.find(b"{")
    if start >= 0:
        end = raw.find(b"}", start + 1)
        if end > start + 1:
            raw = raw[start + 1 : end]
    return binascii.crc_hqx(raw, 0) % SLOTS


@functools.cache
def _partition_tag(prefix: str, index: int, count: int) -> str:
    if count == 1:
        return f"{{{prefix}}}"
    low, high = index * SLOTS // count, (index + 1) * SLOTS // count
    salt = 0
    while not low <= key_slot(f"{prefix}:{index}.{salt}") < high:
        salt += 1
    return f"{{{prefix}:{index}.{salt}}}"


class Partition:
    """The key names of one partition (all under one hash tag)."""

    __slots__ = (
        "calls_ready", "configs", "dead", "deployment", "heartbeats", "index", "invocations",
        "lifecycle", "requests", "sessions", "tag",
    )  # fmt: skip

    def __init__(self, tag: str, index: int = 0) -> None:
        self.index = index
        self.tag = tag
        # The only key a submitter writes: requests wait here for a worker's admission.
        self.requests = f"{tag}:requests"
        self.invocations = f"{tag}:invocations"
        self.lifecycle = f"{tag}:lifecycle"
        self.sessions = f"{tag}:sessions"
        self.dead = f"{tag}:dead"
        # Sorted set: worker consumer name → its last heartbeat (epoch ms), see pipeline.heartbeat.
        self.heartbeats = f"{tag}:heartbeats"
        # Sorted set: `<consumer> <configuration digest>` → its last beat (epoch ms): which
        # configuration each worker runs, so `status` says when live workers differ.
        self.configs = f"{tag}:configs"
        # Hash: the settings a client that admits its own calls must share with the workers
        # (`pipeline.admit_here.SHARED`), written with every heartbeat.
        self.deployment = f"{tag}:deployment"
        # String (epoch ms): every call of the partition is in its session's call index (set by
        # admission on the partition's first admission ever, or by `aci-evidence reindex`).
        self.calls_ready = f"{tag}:calls-ready"

    def call(self, session_id: str, tool_call_id: str) -> str:
        """The submit-time state hash of one invocation (written by the submit script)."""
        return f"{self.tag}:call:{session_id}:{tool_call_id}"

    def result(self, session_id: str, tool_call_id: str) -> str:
        """The final result hash of one invocation, written only by a worker's finish."""
        return f"{self.tag}:res:{session_id}:{tool_call_id}"

    def raw(self, session_id: str, tool_call_id: str) -> str:
        """The raw upstream answer of one invocation (workers and auditors only)."""
        return f"{self.tag}:raw:{session_id}:{tool_call_id}"

    def fingerprints(self, session_id: str) -> str:
        """Hash: scope fingerprint → first tool call id of the session that asked for it."""
        return f"{self.tag}:fp:{session_id}"

    def calls(self, session_id: str) -> str:
        """Sorted set: the session's tool call ids by admission time (epoch ms), written with
        each call by admission (`admit.lua`), so its calls are listed without a SCAN."""
        return f"{self.tag}:calls:{session_id}"

    def model(self, session_id: str) -> str:
        """The session's Model Observation stream (what an agent runtime reads)."""
        return f"{self.tag}:model:{session_id}"

    def control(self, session_id: str) -> str:
        """The session's Harness Control View stream."""
        return f"{self.tag}:control:{session_id}"

    def finished(self, session_id: str, tool_call_id: str) -> list[str]:
        """The keys a finish writes of one call, in the finish script's order: `call`,
        `model`, `control`, `result`, `raw` (one call for the five: the finisher's hot path)."""
        tag = self.tag
        return [
            f"{tag}:call:{session_id}:{tool_call_id}",
            f"{tag}:model:{session_id}",
            f"{tag}:control:{session_id}",
            f"{tag}:res:{session_id}:{tool_call_id}",
            f"{tag}:raw:{session_id}:{tool_call_id}",
        ]


class Keys:
    """Key names for one prefix (`ACI_PREFIX`, default `aci`) over `partitions` partitions
    (`ACI_PARTITIONS`, default 1). `for_session(s)` is the partition that holds session `s`;
    the per-session names (`call`, `model`, ...) can be asked of `Keys` directly and come from
    that partition. The per-partition names (`invocations`, `lifecycle`, `sessions`, `dead`,
    `tag`) are attributes of a `Partition` (`keys.parts`); with one partition `Keys` answers
    them too."""

    __slots__ = ("count", "parts", "prefix")

    def __init__(self, prefix: str = "aci", partitions: int = 1) -> None:
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise ValueError(f"partitions must be 1 to {MAX_PARTITIONS}")
        self.prefix = prefix
        self.count = partitions
        self.parts = tuple(
            Partition(_partition_tag(prefix, i, partitions), i) for i in range(partitions)
        )

    def partition_of(self, session_id: str) -> int:
        """The partition index of a session: CRC-32 of its UTF-8 bytes, mod the count."""
        if self.count == 1:
            return 0
        return zlib.crc32(session_id.encode()) % self.count

    def for_session(self, session_id: str) -> Partition:
        """The partition holding every key and entry of `session_id`."""
        return self.parts[self.partition_of(session_id)]

    def _single(self) -> Partition:
        if self.count != 1:
            raise AttributeError("a partitioned key set has one of these per partition: use .parts")
        return self.parts[0]

    @property
    def tag(self) -> str:
        return self._single().tag

    @property
    def invocations(self) -> str:
        return self._single().invocations

    @property
    def lifecycle(self) -> str:
        return self._single().lifecycle

    @property
    def requests(self) -> str:
        return self._single().requests

    @property
    def sessions(self) -> str:
        return self._single().sessions

    @property
    def dead(self) -> str:
        return self._single().dead

    def call(self, session_id: str, tool_call_id: str) -> str:
        """The submit-time state hash of one invocation (in its session's partition)."""
        return self.for_session(session_id).call(session_id, tool_call_id)

    def result(self, session_id: str, tool_call_id: str) -> str:
        """The final result hash of one invocation (in its session's partition)."""
        return self.for_session(session_id).result(session_id, tool_call_id)

    def raw(self, session_id: str, tool_call_id: str) -> str:
        """The raw upstream answer of one invocation (in its session's partition)."""
        return self.for_session(session_id).raw(session_id, tool_call_id)

    def calls(self, session_id: str) -> str:
        """The session's call index (in its partition)."""
        return self.for_session(session_id).calls(session_id)

    def fingerprints(self, session_id: str) -> str:
        """The session's scope fingerprint hash (in its partition)."""
        return self.for_session(session_id).fingerprints(session_id)

    def model(self, session_id: str) -> str:
        """The session's Model Observation stream (in its partition)."""
        return self.for_session(session_id).model(session_id)

    def control(self, session_id: str) -> str:
        """The session's Harness Control View stream (in its partition)."""
        return self.for_session(session_id).control(session_id)
