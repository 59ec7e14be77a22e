"""The partitioned pipeline on a real local Redis Cluster (3 masters + 3 replicas, started
once for this module): spread over shards, exactly once, a worker on a subset of partitions,
status aggregated, and MOVED after a live slot migration."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from functools import partial
from typing import Any

import anyio
import pytest

from pipeline.client import EvidenceClient, ToolCall
from pipeline.keys import GROUP, key_slot
from pipeline.lane import Lane
from pipeline.local_cluster import LocalCluster, local_cluster
from pipeline.redis_io import is_cluster, open_redis
from pipeline.settings import Settings
from pipeline.status import collect_status
from tests.pipeline.partitioned import assert_once, partitioned_books
from tests.pipeline.sources import InstantSource
from workers.runtime import run_worker

pytestmark = pytest.mark.redis

SOURCES = {"lookup_knowledge": InstantSource()}


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with local_cluster(masters=3, replicas=1) as started:
        yield started


@pytest.fixture
async def credis(cluster: LocalCluster) -> AsyncIterator[Any]:
    async with open_redis(cluster.url) as client:
        assert is_cluster(client)
        await client.initialize()
        yield client


def settings_for(**kw: Any) -> Settings:
    base: dict[str, Any] = {
        "prefix": f"t{uuid.uuid4().hex[:10]}",
        "partitions": 16,
        "redis_cluster": True,
        "visibility_timeout_s": 2.0,
        "deadline_s": 1.0,
    }
    base.update(kw)
    return Settings(**base)


def kcall(i: int) -> ToolCall:
    return ToolCall(tool="lookup_knowledge", tool_call_id=f"c{i}", arguments={"query": "pool"})


async def _call_all(client: EvidenceClient, sessions: list[str], calls: int) -> None:
    async with anyio.create_task_group() as tg:
        for session in sessions:
            tg.start_soon(client.call_many, session, [kcall(i) for i in range(calls)], 20.0)


async def test_sessions_spread_over_three_shards_finish_exactly_once(
    credis: Any, cluster: LocalCluster
) -> None:
    settings = settings_for()
    keys = settings.keys()
    sessions = [f"s{i}" for i in range(48)]
    assert len({keys.partition_of(s) for s in sessions}) == 16
    stop = anyio.Event()
    async with EvidenceClient(credis, settings) as client, anyio.create_task_group() as tg:
        # Two workers, each on half of the partitions.
        for subset in (range(0, 8), range(8, 16)):
            tg.start_soon(partial(run_worker, credis, settings, SOURCES, concurrency=32,
                                  stop=stop, partitions=list(subset)))  # fmt: skip
        await _call_all(client, sessions, 4)
        for session in sessions:
            assert len(await client.wait(session, [f"c{i}" for i in range(4)], 10.0)) == 4
        stop.set()
    book = await partitioned_books(credis, keys, sessions)
    assert_once(book, {f"{s}/c{i}" for s in sessions for i in range(4)})
    # Every shard holds some partitions' keys.
    shards = {credis.get_node_from_key(p.invocations).name for p in keys.parts}
    assert len(shards) == 3
    for part in keys.parts:
        assert (await credis.xpending(part.invocations, GROUP))["pending"] == 0


async def test_a_worker_on_a_subset_leaves_the_rest_and_status_aggregates(
    credis: Any,
) -> None:
    settings = settings_for(partitions=4, admit_here="0")  # requests wait for admission
    keys = settings.keys()
    sessions = [f"s{i}" for i in range(16)]
    mine = [s for s in sessions if keys.partition_of(s) in (0, 1)]
    others = [s for s in sessions if keys.partition_of(s) not in (0, 1)]
    assert mine and others
    stop = anyio.Event()
    async with EvidenceClient(credis, settings) as client, anyio.create_task_group() as tg:
        tg.start_soon(partial(run_worker, credis, settings, SOURCES, concurrency=8, stop=stop,
                              partitions=[0, 1]))  # fmt: skip
        await _call_all(client, mine, 2)
        for session in others:
            await client.submit_many(session, [kcall(0), kcall(1)])
        for session in mine:
            assert len(await client.wait(session, ["c0", "c1"], 10.0)) == 2
        for session in others:
            assert await client.wait(session, ["c0"], 0.3) == {}
        stop.set()
    report = await collect_status(credis, settings, window_s=60)
    rows = {r["index"]: r for r in report["partitions"]}
    assert set(rows) == {0, 1, 2, 3}
    assert rows[0]["lag"] == rows[1]["lag"] == 0 and rows[0]["pending"] == 0
    # No worker admits the other partitions' requests: they wait there, not yet calls.
    unread = 2 * len(others)
    assert sum(rows[i]["requests"] for i in (2, 3)) == unread
    assert sum(rows[i]["length"] for i in (2, 3)) == 0
    assert rows[0]["requests"] == rows[1]["requests"] == 0
    assert report["sessions"] == len(mine)
    assert report["last_minutes"]["lifecycle"] == {"PROJECTING": 2 * len(mine),
                                                    "READY": 2 * len(mine)}  # fmt: skip
    # One consumer over both partitions it read (Redis 7.0 counts a consumer's idle time
    # from its last delivery, so it is not asserted live here).
    assert report["group"]["pending"] == 0 and len(report["consumers"]) == 1
    assert report["consumers"][0]["pending"] == 0


async def test_moved_after_a_live_slot_migration_is_followed(
    credis: Any, cluster: LocalCluster
) -> None:
    settings = settings_for(partitions=16)
    keys = settings.keys()
    part = keys.parts[0]  # the lowest slot of the first master: moved by a reshard
    slot = key_slot(part.tag)
    sessions = [f"m{i}" for i in range(400) if keys.partition_of(f"m{i}") == 0][:12]
    source = credis.get_node_from_key(part.invocations).port
    target = next(p for p in cluster.master_ports() if p != source)
    stop = anyio.Event()
    async with EvidenceClient(credis, settings) as client, anyio.create_task_group() as tg:
        tg.start_soon(partial(run_worker, credis, settings, SOURCES, concurrency=16, stop=stop))
        await _call_all(client, sessions[:6], 3)
        async with open_redis(cluster.url) as stale:  # a slot map of its own
            lane = Lane(stale)
            await lane.call([("XLEN", part.invocations)], 5.0)  # learns the old master
            await anyio.to_thread.run_sync(cluster.reshard, source, target, slot + 1)
            assert stale.get_node_from_key(part.invocations).port == source  # stale map
            # The lane follows MOVED to the new master (as the client and worker do).
            [length] = await lane.call([("XLEN", part.invocations)], 5.0)
            assert length == 18
            assert stale.get_node_from_key(part.invocations).port == target
            await lane.aclose()
        await _call_all(client, sessions[6:], 3)
        for session in sessions:
            assert len(await client.wait(session, ["c0", "c1", "c2"], 10.0)) == 3
        stop.set()
    assert credis.get_node_from_key(part.invocations).port == target
    book = await partitioned_books(credis, keys, sessions)
    assert_once(book, {f"{s}/c{i}" for s in sessions for i in range(3)})


async def test_wait_replicas_after_submit_and_finish(credis: Any, caplog: Any) -> None:
    settings = settings_for(partitions=4, wait_replicas=1, wait_timeout_ms=2000)
    keys = settings.keys()
    sessions = [f"w{i}" for i in range(8)]
    stop = anyio.Event()
    async with EvidenceClient(credis, settings) as client, anyio.create_task_group() as tg:
        tg.start_soon(partial(run_worker, credis, settings, SOURCES, concurrency=8, stop=stop))
        await _call_all(client, sessions, 2)
        for session in sessions:
            assert len(await client.wait(session, ["c0", "c1"], 10.0)) == 2
        stop.set()
    assert "WAIT" not in caplog.text  # one replica each: every write acknowledged by it
    assert_once(await partitioned_books(credis, keys, sessions),
                {f"{s}/c{i}" for s in sessions for i in range(2)})  # fmt: skip
    # Asking for more replicas than there are: the writes stand, the shortfall is reported.
    lane = Lane(credis)
    replies = await lane.call([("SET", keys.parts[0].tag + ":x", "1")], 5.0, wait=(2, 50))
    assert replies == [b"OK"] and lane.wait_short == 1
    assert "1 of 2 replicas" in caplog.text
    await lane.aclose()


async def test_the_doorbell_rings_every_partition_on_its_own_master(credis: Any) -> None:
    """Tracking is node-local: admission's doorbell keeps a connection per master, and a
    request appended to any partition rings that partition (`pipeline.doorbell`)."""
    from pipeline.doorbell import Doorbell

    keys = settings_for().keys()
    bell = Doorbell(credis, keys.parts)
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(bell.run, stop)
        with anyio.fail_after(10):
            while not bell.armed:  # noqa: ASYNC110
                await anyio.sleep(0.01)
        assert len(credis.get_primaries()) == 3
        bell.clear(range(keys.count))
        for part in keys.parts:
            await credis.xadd(part.requests, {"d": b"x"})
        with anyio.move_on_after(10):
            while bell.rung() != set(range(keys.count)):
                await bell.wait(1.0, stop)
        missing = set(range(keys.count)) - bell.rung()
        owners = {credis.get_node_from_key(keys.parts[i].requests).name for i in missing}
        assert not missing, (missing, owners, sorted(bell._tracking))
        stop.set()
        tg.cancel_scope.cancel()
    await credis.delete(*(p.requests for p in keys.parts))


async def test_a_client_admits_itself_on_every_shard_after_the_scripts_are_gone(
    credis: Any,
) -> None:
    # `pipeline.admit_here` on a cluster: EVALSHA routed by its first key's slot; NOSCRIPT
    # (a promoted replica, a restarted master: here SCRIPT FLUSH on every master) loads the
    # script on every master and admits.
    settings = settings_for(partitions=8)
    keys = settings.keys()
    await credis.script_flush()
    sessions = [f"s{i}" for i in range(16)]
    async with EvidenceClient(credis, settings) as client:
        for session in sessions:
            assert await client.submit_many(session, [kcall(1), kcall(2)]) == [None, None]
        assert client._here.enabled
    for session in sessions:
        part = keys.for_session(session)
        assert await credis.hget(part.call(session, "c1"), "st") == b"PROJECTING"
        assert await credis.exists(part.requests) == 0
