"""A session's call index (`Keys.calls`, written by admission): the console, `replay` and
`export` list a session's calls from it, not by a SCAN of the whole keyspace."""

from __future__ import annotations

import time
from typing import Any

import pytest

from pipeline.client import EvidenceClient, ToolCall
from pipeline.inspect import session_call_ids
from pipeline.settings import Settings
from tests.pipeline.helpers import admit
from workers.replay import Selection, import_lines, load_redis

pytestmark = pytest.mark.redis


def _calls(*ids: str) -> list[ToolCall]:
    return [
        ToolCall(tool="lookup_knowledge", tool_call_id=i, arguments={"query": f"pool {i}"})
        for i in ids
    ]


async def test_admission_indexes_each_call_of_a_session_once(redis: Any, prefix: str) -> None:
    settings = Settings(prefix=prefix, retention_s=3600)
    keys = settings.keys()
    async with EvidenceClient(redis, settings) as client:
        await client.submit_many("s", _calls("a", "b"))
        await client.submit_many("t", _calls("a"))
        assert await admit(redis, settings) == 3
        await client.submit_many("s", _calls("b", "c"))  # b again: the same call
        assert await admit(redis, settings) == 2
    index = await redis.zrange(keys.calls("s"), 0, -1, withscores=True)
    assert [m for m, _ in index] == [b"a", b"b", b"c"]
    now = time.time() * 1000
    assert all(now - 60_000 < score <= now for _, score in index)  # admission time, epoch ms
    assert await redis.zrange(keys.calls("t"), 0, -1) == [b"a"]
    # Kept twice the retention after the session's last admission.
    assert 2 * 3600 * 1000 - 60_000 < await redis.pttl(keys.calls("s")) <= 2 * 3600 * 1000


async def test_the_listing_reads_the_index_and_falls_back_to_key_names(
    redis: Any, prefix: str
) -> None:
    settings = Settings(prefix=prefix)
    keys = settings.keys()
    async with EvidenceClient(redis, settings) as client:
        await client.submit_many("s", _calls("a", "b", "c"))
        await admit(redis, settings)
    assert await session_call_ids(redis, keys, "s", limit=10) == ["a", "b", "c"]
    assert await session_call_ids(redis, keys, "s", limit=2) == ["b", "c"]  # the newest
    assert await session_call_ids(redis, keys, "s", limit=0) == []
    # An id in the index whose records are gone (expired) is listed; its row has no status.
    await redis.zadd(keys.calls("s"), {"gone": time.time() * 1000})
    assert "gone" in await session_call_ids(redis, keys, "s", limit=10)
    # A session recorded before there was an index: by key name.
    await redis.delete(keys.calls("s"))
    assert sorted(await session_call_ids(redis, keys, "s", limit=10)) == ["a", "b", "c"]


async def test_old_members_are_dropped_at_the_sessions_next_admission(
    redis: Any, prefix: str
) -> None:
    settings = Settings(prefix=prefix, retention_s=10)
    keys = settings.keys()
    old = time.time() * 1000 - 2 * 10_000 - 1_000  # past twice the retention
    await redis.zadd(keys.calls("s"), {"old": old, "recent": time.time() * 1000 - 1_000})
    async with EvidenceClient(redis, settings) as client:
        await client.submit_many("s", _calls("new"))
        await admit(redis, settings)
    assert await redis.zrange(keys.calls("s"), 0, -1) == [b"recent", b"new"]


async def test_an_index_of_the_wrong_type_refuses_only_its_call(redis: Any, prefix: str) -> None:
    # Only workers (and an operator's hand) write it; the script still checks its type first.
    settings = Settings(prefix=prefix)
    keys = settings.keys()
    await redis.set(keys.calls("bad"), "x")
    async with EvidenceClient(redis, settings) as client:
        await client.submit_many("bad", _calls("a"))
        await client.submit_many("good", _calls("a"))
        await admit(redis, settings)
    assert await redis.exists(keys.call("bad", "a")) == 0  # nothing of it written
    assert await redis.get(keys.calls("bad")) == b"x"
    assert await redis.hget(keys.call("good", "a"), "st") == b"PROJECTING"
    assert await redis.zrange(keys.calls("good"), 0, -1) == [b"a"]


async def test_replay_and_import_use_the_index(redis: Any, prefix: str) -> None:
    settings = Settings(prefix=prefix)
    keys = settings.keys()
    async with EvidenceClient(redis, settings) as client:
        await client.submit_many("s", _calls("a", "b"))
        await admit(redis, settings)
    recorded = await load_redis(redis, settings, Selection(session="s"))
    assert [r.tool_call_id for r in recorded] == ["a", "b"]
    for rec in recorded:  # import takes finished records only
        rec.fields["st"] = b"READY"
    counts = await import_lines(redis, settings, recorded, session="copy")
    assert counts["imported"] == 2
    assert sorted(await redis.zrange(keys.calls("copy"), 0, -1)) == [b"a", b"b"]
    assert 0 < await redis.pttl(keys.calls("copy")) <= 2 * settings.retention_s * 1000
    copied = await load_redis(redis, settings, Selection(session="copy"))
    assert [r.tool_call_id for r in copied] == ["a", "b"]
