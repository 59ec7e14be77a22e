"""`aci-evidence status`: a snapshot of streams, group, pending entries, consumers and states."""

from __future__ import annotations

import io
import json
from typing import Any

import anyio
import pytest

from app.status import attention, run_status, status_renderable
from pipeline.client import EvidenceClient, ToolCall
from pipeline.keys import GROUP, Keys
from pipeline.redis_io import ensure_group
from pipeline.settings import Settings
from pipeline.status import collect_status
from tests.conftest import REDIS_URL
from tests.pipeline.helpers import admit, running_worker
from tests.pipeline.sources import FailingSource, InstantSource

pytestmark = pytest.mark.redis


def settings_for(prefix: str, **kw: Any) -> Settings:
    return Settings(
        prefix=prefix, redis_url=REDIS_URL, visibility_timeout_s=2.0, deadline_s=1.0, **kw
    )


def kcall(i: int, query: str = "pool") -> ToolCall:
    return ToolCall(tool="lookup_knowledge", tool_call_id=f"c{i}", arguments={"query": query})


async def test_status_counts_states_pending_entries_and_dead_consumers(
    redis: Any, prefix: str
) -> None:
    settings = settings_for(prefix)
    keys = Keys(prefix)
    async with EvidenceClient(redis, settings) as client:
        async with running_worker(redis, settings, {"lookup_knowledge": InstantSource()}):
            done = await client.call_many("s1", [kcall(1), kcall(2, "nothing")], timeout=10)
        assert all(d is not None for d in done)
        async with running_worker(redis, settings, {"lookup_knowledge": FailingSource()}):
            assert await client.call("s1", kcall(3), timeout=10) is not None
        # Two entries read by a consumer that then dies: pending, never acknowledged.
        await client.submit_many("s1", [kcall(4), kcall(5)])
        await admit(redis, settings)  # a worker's admission makes them invocations
        await ensure_group(redis, keys)
        await redis.xreadgroup(GROUP, "ghost", {keys.invocations: ">"}, count=2)
        await redis.xreadgroup(GROUP, "ghost", {keys.invocations: "0"}, count=1)  # redeliver one
    report = await collect_status(redis, settings, window_s=60)
    assert report["streams"][keys.invocations]["length"] == 5
    assert report["streams"][keys.invocations]["memory_bytes"] > 0
    assert report["sessions"] == 1
    recent = report["last_minutes"]
    assert recent["lifecycle"] == {"PROJECTING": 5, "READY": 2, "ERROR": 1}
    assert recent["evidence_status"] == {"EVIDENCE_FOUND": 1, "NO_EVIDENCE": 1, "ERROR": 1}
    group = report["group"]
    assert group["pending"] == 2 and group["lag"] == 0
    pending = {p["id"]: p for p in report["pending"]}
    assert {p["consumer"] for p in pending.values()} == {"ghost"}
    assert sorted(p["deliveries"] for p in pending.values()) == [1, 2]
    consumers = {c["name"]: c for c in report["consumers"]}
    # Liveness is the heartbeat's (issue 24): "ghost" read but never beat, so it is dead even
    # though XINFO's idle time is fresh; the two workers stopped cleanly (beats removed).
    assert consumers["ghost"]["pending"] == 2 and consumers["ghost"]["live"] is False
    assert consumers["ghost"]["idle_ms"] < 2000 and consumers["ghost"]["heartbeat_age_ms"] is None
    assert not any(c["live"] for c in consumers.values()) and group["consumers_live"] == 0
    assert status_renderable(report) is not None


async def test_status_json_and_watch(redis: Any, prefix: str, capsys: Any) -> None:
    settings = settings_for(prefix)
    assert await run_status(settings, REDIS_URL, as_json=True) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["group"] is None and report["sessions"] == 0
    assert (
        await run_status(settings, REDIS_URL, as_json=True, watch=True, interval=0.01, iterations=3)
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and all("streams" in json.loads(line) for line in lines)
    assert await run_status(settings, REDIS_URL, watch=True, interval=0.01, iterations=2) == 0
    assert "last 300 s" in capsys.readouterr().out


async def test_a_consumer_that_stopped_cleanly_is_stopped_not_dead(redis: Any, prefix: str) -> None:
    # On-call drill: after a few restarts `status` listed every cleanly stopped worker as
    # "dead" (consumers_dead 9 beside 1 live), though nothing was wrong: XINFO keeps a
    # consumer's name after it leaves. Dead is what needs a look: a beat gone stale (a killed
    # or frozen worker) or entries held without a beat; stopped is neither.
    settings = settings_for(prefix)
    keys = Keys(prefix)
    async with EvidenceClient(redis, settings) as client:
        async with running_worker(redis, settings, {"lookup_knowledge": InstantSource()}):
            assert await client.call("s1", kcall(1), timeout=10) is not None
        await client.submit_many("s1", [kcall(2)])
        await admit(redis, settings)
        await redis.xreadgroup(GROUP, "ghost", {keys.invocations: ">"}, count=1)
    report = await collect_status(redis, settings)
    states = {c["name"]: c["state"] for c in report["consumers"]}
    assert states.pop("ghost") == "dead"
    assert list(states.values()) == ["stopped"]  # the worker, stopped cleanly
    group = report["group"]
    assert (group["consumers_live"], group["consumers_dead"], group["consumers_stopped"]) == (
        0, 1, 1,
    )  # fmt: skip
    assert "stopped" in _rendered(report) and "dead" in _rendered(report)


async def test_a_backlog_shows_how_long_its_oldest_call_waits(redis: Any, prefix: str) -> None:
    # On-call drill: 300 calls submitted with no worker showed as `{aci}:requests 604` (sent
    # again by the client meanwhile), with nothing saying since when; while a worker drained
    # them, `lag` was `-` (XINFO has none once entries were deleted). How long the oldest call
    # waits answers "is it stuck, and since when" either way. (Requests: a submitter's path.)
    settings = settings_for(prefix, admit_here="0")
    keys = Keys(prefix)
    async with EvidenceClient(redis, settings) as client:
        await client.submit_many("s1", [kcall(1), kcall(2)])
        await anyio.sleep(0.3)
        report = await collect_status(redis, settings)
        requests = report["streams"][keys.requests]
        assert requests["length"] >= 2 and requests["oldest_waiting_ms"] >= 300
        assert report["streams"][keys.invocations]["oldest_waiting_ms"] is None
        await ensure_group(redis, keys)
        await admit(redis, settings)  # invocations now, read by no worker yet
        await anyio.sleep(0.2)
        report = await collect_status(redis, settings)
        assert report["streams"][keys.requests]["oldest_waiting_ms"] is None
        assert report["streams"][keys.invocations]["oldest_waiting_ms"] >= 200
        assert report["group"]["oldest_unread_age_ms"] >= 200
        assert report["partitions"][0]["oldest_unread_age_ms"] >= 200
        await redis.xreadgroup(GROUP, "reader", {keys.invocations: ">"}, count=10)
        report = await collect_status(redis, settings)
        assert report["group"]["oldest_unread_age_ms"] is None  # read: pending, not waiting
    assert "oldest waiting ms" in _rendered(report)


async def test_what_needs_a_look_comes_first_in_plain_words(redis: Any, prefix: str) -> None:
    # On-call drill: with no worker running, the answer ("nothing reads the queue; start a
    # worker") had to be put together from consumers_live 0 in one table and a request count
    # in another. The tables stay; the sentences come first. (Requests: a submitter's path.)
    settings = settings_for(prefix, admit_here="0")
    keys = Keys(prefix)
    assert attention(await collect_status(redis, settings)) == []  # nothing there: nothing said
    async with EvidenceClient(redis, settings) as client:
        await client.submit_many("s1", [kcall(1), kcall(2)])
        said = attention(await collect_status(redis, settings))
        assert len(said) == 1 and said[0].startswith("no live worker: 2 requests (resends")
        assert "start `aci-evidence worker`" in said[0]
        await ensure_group(redis, keys)
        await admit(redis, settings)
        await redis.xreadgroup(GROUP, "ghost", {keys.invocations: ">"}, count=1)
    report = await collect_status(redis, settings)
    said = attention(report)
    assert said[0].startswith("no live worker: 1 invocation waits to be read")
    assert said[1].startswith("1 pending entry is held by dead consumers")
    text = _rendered(report)
    assert text.startswith("attention") and "no live worker" in text
    async with running_worker(redis, settings, {"lookup_knowledge": InstantSource()}):
        for _ in range(100):  # taken over and finished: nothing left to say
            said = attention(await collect_status(redis, settings))
            if not said:
                break
            await anyio.sleep(0.2)
    assert said == []


def _rendered(report: dict[str, Any], width: int = 80) -> str:
    from rich.console import Console

    console = Console(width=width, record=True, file=io.StringIO())
    console.print(status_renderable(report))
    return console.export_text()


async def test_no_live_worker_is_said_for_calls_a_client_admitted_itself(
    redis: Any, prefix: str
) -> None:
    # `pipeline.admit_here`: a default-user client's calls are invocations at once, with no
    # request and, before any worker ever started, no consumer group. "Nothing reads the
    # queue" must still come first.
    settings = settings_for(prefix)
    async with EvidenceClient(redis, settings) as client:
        await client.submit_many("s1", [kcall(1), kcall(2)])
    report = await collect_status(redis, settings)
    assert report["partitions"][0]["requests"] == 0
    said = attention(report)
    assert len(said) == 1 and said[0].startswith("no live worker: 2 invocations wait to be read")
    assert "start `aci-evidence worker`" in said[0]
