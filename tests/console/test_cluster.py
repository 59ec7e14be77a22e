"""The console over `redis+cluster://` and `ACI_PARTITIONS`: a private local Redis Cluster
(3 masters), a deployment of 4 partitions spread over its shards; every page answers, search
finds a call by key name over every node, and the live events follow every partition."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import anyio
import pytest
from starlette.testclient import TestClient

from app.console import create_app
from app.console.live import lifecycle_events
from pipeline.local_cluster import LocalCluster, local_cluster
from pipeline.redis_io import open_redis
from pipeline.settings import Settings
from tests.console.seed import HOSTILE, SESSION, seed_all, settings_for

pytestmark = pytest.mark.redis


@pytest.fixture(scope="module")
def deployment() -> Iterator[tuple[LocalCluster, Settings]]:
    with local_cluster(masters=3, replicas=0) as cluster:
        settings = settings_for(
            f"c{uuid.uuid4().hex[:10]}", cluster.url, partitions=4, redis_cluster=True
        )
        anyio.run(seed_all, cluster.url, settings)
        yield cluster, settings


def test_every_page_over_a_cluster(deployment: tuple[LocalCluster, Settings]) -> None:
    cluster, settings = deployment
    with TestClient(create_app(settings, cluster.url)) as client:
        for path in (
            "/", "/?q=m1", "/?status=ERROR", "/?text=connection", f"/session?id={SESSION}",
            f"/call?session={SESSION}&id=k1", "/fleet", f"/replay?session={SESSION}",
            f"/replay?a={SESSION}&b={HOSTILE}",
        ):  # fmt: skip
            response = client.get(path)
            assert response.status_code == 200, (path, response.text[:300])
        assert client.get(f"/session?id={SESSION}").text.count('class="row') == 6
        assert "m1</a>" in client.get("/?q=m1&tool=query_mysql").text
        fleet = client.get("/fleet").text
        assert fleet.count("<tr><td>") >= 4  # one row per partition (at least)


async def test_live_events_over_a_cluster(deployment: tuple[LocalCluster, Settings]) -> None:
    cluster, settings = deployment
    async with open_redis(cluster.url, cluster=True) as redis:
        everyone = [
            e
            async for e in lifecycle_events(
                redis, settings, last_event_id=",".join(["0-0"] * 4), follow=False
            )
        ]
        assert len(everyone) == 14
        one = [
            e
            async for e in lifecycle_events(
                redis, settings, session=SESSION, last_event_id="0-0", follow=False
            )
        ]
        assert len(one) == 12
