"""Review of b762e80: the demo's wait for its workers says how many beat, and never calls them
ready when one never beat (it still goes on after its bound)."""

from __future__ import annotations

import time
from typing import Any

import pytest

import app.demo as demo
from pipeline.heartbeat import beat, heartbeat_ttl_s
from pipeline.settings import Settings
from tests.conftest import REDIS_URL

pytestmark = pytest.mark.redis


@pytest.mark.serial
@pytest.mark.parametrize("partitions", [1, 3])
async def test_the_wait_counts_the_workers_that_beat_and_is_bounded(
    redis: Any, prefix: str, partitions: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(demo, "_READY_WAIT_S", 0.5)
    settings = Settings(prefix=prefix, redis_url=REDIS_URL, partitions=partitions)
    parts, ttl = settings.keys().parts, heartbeat_ttl_s(settings)
    await beat(redis, parts, "worker-a", ttl)  # the other worker never beats
    started = time.perf_counter()
    waited, live = await demo._workers_ready(redis, settings, "incident-demo", 2)
    assert live == 1 and 0.5 <= waited < 2.0 and time.perf_counter() - started < 2.0
    assert demo._ready_note(2, live, waited) == "only 1 of 2 workers beat within 0.5 s"
    await beat(redis, parts, "worker-b", ttl)
    waited, live = await demo._workers_ready(redis, settings, "incident-demo", 2)
    assert live == 2 and waited < 0.5
    assert demo._ready_note(2, live, waited).startswith("2 workers ready in 0.")
