"""The state one worker's loops share: its Redis, settings, sources, consumer name, the
partitions it reads, the finish scripts, its slots, the finish queue and its metrics.

One small object built once by `run_worker` and passed to each loop (reader, work, finisher,
janitor), so that none of them is a method of a class that does everything. Each loop keeps
what only it uses (its connections, its timers) to itself.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pipeline.batcher import CommandBatcher
from pipeline.keys import Keys, Partition
from pipeline.redis_io import Redis, Scripts
from pipeline.settings import Settings
from workers.runtime.share import SessionShare
from workers.runtime.slots import FinishQueue, Slots
from workers.sources import Source

if TYPE_CHECKING:
    from workers.metrics import WorkerMetrics

__all__ = ["WorkerState"]


class WorkerState:
    """What the loops of one worker share (see the module docstring)."""

    __slots__ = (
        "concurrency", "consumer", "finishing", "handoff", "keys", "marks", "metrics", "parts",
        "redis", "scripts", "settings", "share", "slots", "sources",
    )  # fmt: skip

    def __init__(
        self,
        redis: Redis,
        settings: Settings,
        sources: Mapping[str, Source],
        *,
        concurrency: int,
        consumer: str,
        metrics: WorkerMetrics | None = None,
        partitions: Sequence[int] | None = None,
    ) -> None:
        self.redis = redis
        self.settings = settings
        self.sources = sources
        self.concurrency = concurrency
        self.consumer = consumer
        self.metrics = metrics
        self.keys: Keys = settings.keys()
        chosen = range(self.keys.count) if partitions is None else sorted(set(partitions))
        self.parts: list[Partition] = [self.keys.parts[i] for i in chosen]
        self.scripts = Scripts(redis, (settings.wait_replicas, settings.wait_timeout_ms))
        self.slots = Slots(concurrency)
        self.share = SessionShare(concurrency, settings.session_share)
        # (partition, entry id) → what this worker's admission decoded for it (`Admission`),
        # for its own reader; bounded (an entry another worker reads is evicted in time).
        self.handoff: OrderedDict[tuple[int, str], Any] = OrderedDict()  # oldest first
        self.finishing = FinishQueue()
        # The taken marks and cancel polls of running calls, coalesced on a connection of
        # their own (`workers.runtime.cancels`); set by `run_worker` (None: pooled commands).
        self.marks: CommandBatcher | None = None
