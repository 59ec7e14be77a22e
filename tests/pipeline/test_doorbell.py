"""Admission's doorbell (`pipeline.doorbell`): a request stream written rings its partition,
reads ring nothing, admission is woken by it (not by its safety take), and a worker whose
ACL refuses CLIENT TRACKING still admits, by polling."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from pipeline.client import EvidenceClient, ToolCall
from pipeline.doorbell import Doorbell
from pipeline.keys import ADMISSION_GROUP
from pipeline.redis_io import open_redis
from pipeline.settings import Settings
from tests.pipeline.acl_server import AclServer, acl_server
from workers.runtime import admission
from workers.runtime.state import WorkerState

pytestmark = [pytest.mark.redis]


async def _armed(bell: Doorbell) -> None:
    with anyio.fail_after(5):
        while not bell.armed:  # noqa: ASYNC110
            await anyio.sleep(0.01)


async def test_a_write_rings_its_partition_and_a_read_rings_nothing(
    redis: Any, prefix: str
) -> None:
    keys = Settings(prefix=prefix, partitions=2).keys()
    one, two = keys.parts
    bell = Doorbell(redis, keys.parts)
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(bell.run, stop)
        await _armed(bell)
        assert await bell.wait(1.0, stop) == {0, 1}  # armed: every partition once
        bell.clear([0, 1])

        await redis.xadd(two.requests, {"d": b"x" * 100_000})
        assert await bell.wait(5.0, stop) == {1}  # the partition, never the request
        bell.clear([1])

        await redis.xgroup_create(two.requests, ADMISSION_GROUP, id="0")
        await redis.xreadgroup(ADMISSION_GROUP, "c", {two.requests: ">"}, count=10)
        await redis.xautoclaim(two.requests, ADMISSION_GROUP, "d", 0, "0-0", count=10)
        [(eid, _f)] = await redis.xrange(two.requests)
        await redis.xack(two.requests, ADMISSION_GROUP, eid)
        await redis.xadd(one.invocations, {"d": b"x"})  # another key of the prefix
        assert await bell.wait(0.3, stop) == set()

        await redis.xdel(two.requests, eid)  # a write: admission's own deletes ring too
        await redis.xadd(one.requests, {"d": b"x"})
        with anyio.fail_after(5):
            while bell.rung() != {0, 1}:
                await bell.wait(1.0, stop)
        stop.set()
        tg.cancel_scope.cancel()


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Doorbell]]:
    """The doorbells admission loops make; their safety take one minute apart."""
    bells: list[Doorbell] = []

    class Captured(Doorbell):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            bells.append(self)

    monkeypatch.setattr(admission, "Doorbell", Captured)
    monkeypatch.setattr(admission, "_SAFETY_S", 60.0)
    yield bells


def _calls(tag: str, n: int) -> list[ToolCall]:
    return [
        ToolCall(tool="lookup_knowledge", tool_call_id=f"{tag}{i}", arguments={"query": "q"})
        for i in range(n)
    ]


async def test_admission_is_woken_by_the_doorbell(
    redis: Any, prefix: str, captured: list[Doorbell]
) -> None:
    settings = Settings(prefix=prefix)
    state = WorkerState(redis, settings, {}, concurrency=1, consumer="w-bell")
    stop = anyio.Event()
    async with anyio.create_task_group() as tg, EvidenceClient(redis, settings) as client:
        tg.start_soon(admission.admission_loop, state, stop)
        with anyio.fail_after(5):
            while not captured:  # noqa: ASYNC110
                await anyio.sleep(0.01)
        await _armed(captured[0])
        await anyio.sleep(0.3)  # the first round (every partition) is done: it waits for a ring
        for round_no in range(3):
            session = f"s-{uuid.uuid4().hex[:6]}"
            ids = [c.tool_call_id for c in _calls(f"r{round_no}_", 4)]
            await client.submit_many(session, _calls(f"r{round_no}_", 4))
            # Its safety take is a minute away: only a ring admits these within seconds.
            assert await client.admitted(session, ids, timeout=5) == set(ids)
            await anyio.sleep(0.2)
        stop.set()


def _tracking_refused(server: AclServer) -> None:
    import redis as sync_redis

    admin = sync_redis.Redis.from_url(server.url("admin"))
    admin.acl_setuser("worker", enabled=True, commands=["-client|tracking"])
    admin.close()


async def test_a_worker_refused_client_tracking_admits_by_polling(
    captured: list[Doorbell],
) -> None:
    prefix = f"t{uuid.uuid4().hex[:10]}"
    with acl_server([prefix]) as server:
        async with open_redis(server.url("worker")) as worker_redis:
            # As the worker role of `pipeline.acl`: the doorbell arms.
            bell = Doorbell(worker_redis, Settings(prefix=prefix).keys().parts)
            stop = anyio.Event()
            async with anyio.create_task_group() as tg:
                tg.start_soon(bell.run, stop)
                await _armed(bell)
                stop.set()
                tg.cancel_scope.cancel()
        _tracking_refused(server)  # an aclfile from before the doorbell
        settings = Settings(prefix=prefix)
        async with (
            open_redis(server.url("worker")) as worker_redis,
            open_redis(server.url("submitter")) as submitter_redis,
        ):
            state = WorkerState(worker_redis, settings, {}, concurrency=1, consumer="w-poll")
            stop = anyio.Event()
            async with anyio.create_task_group() as tg:
                tg.start_soon(admission.admission_loop, state, stop)
                with anyio.fail_after(5):
                    while not captured or not captured[0].refused:  # noqa: ASYNC110
                        await anyio.sleep(0.01)
                assert not captured[0].armed
                async with EvidenceClient(submitter_redis, settings) as client:
                    ids = [c.tool_call_id for c in _calls("p", 3)]
                    await client.submit_many("s-poll", _calls("p", 3))
                    assert await client.admitted("s-poll", ids, timeout=5) == set(ids)
                stop.set()
