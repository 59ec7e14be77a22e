"""The deterministic MOCK log world: incident scenarios across three topics, generated once.

`world.py` fixes the record shape and the seeded builder, `noise.py` the shared benign noise,
`database_incidents.py` and `platform_incidents.py` the four incident timelines,
`scenarios.py` the registry, and `index.py` the per-scenario search index (drain3 templates).
"""

from __future__ import annotations

from workers.sources.logs.mocklog.index import ScenarioIndex, TopicIndex, index_of, mine_templates
from workers.sources.logs.mocklog.scenarios import (
    DEFAULT_SCENARIO,
    SCENARIOS,
    ScenarioInfo,
    scenario_info,
    world_of,
)
from workers.sources.logs.mocklog.world import (
    NUMERIC_FIELDS,
    TOPIC_FIELDS,
    ZONE,
    MockRecord,
    World,
    format_time,
)

__all__ = [
    "DEFAULT_SCENARIO",
    "NUMERIC_FIELDS",
    "SCENARIOS",
    "TOPIC_FIELDS",
    "ZONE",
    "MockRecord",
    "ScenarioIndex",
    "ScenarioInfo",
    "TopicIndex",
    "World",
    "format_time",
    "index_of",
    "mine_templates",
    "scenario_info",
    "world_of",
]
