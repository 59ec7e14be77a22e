"""Partitions: key names, the session → partition map, and a partitioned queue on one Redis."""

from __future__ import annotations

import json
import zlib
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.crc import key_slot as redis_key_slot

from pipeline.client import EvidenceClient, ToolCall
from pipeline.envelope import Invocation, encode_envelope
from pipeline.keys import GROUP, SLOTS, Keys, key_slot
from pipeline.redis_io import ensure_group
from pipeline.settings import Settings, SettingsError
from tests.pipeline.helpers import running_worker
from tests.pipeline.partitioned import assert_once, delete_prefix, partitioned_books
from tests.pipeline.sources import InstantSource


def test_one_partition_keeps_every_name() -> None:
    keys = Keys("aci")
    assert keys.count == 1 and keys.tag == "{aci}"
    assert keys.invocations == "{aci}:invocations" and keys.dead == "{aci}:dead"
    assert keys.lifecycle == "{aci}:lifecycle" and keys.sessions == "{aci}:sessions"
    assert keys.call("s", "c") == "{aci}:call:s:c" and keys.raw("s", "c") == "{aci}:raw:s:c"
    assert keys.result("s", "c") == "{aci}:res:s:c" and keys.fingerprints("s") == "{aci}:fp:s"
    assert keys.model("s") == "{aci}:model:s" and keys.control("s") == "{aci}:control:s"
    assert Keys("aci", 1).for_session("anything").tag == "{aci}"


def test_partition_tags_spread_over_equal_slot_ranges() -> None:
    for count in (2, 3, 16, 64):
        keys = Keys("aci", count)
        assert len({p.tag for p in keys.parts}) == count
        for part in keys.parts:
            slot = key_slot(part.invocations)
            assert part.index * SLOTS // count <= slot < (part.index + 1) * SLOTS // count
    # Three shards made by `redis-cli --cluster create` hold equal slot ranges: 16 → 6/5/5.
    shards = [key_slot(p.tag) * 3 // SLOTS for p in Keys("aci", 16).parts]
    assert sorted(shards.count(i) for i in range(3)) == [5, 5, 6]
    with pytest.raises(ValueError):
        Keys("aci", 0)


def test_partitioned_keys_refuse_an_ambiguous_name() -> None:
    with pytest.raises(AttributeError):
        _ = Keys("aci", 4).invocations


@given(st.text(alphabet="abcXYZ019._-", min_size=1, max_size=40))
def test_a_session_maps_to_one_partition_by_crc32(session: str) -> None:
    keys = Keys("aci", 16)
    part = keys.for_session(session)
    assert part.index == zlib.crc32(session.encode()) % 16  # documented, stable everywhere
    names = [
        keys.call(session, "c"), keys.result(session, "c"), keys.raw(session, "c"),
        keys.fingerprints(session), keys.model(session), keys.control(session),
        part.invocations, part.lifecycle, part.sessions, part.dead,
    ]  # fmt: skip
    assert {key_slot(n) for n in names} == {key_slot(part.tag)}
    assert key_slot(part.invocations) == redis_key_slot(part.invocations.encode())


def test_partition_settings() -> None:
    settings = Settings.from_env({"ACI_PARTITIONS": "16", "ACI_REDIS_CLUSTER": "1"})
    assert settings.partitions == 16 and settings.redis_cluster
    assert settings.keys().count == 16
    for env in ({"ACI_PARTITIONS": "0"}, {"ACI_PARTITIONS": "999"}, {"ACI_REDIS_CLUSTER": "yes"},
                {"ACI_WAIT_REPLICAS": "-1"}):  # fmt: skip
        with pytest.raises(SettingsError):
            Settings.from_env(env)


def kcall(i: int) -> ToolCall:
    return ToolCall(tool="lookup_knowledge", tool_call_id=f"c{i}", arguments={"query": "pool"})


@pytest.mark.redis
async def test_a_partitioned_queue_on_one_redis_delivers_exactly_once(
    redis: Any, prefix: str
) -> None:
    settings = Settings(prefix=prefix, partitions=4, visibility_timeout_s=2.0, deadline_s=1.0)
    keys = settings.keys()
    sessions = [f"s{i}" for i in range(24)]
    assert len({keys.partition_of(s) for s in sessions}) == 4
    try:
        async with (
            EvidenceClient(redis, settings) as client,
            running_worker(redis, settings, {"lookup_knowledge": InstantSource()}),
        ):
            async with anyio.create_task_group() as tg:
                for session in sessions:
                    tg.start_soon(client.call_many, session, [kcall(i) for i in range(5)], 10.0)
            for session in sessions:
                done = await client.wait(session, [f"c{i}" for i in range(5)], 5.0)
                assert len(done) == 5
        book = await partitioned_books(redis, keys, sessions)
        assert_once(book, {f"{s}/c{i}" for s in sessions for i in range(5)})
        for part in keys.parts:
            assert (await redis.xpending(part.invocations, GROUP))["pending"] == 0
    finally:
        await delete_prefix(redis, prefix)


@pytest.mark.redis
async def test_an_entry_in_another_partition_than_its_session_is_dead_lettered(
    redis: Any, prefix: str
) -> None:
    settings = Settings(prefix=prefix, partitions=4, visibility_timeout_s=2.0, deadline_s=1.0)
    keys = settings.keys()
    try:
        async with EvidenceClient(redis, settings) as client:
            assert await client.submit_many("victim", [kcall(1)]) == [None]
            home = keys.for_session("victim")
            other = keys.parts[(home.index + 1) % 4]
            forged = Invocation(session_id="victim", tool="lookup_knowledge",
                                tool_call_id="c1", arguments='{"query": "x"}',
                                submitted_at_ms=1)  # fmt: skip
            await ensure_group(redis, other)
            await redis.xadd(other.invocations, {"d": encode_envelope(forged), "dup": ""})
            async with running_worker(redis, settings, {"lookup_knowledge": InstantSource()}):
                done = await client.wait("victim", ["c1"], 5.0)
                with anyio.fail_after(5):
                    for _ in range(100):  # until the forged entry is dead-lettered
                        if await redis.xlen(other.dead):
                            break
                        await anyio.sleep(0.05)
        assert done["c1"].lifecycle == "READY"
        [(_eid, dead)] = await redis.xrange(other.dead, "-", "+")
        assert (await redis.xpending(other.invocations, GROUP))["pending"] == 0
        assert b"partition" in dead[b"reason"]
        assert json.loads(bytes(done["c1"].control))["tool_call_id"] == "c1"
    finally:
        await delete_prefix(redis, prefix)


@pytest.mark.parametrize("partitions", [[], [4], [-1]])
async def test_a_worker_refuses_partitions_it_cannot_read(partitions: list[int]) -> None:
    from workers.runtime import run_worker

    with pytest.raises(ValueError, match="partitions are 0 to 3"):
        await run_worker(None, Settings(partitions=4), {}, partitions=partitions)  # type: ignore[arg-type]
