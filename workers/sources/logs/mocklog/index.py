"""The search index of a scenario's world: time lookup, lowered text, and masked messages.

Each record's message is masked once (`workers.sources.logs.templates.mask`); the templates are
mined per call over the masked messages of the matches, by the miner every backend uses, so a
line gets the same template from MOCK as from FILE or CLICKHOUSE. The index is a pure function
of the immutable world, so caching it in-process is caching derived data: a second worker
process derives exactly the same index.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Sequence
from typing import Final

import msgspec

from contracts.logs import level_rank
from contracts.status import Topic
from workers.sources.logs.mocklog.scenarios import world_of
from workers.sources.logs.mocklog.world import MockRecord, World
from workers.sources.logs.templates import mask, mine

__all__ = ["ScenarioIndex", "TopicIndex", "index_of", "mask", "mine_templates"]

# Parts of a record's haystack are joined with a character no query term can contain, so a
# phrase never matches across two fields.
SEPARATOR: Final = "\x1f"


class TopicIndex(msgspec.Struct, frozen=True, kw_only=True):
    """Records of one topic with what a query needs precomputed, aligned by position."""

    records: tuple[MockRecord, ...]
    epochs: tuple[int, ...]
    haystacks: tuple[str, ...]  # lowered message, level, service and field values
    values: tuple[dict[str, str], ...]  # lowered value per field name (incl. level, service)
    keys: tuple[str, ...]  # masked message, what the miner groups
    ranks: tuple[int, ...]  # level severity, as `contracts.logs.level_rank`

    def window(self, start_ms: int, end_ms: int) -> range:
        """Positions of the records with start_ms <= epoch_ms <= end_ms."""
        lo = bisect.bisect_left(self.epochs, start_ms)
        hi = bisect.bisect_right(self.epochs, end_ms)
        return range(lo, hi)


class ScenarioIndex(msgspec.Struct, frozen=True, kw_only=True):
    """The world of a scenario and one index per topic."""

    world: World
    topics: dict[Topic, TopicIndex]


def mine_templates(messages: Sequence[str]) -> list[str]:
    """Templates of `messages`, one per message, as every backend mines them."""
    masked = [mask(m) for m in messages]
    found = mine(masked)
    return [found[line] for line in masked]


def _lowered(record: MockRecord) -> dict[str, str]:
    values = {name: str(value).lower() for name, value in record.fields.items()}
    values["level"] = record.level.lower()
    values["service"] = record.service.lower()
    values["message"] = record.message.lower()
    return values


def _topic_index(records: tuple[MockRecord, ...]) -> TopicIndex:
    values = tuple(_lowered(r) for r in records)
    return TopicIndex(
        records=records,
        epochs=tuple(r.epoch_ms for r in records),
        haystacks=tuple(SEPARATOR.join(v.values()) for v in values),
        values=values,
        keys=tuple(mask(r.message) for r in records),
        ranks=tuple(level_rank(r.level) for r in records),
    )


_LOCK: Final = threading.Lock()
_INDEXES: dict[str, ScenarioIndex] = {}


def index_of(scenario: str) -> ScenarioIndex:
    """The index of a scenario, built once per process (thread-safe) and never changed."""
    found = _INDEXES.get(scenario)
    if found is not None:
        return found
    world = world_of(scenario)
    with _LOCK:
        found = _INDEXES.get(scenario)
        if found is None:
            topics = {topic: _topic_index(world.records[topic]) for topic in Topic}
            found = _INDEXES[scenario] = ScenarioIndex(world=world, topics=topics)
    return found
