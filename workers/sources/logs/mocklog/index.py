"""The search index of a scenario's world: time lookup, lowered text, and masked messages.

The world's records are the project's own, yet their secrets are masked as every backend's are
(`workers.sources.logs.masking`: one path, one behaviour; it finds none). Each record's message
is masked once (`workers.sources.logs.templates.mask`); the templates are
mined per call over the masked messages of the matches, by the miner every backend uses, so a
line gets the same template from MOCK as from FILE or CLICKHOUSE. The index is a pure function
of the immutable world, so caching it in-process is caching derived data: a second worker
process derives exactly the same index. Given a cache folder, the first process keeps the world
and its index there (`workers.sources.kept`, 19 MB for the default scenario) and the next ones
read them (~0.15 s instead of ~0.5 s of CPU at every worker start), under a key that hashes the
code they derive from (this package, the log templates and masking, `contracts`), Python's and
msgspec's versions.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import msgspec

import contracts
from contracts.logs import level_rank
from contracts.status import Topic
from workers import masking as url_masking
from workers.sources.kept import keep, read_kept
from workers.sources.logs import masking, templates
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


class _Derived(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    # A TopicIndex without its records (kept once, in the world).
    epochs: tuple[int, ...]
    haystacks: tuple[str, ...]
    values: tuple[dict[str, str], ...]
    keys: tuple[str, ...]
    ranks: tuple[int, ...]


class _Kept(msgspec.Struct, frozen=True, kw_only=True):
    world: World
    topics: dict[Topic, _Derived]


_FORMAT: Final = 1
_KEPT_DECODER: Final = msgspec.msgpack.Decoder(_Kept)
_LOCK: Final = threading.Lock()
_INDEXES: dict[str, ScenarioIndex] = {}


def index_of(scenario: str, cache_dir: str = "") -> ScenarioIndex:
    """The index of a scenario, built once per process (thread-safe) and never changed; read
    from `cache_dir` when a process kept it there before (else built, and kept there)."""
    found = _INDEXES.get(scenario)
    if found is not None:
        return found
    with _LOCK:
        found = _INDEXES.get(scenario)
        if found is None:
            found = _INDEXES[scenario] = _kept_or_built(scenario, cache_dir)
    return found


_MASKING_AND_TEMPLATES: Final = (
    "framing", "masking", "private_keys", "secret_logins", "secret_names", "secret_objects",
    "secret_shapes", "sql_secrets", "tokens",
)  # fmt: skip


@functools.cache
def _code_key() -> str:
    """A hash of everything the world and its index derive from."""
    here = Path(__file__).parent
    sources = [
        *sorted(here.glob("*.py")),
        Path(templates.__file__ or ""),
        Path(url_masking.__file__ or ""),
    ]
    # the templates' and masking's modules (masking's rules live in several: a rule added to any
    # of them changes the records served, so the index is built again)
    sources += [here.parent / f"{name}.py" for name in _MASKING_AND_TEMPLATES]
    sources += sorted(Path(contracts.__file__ or "").parent.glob("*.py"))
    digest = hashlib.sha256(f"{sys.version}\0{msgspec.__version__}".encode())
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()[:24]


def _kept_or_built(scenario: str, cache_dir: str) -> ScenarioIndex:
    if not cache_dir:
        return _built(world_of(scenario))
    key = f"{scenario}\0{_code_key()}"
    path = Path(cache_dir) / f"mocklog-{hashlib.sha256(key.encode()).hexdigest()[:24]}.msgpack"
    try:  # msgspec's DecodeError is a ValueError
        kept = _KEPT_DECODER.decode(read_kept(path, _FORMAT, key))
        return _assembled(scenario, kept)
    except (OSError, ValueError, KeyError):
        pass  # missing, unreadable, damaged or of other code: built again below
    found = _built(world_of(scenario))
    derived = {
        topic: _Derived(
            epochs=t.epochs, haystacks=t.haystacks, values=t.values, keys=t.keys, ranks=t.ranks
        )
        for topic, t in found.topics.items()
    }
    keep(path, _FORMAT, key, msgspec.msgpack.encode(_Kept(world=found.world, topics=derived)))
    return found


def _assembled(scenario: str, kept: _Kept) -> ScenarioIndex:
    world = kept.world
    if world.scenario != scenario or set(kept.topics) != set(Topic):
        raise ValueError("a kept world of another scenario")
    topics = {}
    for topic, d in kept.topics.items():
        records = world.records[topic]
        if len({len(c) for c in (records, d.epochs, d.haystacks, d.values, d.keys, d.ranks)}) > 1:
            raise ValueError("a kept index not aligned with its records")
        topics[topic] = TopicIndex(
            records=records,
            epochs=d.epochs,
            haystacks=d.haystacks,
            values=d.values,
            keys=d.keys,
            ranks=d.ranks,
        )
    return ScenarioIndex(world=world, topics=topics)


def _masked(record: MockRecord) -> MockRecord:
    message = masking.without_log_secrets(record.message)
    fields = dict(record.fields)
    masking.mask_fields(fields)
    if message == record.message and fields == record.fields:
        return record
    return msgspec.structs.replace(record, message=message, fields=fields)


def _built(world: World) -> ScenarioIndex:
    records = {topic: tuple(map(_masked, found)) for topic, found in world.records.items()}
    world = msgspec.structs.replace(world, records=records)
    return ScenarioIndex(
        world=world, topics={topic: _topic_index(world.records[topic]) for topic in Topic}
    )
