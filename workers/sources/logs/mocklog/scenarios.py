"""The registry of incident scenarios and the lazily built, immutable world of each."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import Final

import msgspec

from workers.sources.logs.mocklog.database_incidents import db_pool_exhaustion, slow_query_storm
from workers.sources.logs.mocklog.platform_incidents import downstream_timeout, oom_kill_restarts
from workers.sources.logs.mocklog.world import ZONE, Builder, World

__all__ = ["DEFAULT_SCENARIO", "SCENARIOS", "ScenarioInfo", "scenario_info", "world_of"]


class ScenarioInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What an operator needs to know about a scenario: its T0, its "now" and its story."""

    name: str
    t0: datetime
    now_minutes: float
    summary: str


_DEFINITIONS: Final[dict[str, tuple[ScenarioInfo, Callable[[Builder], None]]]] = {
    info.name: (info, timeline)
    for info, timeline in (
        (
            ScenarioInfo(
                name="db-pool-exhaustion",
                t0=datetime(2026, 3, 14, 10, 0, tzinfo=ZONE),
                now_minutes=10.0,
                summary="order-service 2.3.1 leaks DB connections on a refund error path",
            ),
            db_pool_exhaustion,
        ),
        (
            ScenarioInfo(
                name="slow-query-storm",
                t0=datetime(2026, 3, 14, 13, 0, tzinfo=ZONE),
                now_minutes=10.0,
                summary="a migration dropped the index on orders(user_id, status)",
            ),
            slow_query_storm,
        ),
        (
            ScenarioInfo(
                name="oom-kill-restarts",
                t0=datetime(2026, 3, 14, 15, 0, tzinfo=ZONE),
                now_minutes=10.0,
                summary="an export-all job OOM-kills report-service into CrashLoopBackOff",
            ),
            oom_kill_restarts,
        ),
        (
            ScenarioInfo(
                name="downstream-timeout",
                t0=datetime(2026, 3, 14, 20, 0, tzinfo=ZONE),
                now_minutes=10.0,
                summary="a node drain evicted risk-service pods; payment calls time out",
            ),
            downstream_timeout,
        ),
    )
}

SCENARIOS: Final[tuple[str, ...]] = tuple(_DEFINITIONS)
DEFAULT_SCENARIO: Final = "db-pool-exhaustion"

_LOCK: Final = threading.Lock()
_WORLDS: dict[str, World] = {}


def scenario_info(name: str) -> ScenarioInfo:
    """The definition of a scenario; `ValueError` naming the valid ones when unknown."""
    found = _DEFINITIONS.get(name)
    if found is None:
        raise ValueError(f"unknown mock scenario {name!r}; valid: {', '.join(SCENARIOS)}")
    return found[0]


def world_of(name: str) -> World:
    """The world of a scenario, generated once per process and never changed."""
    world = _WORLDS.get(name)
    if world is not None:
        return world
    info = scenario_info(name)
    with _LOCK:
        world = _WORLDS.get(name)
        if world is None:
            builder = Builder(info.name, info.t0, now_minutes=info.now_minutes)
            _DEFINITIONS[name][1](builder)
            world = _WORLDS[name] = builder.build()
    return world
