"""A session's call index (`Keys.calls`, written by admission; issue 35): the console, `replay`
and `export` list a session's calls from it, and it is never wrong: calls recorded before it
are still listed (by SCAN until `reindex`), an in-flight call is never dropped, and it is
trimmed with retention to exactly the calls whose records live."""

from __future__ import annotations

import time
from typing import Any

import pytest

from pipeline.call_index import prune_sessions, reindex
from pipeline.client import EvidenceClient, ToolCall
from pipeline.inspect import session_call_ids
from pipeline.scripts import PRUNE_CALLS_LUA
from pipeline.settings import Settings
from tests.pipeline.helpers import admit
from workers.replay import Selection, import_lines, load_redis

pytestmark = pytest.mark.redis


def _calls(*ids: str) -> list[ToolCall]:
    return [
        ToolCall(tool="lookup_knowledge", tool_call_id=i, arguments={"query": f"pool {i}"})
        for i in ids
    ]


async def _submit(redis: Any, settings: Settings, session: str, *ids: str) -> int:
    async with EvidenceClient(redis, settings) as client:
        await client.submit_many(session, _calls(*ids))
    return await admit(redis, settings)


async def test_admission_indexes_each_call_once_and_marks_a_fresh_partition(
    redis: Any, prefix: str
) -> None:
    settings = Settings(prefix=prefix, admit_here="0")  # the workers' admission indexes
    keys = settings.keys()
    assert await _submit(redis, settings, "s", "a", "b") == 2
    assert await _submit(redis, settings, "t", "a") == 1
    assert await _submit(redis, settings, "s", "b", "c") == 2  # b again: the same call
    index = await redis.zrange(keys.calls("s"), 0, -1, withscores=True)
    assert [m for m, _ in index] == [b"a", b"b", b"c"]
    now = time.time() * 1000
    assert all(now - 60_000 < score <= now for _, score in index)  # admission time
    assert await redis.zrange(keys.calls("t"), 0, -1) == [b"a"]
    assert await redis.pttl(keys.calls("s")) == -1  # no expiry while the session admits
    # The partition's first admission ever: every call of it is indexed.
    assert await redis.exists(keys.parts[0].calls_ready) == 1
    assert sorted(await session_call_ids(redis, keys, "s", limit=10)) == ["a", "b", "c"]


async def test_one_admit_step_indexes_every_new_call_of_each_of_its_sessions(
    redis: Any, prefix: str
) -> None:
    # One admit script call with the calls of two sessions interleaved (new ones, a known one
    # and an id twice): each session's index gets exactly its new calls, at the step's time,
    # in the same step as their records (one ZADD per index per step).
    from pipeline.admission import Admission, admit_call, judge
    from pipeline.scripts import ADMIT_LUA
    from pipeline.submitter import prepare

    settings = Settings(prefix=prefix)
    keys = settings.keys()
    part = keys.parts[0]

    def admitted(session: str, *ids: str) -> list[Admission]:
        prepared = prepare(
            part, session, _calls(*ids), bounds=settings.bounds,
            argument_max_bytes=settings.argument_max_bytes, traceparent=None,
        )  # fmt: skip
        out = []
        for envelope in prepared.envelopes:
            verdict = judge(keys, part, "", envelope, argument_max_bytes=4096,
                            default_lookback=settings.default_lookback)  # fmt: skip
            assert isinstance(verdict, Admission)
            out.append(verdict)
        return out

    async def step(calls: list[Admission], now_ms: int) -> list[Any]:
        call_keys, args = admit_call(
            part, calls, [], now_ms=now_ms, maxlen=1000, retention_ms=60_000
        )
        return list(await redis.eval(ADMIT_LUA, len(call_keys), *call_keys, *args))

    s, t = admitted("s", "a", "b", "c"), admitted("t", "a", "x")
    assert len(await step([s[0]], 1_000)) == 1
    replies = await step([s[1], t[0], s[0], s[2], t[1], s[1]], 2_000)
    assert replies[2] == 0 and replies[5] == 0  # known: a before, b in this step
    assert await redis.zrange(keys.calls("s"), 0, -1, withscores=True) == [
        (b"a", 1000.0), (b"b", 2000.0), (b"c", 2000.0),
    ]  # fmt: skip
    assert await redis.zrange(keys.calls("t"), 0, -1, withscores=True) == [
        (b"a", 2000.0), (b"x", 2000.0),
    ]  # fmt: skip
    for session, ids in (("s", "abc"), ("t", "ax")):
        for i in ids:
            assert await redis.hget(part.call(session, i), "st") == b"PROJECTING"


async def test_calls_recorded_before_the_index_are_listed_until_and_after_reindex(
    redis: Any, prefix: str
) -> None:
    settings = Settings(prefix=prefix)
    keys = settings.keys()
    await _submit(redis, settings, "s", "old1", "old2")
    # As if recorded by a version without the index: no index, no marker.
    await redis.delete(keys.calls("s"), keys.parts[0].calls_ready)
    await _submit(redis, settings, "s", "new")  # indexed; the lifecycle stream exists: no marker
    assert await redis.exists(keys.parts[0].calls_ready) == 0
    assert await redis.zrange(keys.calls("s"), 0, -1) == [b"new"]
    # The revert's bug: an index that exists hid the older calls. Now they are found by SCAN.
    assert sorted(await session_call_ids(redis, keys, "s", limit=10)) == ["new", "old1", "old2"]
    assert len(await session_call_ids(redis, keys, "s", limit=2)) == 2
    done = await reindex(redis, keys)
    assert done == {"calls": 3, "sessions": 1}
    assert sorted(await redis.zrange(keys.calls("s"), 0, -1)) == [b"new", b"old1", b"old2"]
    assert await redis.exists(keys.parts[0].calls_ready) == 1
    assert await redis.pttl(keys.calls("s")) == -1  # in flight (never finished): no expiry
    assert sorted(await session_call_ids(redis, keys, "s", limit=10)) == ["new", "old1", "old2"]


async def test_an_in_flight_call_is_never_dropped_and_gone_ones_are(
    redis: Any, prefix: str
) -> None:
    settings = Settings(prefix=prefix, retention_s=10)
    keys = settings.keys()
    part = keys.parts[0]
    await _submit(redis, settings, "s", "running", "done", "gone")
    await redis.pexpire(keys.call("s", "done"), 60_000)  # finished: its record expires
    await redis.delete(keys.call("s", "gone"))  # expired already
    # Long past the retention (the revert dropped members older than twice the retention,
    # in flight or not): the janitor's pass keeps what lives, drops what is gone.
    await redis.zadd(keys.calls("s"), {"running": 1, "done": 2, "gone": 3})
    await redis.zadd(part.sessions, {"s": 1})
    assert await prune_sessions(redis, part, cutoff_ms=int(time.time() * 1000) - 10_000) == 1
    assert await redis.zrange(keys.calls("s"), 0, -1) == [b"running", b"done"]
    assert await redis.zscore(part.sessions, "s") is None  # left the sessions index
    assert await redis.pttl(keys.calls("s")) == -1  # an in-flight call: no expiry
    # Once nothing is in flight, the index lives exactly as long as its longest record.
    await redis.pexpire(keys.call("s", "running"), 90_000)
    await redis.zadd(part.sessions, {"s": 1})
    await prune_sessions(redis, part, cutoff_ms=int(time.time() * 1000))
    assert 80_000 < await redis.pttl(keys.calls("s")) <= 90_000
    # A new admission of the session: the index has no expiry again, the gone member goes.
    await redis.delete(keys.call("s", "done"))
    await redis.zadd(keys.calls("s"), {"done": 0})
    await _submit(redis, settings, "s", "later")
    assert await redis.pttl(keys.calls("s")) == -1
    assert await redis.zrange(keys.calls("s"), 0, -1) == [b"running", b"later"]


async def test_a_session_admitting_again_is_not_dropped_by_a_stale_pass(
    redis: Any, prefix: str
) -> None:
    settings = Settings(prefix=prefix)
    keys = settings.keys()
    part = keys.parts[0]
    await _submit(redis, settings, "s", "a")
    # The janitor read the session as past the cutoff, then it admitted again before the
    # pass's script ran: the script sees the newer score and leaves the session listed.
    ks = [keys.calls("s"), part.sessions]
    await redis.eval(PRUNE_CALLS_LUA, 2, *ks, part.call("s", ""), "s", 1)
    assert await redis.zscore(part.sessions, "s") is not None
    assert await redis.zrange(keys.calls("s"), 0, -1) == [b"a"]


async def test_an_index_of_the_wrong_type_refuses_only_its_call(redis: Any, prefix: str) -> None:
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


async def test_replay_export_and_import_use_the_index(redis: Any, prefix: str) -> None:
    settings = Settings(prefix=prefix)
    keys = settings.keys()
    await _submit(redis, settings, "s", "a", "b")
    recorded = await load_redis(redis, settings, Selection(session="s"))
    assert [r.tool_call_id for r in recorded] == ["a", "b"]
    for rec in recorded:  # import takes finished records only
        rec.fields["st"] = b"READY"
    counts = await import_lines(redis, settings, recorded, session="copy")
    assert counts["imported"] == 2
    assert sorted(await redis.zrange(keys.calls("copy"), 0, -1)) == [b"a", b"b"]
    copied = await load_redis(redis, settings, Selection(session="copy"))
    assert [r.tool_call_id for r in copied] == ["a", "b"]


def test_the_reindex_command_marks_the_partitions(prefix: str) -> None:
    import json
    import os
    import subprocess
    import sys

    from tests.conftest import REDIS_URL

    env = {**os.environ, "ACI_REDIS_URL": REDIS_URL, "ACI_PREFIX": prefix}
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "reindex"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"calls": 0, "sessions": 0}
    import redis as redis_sync

    admin = redis_sync.Redis.from_url(REDIS_URL)
    try:
        ready = Settings(prefix=prefix).keys().parts[0].calls_ready
        assert admin.exists(ready) == 1
    finally:
        admin.delete(ready)
        admin.close()
