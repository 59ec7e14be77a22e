"""A Redis at `maxmemory` (noeviction) is said as such: `OOM`, never a bare `ERR`.

Found by the on-call drill: with a private Redis full, every refused write (a submit, a
finish script, the heartbeat, a worker's start) was reported as `RedisProtocolError: ERR`,
because redis-py strips the `OOM` code from the reply it raises (`OutOfMemoryError`). The
server here is private (a free port, no persistence): `maxmemory` is server-wide.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from chaos.services import free_port
from pipeline.keys import Keys
from pipeline.lane import Lane
from pipeline.redis_io import (
    RedisProtocolError,
    call_redis,
    ensure_group,
    open_redis,
    reply_code,
)

pytestmark = [pytest.mark.redis]


@contextlib.contextmanager
def private_redis() -> Iterator[int]:
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--maxmemory-policy", "noeviction"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(100):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.1):
                break
            time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(5)


@pytest.fixture
async def full_redis() -> AsyncIterator[Any]:
    """A client of a private Redis that has the workers' group, then is made full."""
    with private_redis() as port:
        async with open_redis(f"redis://127.0.0.1:{port}/0") as redis:
            await ensure_group(redis, Keys("full"))
            await redis.config_set("maxmemory", 1)  # every write is now over the limit
            yield redis


async def test_a_refused_write_is_oom(full_redis: Any) -> None:
    with pytest.raises(RedisProtocolError) as info:
        await call_redis(full_redis.xadd("{full}:requests", {"f": "v"}))
    assert str(info.value) == "OOM"


async def test_a_write_refused_on_a_lane_is_oom(full_redis: Any) -> None:
    # The hot loops' replies come back in place on a lane and are named by `reply_code` (the
    # finisher's "finish refused by redis (…)", admission's "take refused (…)").
    lane = Lane(full_redis)
    try:
        [reply] = await lane.call([("XADD", "{full}:requests", "*", "d", "{}")], 5.0)
    finally:
        await lane.aclose()
    assert reply_code(reply) == "OOM"


async def test_a_worker_starting_on_a_full_redis_is_told_oom(full_redis: Any) -> None:
    # XGROUP CREATE is refused before Redis sees that the group exists (BUSYGROUP): the
    # worker's start must say why, not "could not create the consumer group".
    with pytest.raises(RedisProtocolError) as info:
        await ensure_group(full_redis, Keys("full"))
    assert str(info.value) == "OOM"
