"""Worker heartbeats (issue 24): an idle worker is live before its first job and long after its
last one; a worker that stops beating is dead after the TTL; status and the metrics agree."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from pipeline.heartbeat import beat, heartbeat_ttl_s
from pipeline.settings import Settings
from pipeline.status import collect_status
from tests.conftest import REDIS_URL
from tests.pipeline.helpers import running_worker
from tests.pipeline.sources import InstantSource
from workers.metrics import WorkerMetrics
from workers.runtime import run_worker

pytestmark = pytest.mark.redis


def settings_for(prefix: str, partitions: int = 1) -> Settings:
    # Visibility 2 s: the heartbeat TTL is 1 s, a beat every 1/3 s.
    return Settings(
        prefix=prefix, redis_url=REDIS_URL, visibility_timeout_s=2.0, deadline_s=1.0,
        partitions=partitions,
    )  # fmt: skip


def _by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in report["consumers"]}


@pytest.mark.parametrize("partitions", [1, 3])
async def test_an_idle_worker_is_live_before_its_first_job_and_after_long_idle(
    redis: Any, prefix: str, partitions: int
) -> None:
    settings = settings_for(prefix, partitions)
    metrics = WorkerMetrics()
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: run_worker(
                redis, settings, {"lookup_knowledge": InstantSource()},
                consumer="idle-one", stop=stop, metrics=metrics,
            )
        )  # fmt: skip
        await anyio.sleep(0.5)
        first = _by_name(await collect_status(redis, settings))
        assert first["idle-one"]["live"] is True  # no job yet
        # Idle past the visibility timeout (2 s), where XINFO's idle time said "dead".
        await anyio.sleep(2.6)
        report = await collect_status(redis, settings)
        later = _by_name(report)["idle-one"]
        assert later["live"] is True and later["heartbeat_age_ms"] < 1000
        assert report["group"]["consumers_live"] == 1 and report["group"]["consumers_dead"] == 0
        # The metrics say what status says.
        assert metrics.value("aci_live_workers") == report["group"]["consumers_live"]
        assert metrics.value("aci_heartbeats_total") >= 5
        stop.set()
    # A clean stop removes the beat: not live any more.
    assert not any(c["live"] for c in (await collect_status(redis, settings))["consumers"])


async def test_a_worker_that_stops_beating_is_dead_after_the_ttl(redis: Any, prefix: str) -> None:
    settings = settings_for(prefix)
    ttl = heartbeat_ttl_s(settings)
    keys = settings.keys()
    # One beat and then nothing, as from a worker killed with SIGKILL.
    assert await beat(redis, keys.parts, "crashed", ttl) == 1
    assert _by_name(await collect_status(redis, settings))["crashed"]["live"] is True
    await anyio.sleep(ttl + 0.2)
    report = await collect_status(redis, settings)
    crashed = _by_name(report)["crashed"]
    assert crashed["live"] is False and crashed["heartbeat_age_ms"] >= ttl * 1000
    async with running_worker(redis, settings, {"lookup_knowledge": InstantSource()}):
        await anyio.sleep(0.4)
        report = await collect_status(redis, settings)
        live = [c["name"] for c in report["consumers"] if c["live"]]
        assert len(live) == 1 and live[0] != "crashed"
        assert report["group"]["consumers_dead"] == 1  # the crashed one


def test_the_heartbeat_ttl_follows_the_visibility_timeout() -> None:
    assert heartbeat_ttl_s(Settings()) == 15.0
    assert heartbeat_ttl_s(Settings(visibility_timeout_s=2.0, deadline_s=1.0)) == 1.0
