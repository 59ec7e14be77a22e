"""The pipeline against the real Redis: submit, lifecycle, views, finish, recovery."""

from __future__ import annotations

import json
from typing import Any

import anyio
import msgspec
import pytest

from contracts import LifecycleStatus
from pipeline.client import EvidenceClient, InvalidSessionId, ToolCall
from pipeline.keys import GROUP, Keys
from pipeline.lifecycle import LifecycleError, transition
from pipeline.record import ToFinish, finish_calls
from pipeline.redis_io import Scripts, ensure_group
from pipeline.settings import Settings, SettingsError
from tests.pipeline.helpers import admit, assert_exactly_once, books, loads, running_worker
from tests.pipeline.sources import (
    EmptyLogSource,
    FailingSource,
    GarbageSource,
    HangingSource,
    InstantSource,
)

pytestmark = pytest.mark.redis


def kcall(i: int, query: str = "pool exhausted") -> ToolCall:
    return ToolCall(
        tool="lookup_knowledge", tool_call_id=f"call_{i}", arguments=json.dumps({"query": query})
    )


def settings_for(prefix: str, **kw: Any) -> Settings:
    base: dict[str, Any] = {"prefix": prefix, "visibility_timeout_s": 2.0, "deadline_s": 1.0}
    base.update(kw)
    return Settings(**base)


async def test_lifecycle_rule_is_one_final_transition() -> None:
    assert transition(None, LifecycleStatus.PROJECTING) is LifecycleStatus.PROJECTING
    assert transition(LifecycleStatus.PROJECTING, LifecycleStatus.READY) is LifecycleStatus.READY
    for bad in [
        (None, LifecycleStatus.READY),
        (LifecycleStatus.READY, LifecycleStatus.ERROR),
        (LifecycleStatus.ERROR, LifecycleStatus.READY),
        (LifecycleStatus.PROJECTING, LifecycleStatus.PROJECTING),
    ]:
        with pytest.raises(LifecycleError):
            transition(*bad)


async def test_settings_refuse_a_visibility_timeout_below_the_deadline() -> None:
    with pytest.raises(SettingsError):
        Settings(visibility_timeout_s=5, deadline_s=10)
    with pytest.raises(SettingsError, match="ACI_MAX_ATTEMPTS"):
        Settings.from_env({"ACI_MAX_ATTEMPTS": "x"})
    # Before, these started: every call TIMEOUT, views trimmed away, records expired at once.
    for var, value in [("ACI_DEADLINE_S", "-1"), ("ACI_DEADLINE_S", "0"),
                       ("ACI_RETENTION_S", "0"), ("ACI_STREAM_MAXLEN", "0"),
                       ("ACI_RAW_MAX_BYTES", "-5")]:  # fmt: skip
        with pytest.raises(SettingsError, match=var):
            Settings.from_env({var: value})


async def test_submit_is_idempotent_per_session_and_tool_call_id(redis: Any, prefix: str) -> None:
    settings = settings_for(prefix, admit_here="0")  # requests, as a submitter's
    async with EvidenceClient(redis, settings) as client:
        source = InstantSource()
        await client.submit_many("s1", [kcall(1), kcall(1)])
        await client.submit_many("s1", [kcall(1)])
        # Nothing is an invocation until a worker's admission makes it one.
        assert await redis.exists(Keys(prefix).invocations) == 0
        async with running_worker(redis, settings, {"lookup_knowledge": source}):
            results = await client.call_many("s1", [kcall(1)], timeout=10)
        assert results[0] is not None and results[0].lifecycle is LifecycleStatus.READY
        # Four requests for one (session, id, scope) are admitted as one invocation.
        assert await redis.xlen(Keys(prefix).invocations) == 1
        assert await redis.xlen(Keys(prefix).requests) == 0
        assert source.calls == 1
        assert_exactly_once(await books(redis, prefix, "s1"), ["call_1"])


async def test_every_invocation_has_one_final_state_and_one_of_each_view(
    redis: Any, prefix: str
) -> None:
    settings = settings_for(prefix)
    async with EvidenceClient(redis, settings) as client:
        calls = [kcall(i, "nothing" if i % 3 == 0 else f"q{i}") for i in range(60)]
        calls.append(ToolCall(tool="no_such_tool", tool_call_id="call_x", arguments="{}"))
        calls.append(ToolCall(tool="lookup_knowledge", tool_call_id="call_bad", arguments="{nope"))
        sources = {"lookup_knowledge": InstantSource(0.001), "query_logs": EmptyLogSource()}
        async with running_worker(redis, settings, sources):
            results = await client.call_many("s2", calls, timeout=20)
        assert all(r is not None for r in results)
        by_id = {r.tool_call_id: r for r in results if r is not None}
        assert loads(by_id["call_0"].model)["evidence_status"] == "NO_EVIDENCE"
        assert by_id["call_0"].lifecycle is LifecycleStatus.READY
        assert loads(by_id["call_1"].model)["evidence_status"] == "EVIDENCE_FOUND"
        assert loads(by_id["call_x"].model)["error"]["code"] == "UNKNOWN_TOOL"
        assert loads(by_id["call_bad"].model)["error"]["code"] == "SCHEMA"
        assert by_id["call_bad"].lifecycle is LifecycleStatus.ERROR
        ids = [c.tool_call_id for c in calls]
        assert_exactly_once(await books(redis, prefix, "s2"), ids)
        # The model stream never holds a control field.
        control_only = {"scope_fingerprint", "duplicate_of", "attempts", "timings", "session_id",
                        "returned_count", "match_count", "status"}  # fmt: skip
        for _e, fields in await redis.xrange(Keys(prefix).model("s2"), "-", "+"):
            assert not control_only & set(json.loads(fields[b"d"]))
        # Nothing left pending.
        assert (await redis.xpending(Keys(prefix).invocations, GROUP))["pending"] == 0


async def test_invalid_tool_call_id_is_answered_without_minting_or_enqueueing(
    redis: Any, prefix: str
) -> None:
    async with EvidenceClient(redis, settings_for(prefix)) as client:
        bad = [
            ToolCall(tool="lookup_knowledge", tool_call_id=v, arguments={"query": "x"})
            for v in ["", " ", " a", "a b", "x" * 257, "é", None, 7, "a\nb"]
        ]
        results = await client.call_many("s3", bad, timeout=1)
        for r in results:
            assert r is not None and r.lifecycle is LifecycleStatus.ERROR
            model = loads(r.model)
            assert "tool_call_id" not in model and "tool_call_id" not in loads(r.control)
            assert model["error"]["code"] == "INVALID_TOOL_CALL_ID"
        assert await redis.exists(Keys(prefix).invocations) == 0
        with pytest.raises(InvalidSessionId):
            await client.submit_many("bad session", [kcall(1)])


async def test_duplicate_of_names_the_earliest_submitted_same_scope_call(
    redis: Any, prefix: str
) -> None:
    settings = settings_for(prefix)
    async with EvidenceClient(redis, settings) as client:
        calls = [
            kcall(1, "Pool   exhausted"),
            kcall(2, "pool exhausted"),  # same scope after folding
            kcall(3, "something else"),
            ToolCall(
                tool="lookup_knowledge",
                tool_call_id="call_4",
                arguments={"query": "POOL exhausted"},
            ),
        ]
        async with running_worker(redis, settings, {"lookup_knowledge": InstantSource()}):
            results = await client.call_many("s4", calls, timeout=10)
        controls = {loads(r.control)["tool_call_id"]: loads(r.control) for r in results if r}
        assert "duplicate_of" not in controls["call_1"]
        assert controls["call_2"]["duplicate_of"] == "call_1"
        assert controls["call_4"]["duplicate_of"] == "call_1"
        assert "duplicate_of" not in controls["call_3"]
        assert controls["call_1"]["scope_fingerprint"] == controls["call_2"]["scope_fingerprint"]
        for r in results:
            assert r is not None and "duplicate_of" not in loads(r.model)


async def test_racing_finishers_publish_once(redis: Any, prefix: str) -> None:
    settings = settings_for(prefix)
    keys = Keys(prefix)
    async with EvidenceClient(redis, settings) as client:
        await ensure_group(redis, keys)
        await client.submit_many("s5", [kcall(1)])
        await admit(redis, settings)
        [(_stream, [(entry_id, _fields)])] = await redis.xreadgroup(
            GROUP, "a", {keys.invocations: ">"}, count=1
        )
        scripts = Scripts(redis)
        recorded_scope = await redis.hget(keys.call("s5", "call_1"), "sk")

        async def finish(tag: str) -> int:
            view = json.dumps({"by": tag}).encode()
            keys_, args = finish_calls(
                keys.for_session("s5"),
                [ToFinish(session_id="s5", tool_call_id="call_1", tool="lookup_knowledge",
                          entry_id=entry_id.decode(), status="READY",
                          evidence_status="EVIDENCE_FOUND", result=b"{}", raw=b"null",
                          model=view, control=view, scope_key=recorded_scope.decode())],
                now_ms=1, retention_ms=60_000, maxlen=1000,
            )  # fmt: skip
            [[published]] = await scripts.run(
                lambda pipe: scripts.queue(pipe, scripts.finish_sha, keys_, args)
            )
            return int(published)

        outcomes: list[int] = []

        async def run(tag: str) -> None:
            outcomes.append(await finish(tag))

        async with anyio.create_task_group() as tg:
            for tag in ("a", "b", "c", "d"):
                tg.start_soon(run, tag)
        assert sorted(outcomes) == [0, 0, 0, 1]
        assert await redis.xlen(keys.model("s5")) == 1
        assert await redis.xlen(keys.control("s5")) == 1
        assert (await redis.xpending(keys.invocations, GROUP))["pending"] == 0


async def test_one_finish_script_per_batch_never_stops_halfway(redis: Any, prefix: str) -> None:
    # Three calls finished in one script: the second's call hash has the wrong type (an
    # operator's hand): it alone is left pending, nothing of it written; the others are applied
    # and acked. A partition stream of the wrong type leaves the whole batch as it was.
    settings = settings_for(prefix)
    keys = Keys(prefix)
    part = keys.for_session("s9")
    async with EvidenceClient(redis, settings) as client:
        await ensure_group(redis, keys)
        await client.submit_many("s9", [kcall(i) for i in (1, 2, 3)])
        await admit(redis, settings)
        [(_stream, read)] = await redis.xreadgroup(GROUP, "a", {keys.invocations: ">"}, count=3)
    scripts = Scripts(redis)
    finishes = []
    for entry_id, _fields in read:
        envelope = json.loads(_fields[b"d"])
        sk = await redis.hget(keys.call("s9", envelope["tool_call_id"]), "sk")
        finishes.append(
            ToFinish(
                session_id="s9",
                tool_call_id=envelope["tool_call_id"],
                tool="lookup_knowledge",
                entry_id=entry_id.decode(),
                status="READY",
                evidence_status="EVIDENCE_FOUND",
                result=b"{}",
                raw=b"null",
                model=b"{}",
                control=b"{}",
                scope_key=sk.decode(),
            )
        )
    await redis.rename(keys.lifecycle, keys.lifecycle + ":saved")
    await redis.set(keys.lifecycle, "not a stream")
    keys_, args = finish_calls(part, finishes, now_ms=1, retention_ms=60_000, maxlen=1000)
    [reply] = await scripts.run(lambda pipe: scripts.queue(pipe, scripts.finish_sha, keys_, args))
    assert reply == [-2] and not await redis.exists(keys.model("s9"))
    await redis.delete(keys.lifecycle)
    await redis.rename(keys.lifecycle + ":saved", keys.lifecycle)
    second = keys.call("s9", finishes[1].tool_call_id)
    saved = await redis.hgetall(second)
    await redis.delete(second)
    await redis.set(second, "not a hash")
    [reply] = await scripts.run(lambda pipe: scripts.queue(pipe, scripts.finish_sha, keys_, args))
    assert reply == [1, -2, 1]
    assert await redis.xlen(keys.model("s9")) == 2 and await redis.xlen(keys.control("s9")) == 2
    assert not await redis.exists(keys.result("s9", finishes[1].tool_call_id))
    pending = await redis.xpending_range(keys.invocations, GROUP, "-", "+", 10)
    assert [p["message_id"].decode() for p in pending] == [finishes[1].entry_id]
    assert await redis.pttl(keys.model("s9")) > 0 and await redis.pttl(keys.control("s9")) > 0
    await redis.delete(second)
    await redis.hset(second, mapping=saved)
    [reply] = await scripts.run(lambda pipe: scripts.queue(pipe, scripts.finish_sha, keys_, args))
    assert reply == [0, 1, 0]  # the others were final already: only acked
    assert (await redis.xpending(keys.invocations, GROUP))["pending"] == 0


async def test_deadline_ends_in_timeout(redis: Any, prefix: str) -> None:
    settings = settings_for(prefix, deadline_s=0.3)
    async with EvidenceClient(redis, settings) as client:
        async with running_worker(redis, settings, {"lookup_knowledge": HangingSource()}):
            [result] = await client.call_many("s6", [kcall(1)], timeout=10)
        assert result is not None and result.lifecycle is LifecycleStatus.ERROR
        assert loads(result.model)["error"]["code"] == "TIMEOUT"


@pytest.mark.parametrize(
    ("source", "code"), [(GarbageSource(), "PROJECTION"), (FailingSource(), "UNAVAILABLE")]
)
async def test_source_failures_are_errors_never_no_evidence(
    redis: Any, prefix: str, source: Any, code: str
) -> None:
    settings = settings_for(prefix)
    async with EvidenceClient(redis, settings) as client:
        async with running_worker(redis, settings, {"lookup_knowledge": source}):
            [result] = await client.call_many("s7", [kcall(1)], timeout=10)
        assert result is not None
        model = loads(result.model)
        assert model["evidence_status"] == "ERROR" and model["error"]["code"] == code


async def test_a_missing_source_is_unavailable_not_no_evidence(redis: Any, prefix: str) -> None:
    settings = settings_for(prefix)
    async with EvidenceClient(redis, settings) as client:
        call = ToolCall(tool="query_mysql", tool_call_id="m1",
                        arguments={"data_source": "shop", "sql": "SELECT 1"})  # fmt: skip
        async with running_worker(redis, settings, {}):
            [result] = await client.call_many("s8", [call], timeout=10)
        assert result is not None and loads(result.model)["error"]["code"] == "UNAVAILABLE"


async def test_poison_entry_gives_up_after_max_attempts(redis: Any, prefix: str) -> None:
    settings = settings_for(prefix, visibility_timeout_s=0.4, deadline_s=0.2, max_attempts=2)
    keys = Keys(prefix)
    async with EvidenceClient(redis, settings) as client:
        await ensure_group(redis, keys)
        await client.submit_many("s9", [kcall(1)])
        await admit(redis, settings)
        # Three deliveries to consumers that die before finishing.
        await redis.xreadgroup(GROUP, "dead-1", {keys.invocations: ">"}, count=1)
        for name in ("dead-2", "dead-3"):
            await anyio.sleep(0.45)
            await redis.xautoclaim(keys.invocations, GROUP, name, 400, "0-0", count=10)
        await anyio.sleep(0.45)
        async with running_worker(redis, settings, {"lookup_knowledge": InstantSource()}):
            result = None
            with anyio.fail_after(10):
                while result is None:
                    result = await client.result("s9", "call_1")
                    await anyio.sleep(0.05)
        model = loads(result.model)
        assert model["error"]["code"] == "GAVE_UP"
        assert loads(result.control)["attempts"] == 4
        assert_exactly_once(await books(redis, prefix, "s9"), ["call_1"])


async def test_client_timeout_never_loses_the_result(redis: Any, prefix: str) -> None:
    settings = settings_for(prefix)
    async with EvidenceClient(redis, settings) as client:
        [pending] = await client.call_many("s10", [kcall(1)], timeout=0.1)
        assert pending is None
        assert await client.result("s10", "call_1") is None
        async with running_worker(redis, settings, {"lookup_knowledge": InstantSource()}):
            await client.wait("s10", ["call_1"], 10)
        final = await client.result("s10", "call_1")
        assert final is not None
        as_json = msgspec.json.decode(final.as_json())
        assert as_json["lifecycle"] == "READY" and as_json["model"]["tool_call_id"] == "call_1"


async def test_concurrent_waits_on_one_id_are_independent(redis: Any, prefix: str) -> None:
    settings = settings_for(prefix)
    async with EvidenceClient(redis, settings) as client:
        await client.submit_many("s11", [kcall(1)])
        long_wait: dict[str, Any] = {}
        finished = anyio.Event()

        async def wait_long() -> None:
            long_wait.update(await client.wait("s11", ["call_1"], 10))
            finished.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_long)
            assert await client.wait("s11", ["call_1"], 0.2) == {}  # leaves first
            async with running_worker(redis, settings, {"lookup_knowledge": InstantSource()}):
                with anyio.fail_after(10):
                    await finished.wait()
        assert long_wait["call_1"].lifecycle is LifecycleStatus.READY


async def test_what_a_client_remembers_of_its_calls_is_no_work_for_the_collector(
    redis: Any, prefix: str
) -> None:
    # The scope key of every call a client submitted is kept (up to 65,536) for its readers'
    # checks: as tuples, each call counted towards the collector's next pass, and a full pass
    # fell into every paced benchmark run. Strings are not tracked.
    import gc

    settings = Settings(prefix=prefix, admit_here="0")
    async with EvidenceClient(redis, settings) as client:
        for session in ("s", "s-2", "s.x"):
            calls = [
                ToolCall(tool="lookup_knowledge", tool_call_id=f"{session}_{i}",
                         arguments={"query": f"q {i}"})
                for i in range(3)
            ]  # fmt: skip
            assert await client.submit_many(session, calls) == [None] * 3
        assert not any(gc.is_tracked(k) or gc.is_tracked(v) for k, v in client._asked.items())
        keys = client.scope_keys("s")
        assert sorted(keys) == ["s_0", "s_1", "s_2"]  # not s-2's, not s.x's
        assert all(len(v) == 32 for v in keys.values())
        assert client._expect("s-2", "s-2_1") == client.scope_keys("s-2")["s-2_1"].encode()
        assert client._expect("s", "s-2_1") is None


async def test_a_cancelled_wait_leaves_no_waiter_and_no_listener(redis: Any, prefix: str) -> None:
    async with EvidenceClient(redis, settings_for(prefix)) as client:
        with anyio.move_on_after(0):
            await client.wait("s12", ["x"], 5)
        with anyio.move_on_after(0.05):
            await client.wait("s12", ["y"], 5)
        await anyio.sleep(1.5)  # a listener with no waiter ends after its blocking read
        assert not client._listeners


async def test_an_envelope_of_another_contract_version_still_finishes_as_error(
    redis: Any, prefix: str
) -> None:
    settings = settings_for(prefix)
    keys = Keys(prefix)
    envelope = {"v": 99, "session_id": "s13", "tool": "lookup_knowledge",
                "tool_call_id": "call_1", "arguments": "{}", "submitted_at_ms": 1}  # fmt: skip
    await ensure_group(redis, keys)
    # The call as a submit of that version recorded it: its state names its stream entry.
    entry_id = await redis.xadd(keys.invocations, {"d": json.dumps(envelope), "dup": ""})
    await redis.hset(keys.call("s13", "call_1"), mapping={"st": "PROJECTING", "eid": entry_id})
    async with (
        EvidenceClient(redis, settings) as client,
        running_worker(redis, settings, {"lookup_knowledge": InstantSource()}),
    ):
        found = await client.wait("s13", ["call_1"], 10)
    model = loads(found["call_1"].model)
    assert model["error"]["code"] == "EXECUTION"
    assert "contract version 99" in model["error"]["message"]
    assert await redis.xlen(keys.dead) == 1


async def test_a_worker_survives_its_stream_being_deleted(redis: Any, prefix: str) -> None:
    settings = settings_for(prefix)
    async with (
        EvidenceClient(redis, settings) as client,
        running_worker(redis, settings, {"lookup_knowledge": InstantSource()}),
    ):
        assert (await client.call_many("s14", [kcall(1)], timeout=10))[0] is not None
        await redis.delete(Keys(prefix).invocations)  # the group goes with it
        await anyio.sleep(1.2)
        [again] = await client.call_many("s14", [kcall(2)], timeout=10)
    assert again is not None and again.lifecycle is LifecycleStatus.READY
