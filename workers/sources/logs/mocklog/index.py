"""The search index of a scenario's world: time lookup, lowered text, and mined templates.

Templates are mined with drain3 once per (scenario, topic) over every record of the topic, in
time order. They are a pure function of the immutable world, so caching them in-process is
caching derived data: a second worker process derives exactly the same templates.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Sequence
from typing import Final

import msgspec
from drain3 import TemplateMiner
from drain3.template_miner_config import TemplateMinerConfig

from contracts.logs import level_rank
from contracts.status import Topic
from workers.sources.logs.mocklog.scenarios import world_of
from workers.sources.logs.mocklog.world import MockRecord, World

__all__ = ["ScenarioIndex", "TopicIndex", "index_of", "mask", "mine_templates"]

# Parts of a record's haystack are joined with a character no query term can contain, so a
# phrase never matches across two fields.
SEPARATOR: Final = "\x1f"

# Masks applied before drain3 sees a line: ids and quantities vary, their position does not.
# A dotted version such as 2.3.1 stays (it is what tells one release from another).
_UUID: Final = r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
_NUMBER: Final = r"(?<!\w)(?<!\d\.)[-+]?\d+(?:\.\d+)?(?:ms|s|Mi|Gi|M|G|MB|GB|%)?(?!\w)(?!\.\d)"
_MASKS: Final = (
    (re.compile(_UUID, re.I), "<UUID>"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<IP>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b"), "<HEX>"),
    (re.compile(_NUMBER), "<NUM>"),
)


class TopicIndex(msgspec.Struct, frozen=True, kw_only=True):
    """Records of one topic with what a query needs precomputed, aligned by position."""

    records: tuple[MockRecord, ...]
    epochs: tuple[int, ...]
    haystacks: tuple[str, ...]  # lowered message, level, service and field values
    values: tuple[dict[str, str], ...]  # lowered value per field name (incl. level, service)
    templates: tuple[str, ...]
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


def mask(message: str) -> str:
    """The message with ids, addresses and quantities replaced by placeholders."""
    for pattern, placeholder in _MASKS:
        message = pattern.sub(placeholder, message)
    return message


def mine_templates(messages: Sequence[str]) -> list[str]:
    """Drain3 templates for `messages` (masked first), one per message, deterministically."""
    config = TemplateMinerConfig()
    config.drain_sim_th = 0.5
    config.drain_depth = 4
    config.parametrize_numeric_tokens = True
    miner = TemplateMiner(config=config)
    # Identical masked lines always land in the same cluster, so each distinct line is fed once
    # (in first-seen order); a later generalisation of a cluster still covers earlier members.
    masked = [mask(m) for m in messages]
    cluster_of: dict[str, int] = {}
    for line in masked:
        if line not in cluster_of:
            cluster_of[line] = int(miner.add_log_message(line)["cluster_id"])
    final = {cid: miner.drain.id_to_cluster[cid].get_template() for cid in set(cluster_of.values())}
    return [final[cluster_of[line]] for line in masked]


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
        templates=tuple(mine_templates([r.message for r in records])),
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
