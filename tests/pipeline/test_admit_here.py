"""A client that Redis trusts as a worker admits its own calls (`pipeline.admit_here`); one that
holds only the submitter role goes through the workers' admission, with no refusal logged."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import anyio
import pytest

from contracts import LifecycleStatus
from pipeline.admit_here import shared_settings
from pipeline.client import EvidenceClient, ToolCall
from pipeline.embedded import embedded_redis
from pipeline.envelope import decode_envelope
from pipeline.keys import Keys
from pipeline.redis_io import RedisProtocolError, call_redis, open_redis
from pipeline.settings import Settings, SettingsError
from tests.pipeline.acl_server import acl_server
from tests.pipeline.helpers import running_worker
from tests.pipeline.sources import InstantSource
from tests.pipeline.test_acl import _denials

PREFIX = "aci"


def kcall(i: int, query: str = "pool exhausted") -> ToolCall:
    return ToolCall(
        tool="lookup_knowledge", tool_call_id=f"call_{i}", arguments=json.dumps({"query": query})
    )


def settings_for(prefix: str, **kw: Any) -> Settings:
    return Settings(prefix=prefix, visibility_timeout_s=2.0, deadline_s=1.0, **kw)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("lookup_knowledge", {"query": "pool exhausted"}),
        ("query_logs", {"topic": "APPLICATION", "query": "timeout", "lookback_minutes": 30}),
        ("query_mysql", {"data_source": "shop", "sql": "SELECT ?", "params": [1]}),
        ("query_logs", {"topic": "NOT_A_TOPIC", "query": "x"}),  # a schema error
        ("lookup_knowledge", {"query": "q", "tool_call_id": "forged"}),  # an unknown field
        ("no_such_tool", {"query": "q"}),
    ],
)
def test_the_judge_given_what_the_client_decoded_decides_as_from_the_envelope(
    tool: str, arguments: dict[str, Any]
) -> None:
    # A client that judges its own calls hands the judge the invocation and request it
    # decoded (`Prepared.decoded`) instead of decoding the envelope again: the same verdict.
    from pipeline.admission import judge
    from pipeline.submitter import prepare

    settings = Settings(prefix="judge")
    keys = settings.keys()
    part = keys.for_session("s1")
    call = ToolCall(tool=tool, tool_call_id="c1", arguments=arguments)
    kwargs: dict[str, Any] = {
        "argument_max_bytes": settings.argument_max_bytes,
        "default_lookback": settings.default_lookback,
        "now_ms": 1_700_000_000_000,
    }
    # Also pinned to an incident time (part of a log call's scope key, which the judge takes
    # from the client's `Prepared.decoded` instead of hashing it again).
    for as_of_ms in (None, 1_699_999_000_000):
        prepared = prepare(
            part, "s1", [call], bounds=settings.bounds,
            argument_max_bytes=settings.argument_max_bytes, traceparent=None, as_of_ms=as_of_ms,
        )  # fmt: skip
        envelope = prepared.envelopes[0]
        given = judge(keys, part, "", envelope, mine=prepared.decoded[0], **kwargs)
        decoded = judge(keys, part, "", envelope, **kwargs)
        assert given == decoded
        assert given.scope_key == prepared.scope_keys[0]  # type: ignore[union-attr]


async def test_a_default_user_client_admits_its_calls_in_its_submit(
    redis: Any, prefix: str
) -> None:
    settings = settings_for(prefix)
    keys = Keys(prefix)
    part = keys.for_session("s1")
    async with EvidenceClient(redis, settings) as client:
        # No worker runs: the call is admitted by the submit itself, no request is written.
        assert await client.submit_many("s1", [kcall(1), kcall(2)]) == [None, None]
        assert await redis.exists(part.requests) == 0
        assert await redis.xlen(part.invocations) == 2
        record = await redis.hgetall(part.call("s1", "call_1"))
        assert record[b"st"] == b"PROJECTING" and record[b"eid"]
        assert await redis.zscore(part.calls("s1"), "call_1") is not None  # indexed too
        # Idempotent: the same call again is the same invocation.
        assert await client.submit_many("s1", [kcall(1)]) == [None]
        assert await redis.xlen(part.invocations) == 2
        # The id reused for another scope: refused here, with the first call's evidence
        # never given.
        [refused] = await client.submit_many("s1", [kcall(1, "disk full")])
        assert refused is not None and refused.lifecycle is LifecycleStatus.ERROR
        assert json.loads(bytes(refused.model))["error"]["code"] == "DUPLICATE_TOOL_CALL_ID"
        async with running_worker(redis, settings, {"lookup_knowledge": InstantSource()}):
            results = await client.call_many("s1", [kcall(1), kcall(2), kcall(3)], timeout=10)
            # A call final already is answered from its result, admitted once.
            [again] = await client.call_many("s1", [kcall(3)], timeout=10)
    assert all(r is not None and r.lifecycle is LifecycleStatus.READY for r in results)
    assert again is not None and again.lifecycle is LifecycleStatus.READY
    assert await redis.xlen(part.invocations) == 3
    assert client.unadmitted.sent == {}


async def test_a_log_calls_window_is_pinned_by_the_client_that_admits_it(
    redis: Any, prefix: str
) -> None:
    settings = settings_for(prefix)
    part = Keys(prefix).for_session("s1")
    call = ToolCall(
        tool="query_logs",
        tool_call_id="logs_1",
        arguments={"topic": "APPLICATION", "query": "timeout", "lookback_minutes": 30},
    )
    async with EvidenceClient(redis, settings) as client:
        before = int(time.time() * 1000)
        assert await client.submit_many("s1", [call]) == [None]
        after = int(time.time() * 1000)
    envelope = await redis.hget(part.call("s1", "logs_1"), "inv")
    recorded = decode_envelope(envelope)
    assert isinstance(recorded.window_end_ms, int) and before <= recorded.window_end_ms <= after


async def test_a_client_admits_itself_on_a_fresh_server_that_has_no_script_yet() -> None:
    # The first EVALSHA on a new Redis answers NOSCRIPT: the client loads the script and
    # admits; nothing falls back to requests.
    async with embedded_redis() as url, open_redis(url) as redis:
        settings = settings_for("fresh")
        part = Keys("fresh").for_session("s1")
        async with EvidenceClient(redis, settings) as client:
            assert await client.submit_many("s1", [kcall(1)]) == [None]
            assert client._here.enabled
        assert await redis.xlen(part.invocations) == 1
        assert await redis.exists(part.requests) == 0


async def test_the_submitter_role_goes_through_admission_and_no_refusal_is_logged() -> None:
    settings = settings_for(PREFIX)
    forced = settings_for(PREFIX, admit_here="1")  # tried anyway: refused once, then requests
    with acl_server([PREFIX]) as server:
        async with (
            open_redis(server.url("worker")) as worker_redis,
            running_worker(worker_redis, settings, {"lookup_knowledge": InstantSource()}),
        ):
            async with EvidenceClient.connect(settings, server.url("submitter")) as client:
                assert not client._here.enabled  # a named user: not tried (auto)
                [first] = await client.call_many("s1", [kcall(1)], timeout=20)
            assert await _denials(server) == []
            async with EvidenceClient.connect(forced, server.url("submitter")) as client:
                [second] = await client.call_many("s1", [kcall(2)], timeout=20)
                [third] = await client.call_many("s1", [kcall(3)], timeout=20)
                assert not client._here.enabled
            denied = await _denials(server)
    for result in (first, second, third):
        assert result is not None and result.lifecycle is LifecycleStatus.READY
    # The one refusal of ACI_ADMIT_HERE=1 as a submitter, once: its first read of the
    # workers' settings (`pipeline.admit_here`, before its first admit); no script is tried.
    assert [(d["username"], d["object"]) for d in denied] == [(b"submitter", b"{aci}:deployment")]
    assert denied[0]["count"] == 1


async def test_admit_here_0_sends_requests_even_as_the_default_user(
    redis: Any, prefix: str
) -> None:
    settings = settings_for(prefix, admit_here="0")
    part = Keys(prefix).for_session("s1")
    async with EvidenceClient(redis, settings) as client:
        assert not client._here.enabled
        assert await client.submit_many("s1", [kcall(1)]) == [None]
    assert await redis.xlen(part.requests) == 1
    assert await redis.exists(part.invocations) == 0


async def test_a_key_of_the_wrong_type_writes_nothing_and_is_reported_as_before(
    redis: Any, prefix: str
) -> None:
    # The admit script writes nothing when a key has the wrong type (only workers write
    # them): the calls go the way a submitter's do, whose read of the record reports it.
    settings = settings_for(prefix)
    part = Keys(prefix).for_session("s1")
    await call_redis(redis.set(part.call("s1", "call_1"), "not a hash"))
    async with EvidenceClient(redis, settings) as client:
        with pytest.raises(RedisProtocolError, match="WRONGTYPE"):
            await client.submit_many("s1", [kcall(1), kcall(2)])
        assert client._here.enabled  # only this submission went the other way
        assert await redis.exists(part.invocations) == 0
        assert await client.submit_many("s1", [kcall(2)]) == [None]  # the next one admits
    assert await redis.get(part.call("s1", "call_1")) == b"not a hash"  # untouched
    assert await redis.xlen(part.invocations) == 1


async def test_a_client_used_outside_async_with_admits_itself_on_a_fresh_server() -> None:
    # Outside `async with` a submit runs on a lane of its own, whose error replies used to
    # come back as a bare PipelineError: NOSCRIPT (a fresh or restarted Redis) failed the
    # submit instead of loading the script.
    async with embedded_redis() as url, open_redis(url) as redis:
        client = EvidenceClient(redis, settings_for("fresh"))
        part = Keys("fresh").for_session("s1")
        assert await client.submit_many("s1", [kcall(1)]) == [None]
        assert client._here.enabled
        assert await redis.xlen(part.invocations) == 1
        assert await redis.exists(part.requests) == 0


async def test_a_submitter_forced_to_try_outside_async_with_falls_back_to_requests() -> None:
    # ACI_ADMIT_HERE=1 as the submitter, on a lane of its own: NOPERM turns it off and the
    # calls go as requests (they used to fail the submit).
    forced = settings_for(PREFIX, admit_here="1")
    with acl_server([PREFIX]) as server:
        async with open_redis(server.url("submitter")) as redis:
            client = EvidenceClient(redis, forced)
            assert await client.submit_many("s1", [kcall(1)]) == [None]
            assert not client._here.enabled
        async with open_redis(server.url("admin")) as admin:
            assert await admin.xlen(Keys(PREFIX).for_session("s1").requests) == 1


async def test_a_large_submission_is_admitted_in_script_calls_of_bounded_size(
    redis: Any, prefix: str
) -> None:
    # One admit script for a whole submission held Redis for its whole length (10,000 calls:
    # 384 ms in SLOWLOG, every other client waiting); the workers' admission takes 256
    # requests a round. Idempotent per call, so the calls go in script calls of at most 256
    # (one round trip), an id repeated across two of them still one call.
    settings = settings_for(prefix)
    part = Keys(prefix).for_session("s1")
    calls = [kcall(i, f"q {i}") for i in range(600)]
    calls[300] = kcall(1, "q 1")  # the same call as calls[1], in another script call
    calls[599] = kcall(2, "another scope")  # calls[2]'s id with another scope: a conflict
    sent: list[int] = []
    async with EvidenceClient(redis, settings) as client:
        batcher = client._submits
        assert batcher is not None
        run = batcher.run

        async def spy(commands: Any) -> list[Any]:
            sent.extend(int(c[2]) for c in commands if c[0] == "EVALSHA")
            return await run(commands)

        batcher.run = spy  # type: ignore[method-assign]
        out = await client.submit_many("s1", calls)
    assert sent and max(sent) <= 5 + 2 * 256  # keys of one script call: 5 + 2 per call
    assert [n for n, r in enumerate(out) if r is not None] == [599]
    assert await redis.xlen(part.invocations) == 598
    assert await redis.exists(part.requests) == 0


async def test_a_client_outside_async_with_waits_for_replicas_after_admitting(
    redis: Any, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    # ACI_WAIT_REPLICAS: the workers' admission WAITs after admit.lua; a client that admits
    # itself on a lane of its own (outside `async with`) must too (no replica here: the
    # shortfall is logged).
    settings = settings_for(prefix, wait_replicas=1, wait_timeout_ms=10)
    client = EvidenceClient(redis, settings)
    with caplog.at_level("WARNING", logger="aci.redis"):
        assert await client.submit_many("s1", [kcall(1)]) == [None]
    assert await redis.xlen(Keys(prefix).for_session("s1").invocations) == 1
    assert any("replicas acknowledged" in r.getMessage() for r in caplog.records)


async def test_a_call_awaited_in_a_task_of_its_own_is_cancelled_with_its_caller(
    redis: Any, prefix: str
) -> None:
    # As LangChain runs a tool: `call` in an asyncio task its caller awaits. Cancelling the
    # caller cancels that task natively, again and again, which no shield holds off: the
    # cancel's first await (reading the call record, where a request's client had its
    # envelope at hand) was cut and the call ran on (tests/hosts/test_adapters_cancel.py).
    settings = Settings(prefix=prefix, deadline_s=30.0, visibility_timeout_s=40.0)
    source = InstantSource(delay=20.0)
    async with (
        EvidenceClient(redis, settings) as client,
        running_worker(redis, settings, {"lookup_knowledge": source}),
    ):
        with anyio.move_on_after(1.0):
            await asyncio.create_task(client.call("s1", kcall(1), timeout=30))
        final = await client.wait("s1", ["call_1"], timeout=10)
    assert "call_1" in final, "the call was not cancelled"
    assert json.loads(bytes(final["call_1"].model))["error"]["code"] == "CANCELLED"


async def test_a_worker_beats_the_settings_a_client_that_admits_itself_must_share(
    redis: Any, prefix: str
) -> None:
    settings = settings_for(prefix, argument_max_bytes=4096)
    part = Keys(prefix).for_session("s1")
    async with running_worker(redis, settings, {"lookup_knowledge": InstantSource()}):
        with anyio.fail_after(5):
            while not await redis.exists(part.deployment):  # noqa: ASYNC110 - its first beat
                await anyio.sleep(0.05)
        written = await redis.hgetall(part.deployment)
    assert {k.decode(): v.decode() for k, v in written.items()} == {
        "partitions": "1", "argument_max_bytes": "4096", "default_lookback": "60",
        "stream_maxlen": "100000", "retention_s": "86400",
    }  # fmt: skip
    assert 0 < await redis.pttl(part.deployment)


async def test_workers_with_other_bounds_admit_the_calls_of_a_client_left_behind(
    redis: Any, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The workers were redeployed with a smaller ACI_ARGUMENT_MAX_BYTES; an agent host still
    # has the old one: its calls go to the workers' admission, which applies theirs.
    part = Keys(prefix).for_session("s1")
    workers = shared_settings(settings_for(prefix, argument_max_bytes=2048))
    await redis.hset(part.deployment, mapping=workers)
    async with EvidenceClient(redis, settings_for(prefix)) as client:
        assert await client.submit_many("s1", [kcall(1), kcall(2)]) == [None, None]
        assert await redis.xlen(part.requests) == 2  # requests, not admitted here
        assert await redis.exists(part.invocations) == 0
        assert await client.submit_many("s1", [kcall(3)]) == [None]  # said once
        # The workers come round to the client's settings: the next call but one admits
        # itself again (each admit reads them for the next).
        await redis.hset(part.deployment, mapping=shared_settings(settings_for(prefix)))
        client._here._agreed.clear()  # as a new client would: read before its first admit
        assert await client.submit_many("s1", [kcall(4)]) == [None]
        assert await redis.xlen(part.invocations) == 1
        await redis.hset(part.deployment, "default_lookback", "15")  # redeployed again
        assert await client.submit_many("s1", [kcall(5)]) == [None]  # read in this round trip
        assert await client.submit_many("s1", [kcall(6)]) == [None]
        assert await redis.xlen(part.invocations) == 2 and await redis.xlen(part.requests) == 4
    said = [r.getMessage() for r in caplog.records if "differ" in r.getMessage()]
    assert said == [
        "calls go through the workers' admission: the workers' ACI_ARGUMENT_MAX_BYTES differ"
        " from this client's",
        "calls go through the workers' admission: the workers' ACI_LOGS_DEFAULT_LOOKBACK"
        " differ from this client's",
    ]


async def test_another_partition_count_than_the_workers_is_a_configuration_error(
    redis: Any, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    part = Keys(prefix).for_session("s1")
    await redis.hset(part.deployment, mapping={"partitions": "4"})
    async with EvidenceClient(redis, settings_for(prefix)) as client:
        with pytest.raises(SettingsError, match="ACI_PARTITIONS is 1 here, 4 for the workers"):
            await client.submit_many("s1", [kcall(1)])
        assert await redis.exists(part.requests, part.invocations) == 0  # nothing written
    # Said as the error alone: no warning before it that the calls go through admission.
    assert not [r for r in caplog.records if "differ" in r.getMessage()]


async def test_a_client_left_behind_admits_itself_again_once_the_workers_agree(
    redis: Any, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Review: a client that once read other settings sent no admit round trip again, so it
    # never read them again: it stayed on the workers' admission until restarted, however
    # long ago the workers came round. It reads them again every `REREAD_S` while they differ.
    import pipeline.admit_here

    monkeypatch.setattr(pipeline.admit_here, "REREAD_S", 0.2)
    part = Keys(prefix).for_session("s1")
    await redis.hset(part.deployment, mapping={"partitions": "4"})  # another deployment's
    await redis.hset(
        part.deployment, mapping=shared_settings(settings_for(prefix, argument_max_bytes=2048))
    )
    async with EvidenceClient(redis, settings_for(prefix)) as client:
        assert await client.submit_many("s1", [kcall(1)]) == [None]
        assert await redis.xlen(part.requests) == 1  # through the workers' admission
        await redis.hset(part.deployment, mapping=shared_settings(settings_for(prefix)))
        assert await client.submit_many("s1", [kcall(2)]) == [None]  # read 0.2 s ago: as it was
        assert await redis.xlen(part.requests) == 2
        await anyio.sleep(0.25)
        assert await client.submit_many("s1", [kcall(3)]) == [None]
        assert await redis.xlen(part.requests) == 2 and await redis.xlen(part.invocations) == 1


async def test_a_partition_count_the_workers_came_back_from_is_no_error_for_good(
    redis: Any, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Review: another ACI_PARTITIONS, once read, raised on every call of the client for good,
    # also after the workers were rolled back to the client's.
    import pipeline.admit_here

    monkeypatch.setattr(pipeline.admit_here, "REREAD_S", 0.2)
    part = Keys(prefix).for_session("s1")
    await redis.hset(part.deployment, mapping={"partitions": "4"})
    async with EvidenceClient(redis, settings_for(prefix)) as client:
        with pytest.raises(SettingsError):
            await client.submit_many("s1", [kcall(1)])
        await redis.hset(part.deployment, mapping=shared_settings(settings_for(prefix)))
        await anyio.sleep(0.25)
        assert await client.submit_many("s1", [kcall(2)]) == [None]
        assert await redis.xlen(part.invocations) == 1


@pytest.mark.parametrize(("client_count", "worker_count"), [(1, 4), (4, 1), (2, 8)])
async def test_workers_of_another_partition_count_are_found_whatever_the_counts(
    redis: Any, prefix: str, client_count: int, worker_count: int
) -> None:
    # Review: the partitions of two counts have other hash tags (but by chance), so a client
    # read a `deployment` hash no worker wrote and admitted its calls where no worker reads:
    # `ACI_PARTITIONS is 1 here, 4 for the workers` was never said. Workers also write it
    # under the prefix's own tag, which such a client reads too.
    workers = settings_for(prefix, partitions=worker_count)
    base = Keys(prefix).parts[0]
    async with running_worker(redis, workers, {"lookup_knowledge": InstantSource()}):
        with anyio.fail_after(5):
            while not await redis.exists(base.deployment):  # noqa: ASYNC110 - its first beat
                await anyio.sleep(0.05)
        settings = settings_for(prefix, partitions=client_count)
        async with EvidenceClient(redis, settings) as client:
            says = f"ACI_PARTITIONS is {client_count} here, {worker_count} for the workers"
            with pytest.raises(SettingsError, match=says):
                await client.submit_many("s1", [kcall(1)])


async def test_a_deployment_key_of_another_type_sends_calls_through_admission(
    redis: Any, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Review: a `deployment` key of the wrong type (WRONGTYPE to HMGET) raised nothing, but
    # was read again before every submit, each time in vain, and nothing said why the calls
    # went through the workers' admission. It is read again every `REREAD_S`, said once.
    part = Keys(prefix).for_session("s1")
    await redis.set(part.deployment, "not a hash")
    async with EvidenceClient(redis, settings_for(prefix)) as client:
        for i in range(3):
            assert await client.submit_many("s1", [kcall(i)]) == [None]
        assert await redis.xlen(part.requests) == 3 and await redis.exists(part.invocations) == 0
        assert part.index in client._here._agreed  # not read again before every submit
    said = [r.getMessage() for r in caplog.records if "deployment" in r.getMessage()]
    assert said == [
        f"calls go through the workers' admission: {part.deployment} is not readable (WRONGTYPE)"
    ]


async def test_the_admit_step_checks_the_streams_it_writes(redis: Any, prefix: str) -> None:
    # The request and dead-letter streams are checked (and refused, nothing written, when of
    # the wrong type) only by a step that acks or refuses a request: a client's own
    # admission touches neither, so neither is read for it.
    from pipeline.admission import Admission, Refusal, admit_call, judge
    from pipeline.scripts import ADMIT_LUA
    from pipeline.submitter import prepare

    settings = settings_for(prefix)
    keys = Keys(prefix)
    part = keys.for_session("s1")
    prepared = prepare(
        part, "s1", [kcall(1), kcall(2), kcall(3)], bounds=settings.bounds,
        argument_max_bytes=settings.argument_max_bytes, traceparent=None,
    )  # fmt: skip
    limits = {
        "argument_max_bytes": settings.argument_max_bytes,
        "default_lookback": settings.default_lookback,
    }
    judged = [
        judge(keys, part, rid, envelope, **limits)
        for rid, envelope in zip(("", "", "1-1"), prepared.envelopes, strict=True)
    ]
    assert all(isinstance(a, Admission) for a in judged)

    async def step(admitted: list[Any], refused: list[Refusal]) -> Any:
        call_keys, args = admit_call(
            part, admitted, refused, now_ms=1_000, maxlen=1000, retention_ms=60_000
        )
        return await redis.eval(ADMIT_LUA, len(call_keys), *call_keys, *args)

    await redis.set(part.requests, "not a stream")
    await redis.set(part.dead, "not a stream")
    assert await step(judged[2:], []) == [-1, 1]  # a request to ack: refused, nothing written
    assert await step([], [Refusal("1-2", "reason")]) == [-1, 1]
    await redis.delete(part.requests)
    assert await step([], [Refusal("1-2", "reason")]) == [-1, 5]  # a refusal to write
    assert await redis.exists(part.invocations, part.call("s1", "call_3")) == 0
    [eid] = await step(judged[:1], [])  # a client's own: neither stream is written
    assert isinstance(eid, bytes)
    await redis.set(part.requests, "not a stream")
    [eid] = await step(judged[1:2], [])
    assert isinstance(eid, bytes)
    assert await redis.xlen(part.invocations) == 2
    assert await redis.get(part.requests) == b"not a stream"
    assert await redis.get(part.dead) == b"not a stream"
