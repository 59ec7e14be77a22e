"""Lanes (a dedicated connection per hot loop) and the submit batcher, against the real Redis."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from redis.exceptions import ResponseError

from pipeline.client import EvidenceClient, ToolCall
from pipeline.keys import Keys
from pipeline.lane import Lane, stream_entries
from pipeline.redis_io import RedisProtocolError, RedisUnavailable
from pipeline.settings import Settings
from tests.pipeline.helpers import assert_exactly_once, books, running_worker
from tests.pipeline.sources import HangingSource, InstantSource


def test_stream_entries_reads_both_protocols_and_skips_deleted_entries() -> None:
    entries = [[b"1-0", [b"id", b"a", b"d", b"{}"]], [b"2-0", None]]
    expected = [(b"s", b"1-0", {"id": b"a", "d": b"{}"})]
    assert stream_entries({b"s": entries}) == expected  # RESP3: a map
    assert stream_entries([[b"s", entries]]) == expected  # RESP2: pairs
    assert stream_entries(None) == []  # a blocking read that timed out
    with pytest.raises(RedisProtocolError, match="NOGROUP"):
        stream_entries(ResponseError("NOGROUP No such key 'x' or consumer group 'g'"))


@pytest.mark.redis
async def test_a_lane_answers_in_order_with_error_replies_in_place(redis: Any, prefix: str) -> None:
    key = Keys(prefix).sessions
    lane = Lane(redis)
    try:
        await redis.set(f"{key}:str", "x")
        replies = await lane.call(
            [("SET", f"{key}:a", "1"), ("HGET", f"{key}:str", "f"), ("GET", f"{key}:a")], 5
        )
        assert replies[0] in (True, b"OK") and replies[2] == b"1"
        assert isinstance(replies[1], ResponseError) and "WRONGTYPE" in str(replies[1])
    finally:
        await lane.aclose()
        await redis.delete(f"{key}:str", f"{key}:a")


@pytest.mark.redis
async def test_a_lane_sends_every_kind_of_argument_as_redis_would(redis: Any, prefix: str) -> None:
    key = Keys(prefix).sessions
    lane = Lane(redis)
    try:
        values = ["text", b"bytes", 7, 1.5, bytearray(b"array"), memoryview(b"view"), "ünï"]
        commands = [("SET", f"{key}:{i}", value) for i, value in enumerate(values)]
        await lane.call(commands, 5)
        stored = await lane.call([("GET", f"{key}:{i}") for i in range(len(values))], 5)
        assert stored == [b"text", b"bytes", b"7", b"1.5", b"array", b"view", "ünï".encode()]
        with pytest.raises(ValueError, match="empty command"):
            await lane.call([("GET", f"{key}:0"), ()], 5)  # Redis would never answer it
    finally:
        await lane.aclose()
        await redis.delete(*[f"{key}:{i}" for i in range(7)])


@pytest.mark.redis
async def test_a_lane_reconnects_after_its_connection_is_killed(redis: Any) -> None:
    lane = Lane(redis)
    try:
        [client_id] = await lane.call([("CLIENT", "ID")], 5)
        assert await redis.client_kill_filter(_id=client_id) == 1
        [pong] = await lane.call([("PING",)], 5)  # one reconnect, transparently
        assert pong in (True, b"PONG")
        [new_id] = await lane.call([("CLIENT", "ID")], 5)
        assert new_id != client_id
    finally:
        await lane.aclose()


@pytest.mark.redis
async def test_a_lane_call_that_overruns_its_timeout_is_unavailable_and_the_lane_recovers(
    redis: Any, prefix: str
) -> None:
    stream = f"{Keys(prefix).sessions}:empty"
    lane = Lane(redis)
    try:
        with pytest.raises(RedisUnavailable):
            await lane.call([("XREAD", "BLOCK", 2000, "STREAMS", stream, "$")], timeout=0.2)
        [pong] = await lane.call([("PING",)], 5)  # no half-read reply left behind
        assert pong in (True, b"PONG")
    finally:
        await lane.aclose()


@pytest.mark.redis
async def test_a_command_pipelined_behind_a_blocking_read_runs_when_that_read_returns(
    redis: Any, prefix: str
) -> None:
    # What the listener's one round trip per wake-up rests on (`pipeline.listener`): the
    # model streams' read, sent behind the blocking read of the control streams, sees what
    # was written before the blocking read returned.
    control, model = f"{Keys(prefix).sessions}:c", f"{Keys(prefix).sessions}:m"
    await redis.xadd(control, {"id": "old"}, id="1-0")
    lane = Lane(redis)

    async def publish() -> None:
        await anyio.sleep(0.2)
        async with redis.pipeline(transaction=True) as pipe:  # model first, as every writer
            pipe.xadd(model, {"id": "a"}, id="2-0")
            pipe.xadd(control, {"id": "a"}, id="2-0")
            await pipe.execute()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(publish)
            started = anyio.current_time()
            blocked, after = await lane.call(
                [("XREAD", "BLOCK", 5000, "STREAMS", control, "1-0"),
                 ("XREAD", "STREAMS", model, "0-0")],
                5.0,
            )  # fmt: skip
            waited = anyio.current_time() - started
        assert 0.15 < waited < 4.0, waited  # returned when the control entry came
        assert [(s, e) for s, e, _f in stream_entries(blocked)] == [(control.encode(), b"2-0")]
        assert [(s, e) for s, e, _f in stream_entries(after)] == [(model.encode(), b"2-0")]
    finally:
        await lane.aclose()
        await redis.delete(control, model)


@pytest.mark.redis
async def test_a_lane_to_a_closed_port_is_unavailable() -> None:
    from pipeline.redis_io import open_redis
    from tests.pipeline.test_recovery import free_port

    async with open_redis(f"redis://127.0.0.1:{free_port()}") as closed:
        lane = Lane(closed)
        with pytest.raises(RedisUnavailable):
            await lane.call([("PING",)], 2)
        await lane.aclose()


@pytest.mark.redis
async def test_concurrent_submissions_share_pipelines_and_stay_idempotent(
    redis: Any, prefix: str
) -> None:
    # As a submitter does (requests): a client that admits itself is tested in test_admit_here.
    settings = Settings(prefix=prefix, visibility_timeout_s=5.0, deadline_s=2.0, admit_here="0")

    def calls(k: int) -> list[ToolCall]:
        # Every caller also submits the shared id `same`: exactly one of them creates it.
        return [
            ToolCall(tool="lookup_knowledge", tool_call_id=i, arguments={"query": f"q {i}"})
            for i in (f"c{k}_0", f"c{k}_1", "same")
        ]

    async with EvidenceClient(redis, settings) as client:
        sent: list[list[Any]] = []

        async def submit(k: int) -> None:
            sent.append(await client.submit_many("batch", calls(k)))

        async with anyio.create_task_group() as tg:
            for k in range(40):
                tg.start_soon(submit, k)
        assert sent == [[None, None, None]] * 40  # all sent, none refused
        # 120 requests wait for admission; a worker's admission makes them 81 invocations.
        assert await redis.xlen(Keys(prefix).requests) == 120
        async with running_worker(redis, settings, {"lookup_knowledge": InstantSource()}):
            ids = [c.tool_call_id for k in range(40) for c in calls(k)[:2]] + ["same"]
            found = await client.wait("batch", ids, timeout=20)
    assert await redis.xlen(Keys(prefix).invocations) == 81
    assert set(found) == set(ids)
    assert all(json.loads(bytes(r.model))["evidence_status"] for r in found.values())
    assert_exactly_once(await books(redis, prefix, "batch"), ids)


@pytest.mark.redis
async def test_a_refused_submission_fails_only_its_own_caller(redis: Any, prefix: str) -> None:
    settings = Settings(prefix=prefix, visibility_timeout_s=5.0, deadline_s=2.0)
    await redis.set(Keys(prefix).call("broken", "c7"), "not a hash")  # WRONGTYPE for its read
    outcomes: dict[str, Any] = {}

    async def submit(session: str, i: int) -> None:
        call = ToolCall(tool="lookup_knowledge", tool_call_id=f"c{i}", arguments={"query": "q"})
        try:
            outcomes[f"{session}/{i}"] = await client.submit_many(session, [call])
        except RedisProtocolError as exc:
            outcomes[f"{session}/{i}"] = exc

    async with EvidenceClient(redis, settings) as client:
        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(submit, "broken" if i == 7 else "fine", i)
    assert isinstance(outcomes.pop("broken/7"), RedisProtocolError)
    assert outcomes == {f"fine/{i}": [None] for i in range(20) if i != 7}


@pytest.mark.redis
async def test_more_sessions_than_listener_connections_all_get_their_results(
    redis: Any, prefix: str
) -> None:
    # One blocking read per partition serves every waiting session: 100 sessions at once
    # (more than the 64 listening slots a client had) on a few connections.
    settings = Settings(prefix=prefix, visibility_timeout_s=5.0, deadline_s=2.0)
    found: dict[str, Any] = {}

    async def one(session: str) -> None:
        call = ToolCall(tool="lookup_knowledge", tool_call_id="c1", arguments={"query": session})
        found[session] = await client.call(session, call, timeout=20)

    async with EvidenceClient(redis, settings) as client:
        async with running_worker(redis, settings, {"lookup_knowledge": InstantSource()}):
            with anyio.fail_after(20):
                async with anyio.create_task_group() as tg:
                    for k in range(100):
                        tg.start_soon(one, f"s{k}")
        assert len(client._idle_lanes) <= 8
    assert sorted(found) == sorted(f"s{k}" for k in range(100))
    assert all(r is not None for r in found.values())


@pytest.mark.redis
async def test_calls_in_a_new_session_each_never_wait_for_a_blocking_read_to_expire(
    redis: Any, prefix: str
) -> None:
    # A 2026-07-28 MCP request is a session of its own, and session-per-call hosts open one per
    # call: every third such call waited ~1.1 s. Each ended read went on blocking on its
    # finished sessions for their linger, so three reads (the cap) were parked and the next
    # session's result waited for one of them to time out.
    settings = Settings(prefix=prefix, visibility_timeout_s=5.0, deadline_s=2.0)
    waited: list[float] = []
    async with (
        EvidenceClient(redis, settings) as client,
        running_worker(redis, settings, {"lookup_knowledge": InstantSource()}),
    ):
        for k in range(8):
            call = ToolCall(tool="lookup_knowledge", tool_call_id="1", arguments={"query": "q"})
            started = anyio.current_time()
            assert await client.call(f"own{k}", call, timeout=10) is not None
            waited.append(anyio.current_time() - started)
        # ... and a session whose waiter left is followed again at once, on its cursors.
        again = ToolCall(tool="lookup_knowledge", tool_call_id="2", arguments={"query": "q"})
        started = anyio.current_time()
        assert await client.call("own7", again, timeout=10) is not None
        waited.append(anyio.current_time() - started)
    assert max(waited) < 0.5, [round(w, 3) for w in waited]


@pytest.mark.redis
async def test_a_wait_costs_the_listener_one_read_per_result(
    redis: Any, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Blocked on both view streams at once, Redis 7.0 answered with the model view alone (the
    # first stream a finish writes) and the control view took a second round trip.
    settings = Settings(prefix=prefix, visibility_timeout_s=5.0, deadline_s=2.0)
    reads: list[int] = []
    call_lane = Lane.call

    async def counted(self: Lane, commands: Any, *args: Any, **kwargs: Any) -> Any:
        if commands and commands[0][0] == "XREAD":
            reads.append(len(commands))
        return await call_lane(self, commands, *args, **kwargs)

    monkeypatch.setattr(Lane, "call", counted)
    async with (
        EvidenceClient(redis, settings) as client,
        running_worker(redis, settings, {"lookup_knowledge": InstantSource()}),
    ):
        first = ToolCall(tool="lookup_knowledge", tool_call_id="c0", arguments={"query": "q"})
        assert await client.call("one", first, timeout=10) is not None  # the session joins
        reads.clear()
        for i in range(1, 11):
            call = ToolCall(tool="lookup_knowledge", tool_call_id=f"c{i}", arguments={"query": "q"})
            result = await client.call("one", call, timeout=10)
            assert result is not None and result.model and result.control
    assert 10 <= len(reads) <= 12, reads  # one read a result (and the one then pending)
    assert set(reads) == {2}  # the control streams blocking, the model streams behind


@pytest.mark.serial
@pytest.mark.redis
async def test_sessions_waiting_on_slow_calls_never_delay_another_sessions_fast_call(
    redis: Any, prefix: str
) -> None:
    # Issue 23: 64 sessions waiting on slow calls delayed a 65th session's fast call from
    # 0.01 s to 4.24 s (the client's 64 listening slots). Now they share one read.
    settings = Settings(prefix=prefix, visibility_timeout_s=5.0, deadline_s=3.0)
    sources = {"query_logs": HangingSource(), "lookup_knowledge": InstantSource()}
    slow = ToolCall(tool="query_logs", tool_call_id="slow",
                    arguments={"topic": "APPLICATION", "query": "x"})  # fmt: skip
    fast = ToolCall(tool="lookup_knowledge", tool_call_id="fast", arguments={"query": "q"})
    async with (
        EvidenceClient(redis, settings) as client,
        running_worker(redis, settings, sources, concurrency=128),
    ):
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                for k in range(70):
                    tg.start_soon(client.call, f"waiting{k}", slow, 10.0)
                await anyio.sleep(1.0)  # all 70 are waiting now
                started = anyio.current_time()
                result = await client.call("other", fast, timeout=10)
                waited = anyio.current_time() - started
                tg.cancel_scope.cancel()
    assert result is not None and waited < 0.5, waited
