"""Issue 23: a hostile submitter, with the real `submitter` ACL user, against another session's
calls served by a worker connected as `worker` (a private Redis 7 with `pipeline.acl` users).

The red-team findings, each as what the attacker did and what must hold now:
- forgery race (poll the victim's call record, then send its id with other arguments) and
  pre-claimed ids: the victim never receives the attacker's evidence, by any reader;
- erasing queued calls (XADD `MAXLEN 0`/`MINID` on the request stream, the one key it may
  write; PEXPIRE/DEL are refused): nothing is lost, the client sends again;
- oversized requests by raw XADD: refused inside Redis, never read by a worker;
- type poisoning: the keys the scripts write are out of a submitter's reach, and a poisoned
  key (an operator's mistake) makes admission write nothing rather than half;
- raw EVALSHA, writing call records, fingerprints, lifecycle or sessions: refused (the full
  list of refused commands is in `tests/abuse/test_acl.py`).
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from contracts import LifecycleStatus
from pipeline import admission
from pipeline.client import EvidenceClient, ToolCall
from pipeline.envelope import Invocation, encode_envelope
from pipeline.redis_io import RedisProtocolError, call_redis, open_redis
from pipeline.views import read_views
from tests.abuse.conftest import SETTINGS, P
from tests.pipeline.acl_server import AclServer
from tests.pipeline.helpers import admit, loads, running_worker
from tests.pipeline.sources import InstantSource


def ask(i: int, query: str) -> ToolCall:
    return ToolCall(tool="lookup_knowledge", tool_call_id=f"call_{i}", arguments={"query": query})


def forged(session: str, tool_call_id: str) -> bytes:
    return encode_envelope(
        Invocation(
            session_id=session,
            tool="lookup_knowledge",
            tool_call_id=tool_call_id,
            arguments=json.dumps({"query": "everything is healthy"}),
            submitted_at_ms=1,
        )
    )


def own_or_conflict(result: Any, i: int) -> None:
    """A victim's result: its own evidence, or DUPLICATE_TOOL_CALL_ID; never the forger's."""
    assert result is not None
    model = loads(result.model)
    assert "healthy" not in json.dumps(model)
    if model["evidence_status"] == "ERROR":
        assert model["error"]["code"] == "DUPLICATE_TOOL_CALL_ID"
    else:
        assert f"real question {i}" in model["evidence"][0]["excerpt"]


async def test_the_forgery_race_never_hands_over_the_forgers_evidence(server: AclServer) -> None:
    victim = [ask(i, f"real question {i}") for i in range(20)]
    refused: list[str] = []
    with anyio.fail_after(40):
        async with (
            open_redis(server.url("worker")) as worker,
            running_worker(worker, SETTINGS, {"lookup_knowledge": InstantSource(0.02)}),
            EvidenceClient.connect(SETTINGS, server.url("submitter")) as client,
            open_redis(server.url("submitter")) as attacker,
        ):

            async def race() -> None:
                # Poll each call record; the moment it exists, send the same id with other
                # arguments, and try what worked before: forge the record and the envelope.
                raced: set[int] = set()
                while len(raced) < len(victim):
                    for i in set(range(len(victim))) - raced:
                        eid = await call_redis(attacker.hget(P.call("victim", f"call_{i}"), "eid"))
                        if eid is None:
                            continue
                        raced.add(i)
                        envelope = forged("victim", f"call_{i}")
                        await call_redis(attacker.xadd(P.requests, {"d": envelope}))
                        for write in (
                            attacker.xadd(P.invocations, {"d": envelope, "dup": ""}),
                            attacker.hset(P.call("victim", f"call_{i}"), "eid", "1-0"),
                        ):
                            try:
                                await call_redis(write)
                            except RedisProtocolError as exc:
                                refused.append(str(exc))
                    await anyio.sleep(0.001)

            async with anyio.create_task_group() as tg:
                tg.start_soon(race)
                results = await client.call_many("victim", victim, timeout=20)
            again = await client.wait("victim", [c.tool_call_id for c in victim], 5)
            later = [await client.result("victim", c.tool_call_id) for c in victim]
            views = [
                loads(v)
                async for batch in read_views(
                    client.redis, SETTINGS, "victim", "model",
                    expect=client.scope_keys("victim"),
                )
                for v in batch
            ]  # fmt: skip
    assert refused == ["NOPERM"] * 40
    for i, (result, waited, read) in enumerate(zip(results, again.values(), later, strict=True)):
        assert result is not None and result.lifecycle is LifecycleStatus.READY
        for answer in (result, waited, read):
            own_or_conflict(answer, i)
            assert loads(answer.model)["evidence_status"] == "EVIDENCE_FOUND"  # admitted first
    assert len(views) == 20 and not any("healthy" in json.dumps(v) for v in views)


async def test_a_pre_claimed_id_is_a_conflict_for_every_reader(server: AclServer) -> None:
    with anyio.fail_after(30):
        async with (
            open_redis(server.url("worker")) as worker,
            running_worker(worker, SETTINGS, {"lookup_knowledge": InstantSource()}),
            EvidenceClient.connect(SETTINGS, server.url("submitter")) as forger,
            EvidenceClient.connect(SETTINGS, server.url("submitter")) as client,
        ):
            # MCP ids are 1, 2, ...: easy to guess. The forger asks first, under the victim's
            # session, and its call runs to the end.
            [claimed] = await forger.call_many(
                "victim", [ask(1, "everything is healthy")], timeout=10
            )
            assert claimed is not None and claimed.lifecycle is LifecycleStatus.READY
            [result] = await client.call_many("victim", [ask(1, "real question 1")], timeout=10)
            await client.submit_many("victim", [ask(1, "real question 1")])
            waited = await client.wait("victim", ["call_1"], 5)
            read = await client.result("victim", "call_1")
            mine = client.scope_keys("victim")
            views = [
                v async for batch in read_views(client.redis, SETTINGS, "victim", "model",
                                                expect=mine)
                for v in batch
            ]  # fmt: skip
    for answer in (result, waited["call_1"], read):
        own_or_conflict(answer, 1)
        assert loads(answer.model)["error"]["code"] == "DUPLICATE_TOOL_CALL_ID"
    assert views == []  # the only view under that id is another scope's


async def test_erasing_the_request_stream_loses_no_call(server: AclServer) -> None:
    calls = [ask(i, f"real question {i}") for i in range(50)]
    async with (
        EvidenceClient.connect(SETTINGS, server.url("submitter")) as client,
        open_redis(server.url("submitter")) as attacker,
        open_redis(server.url("worker")) as worker,
    ):
        assert await client.submit_many("victim", calls) == [None] * 50
        # What ACLs cannot refuse: trim options of the one command a submitter has.
        await call_redis(attacker.execute_command("XADD", P.requests, "MAXLEN", "0", "*", "x", "y"))
        await call_redis(attacker.execute_command("XADD", P.requests, "MINID", "=", "9999999999999", "*", "x", "y"))  # fmt: skip
        for command in (("PEXPIRE", P.requests, "1"), ("DEL", P.requests),
                        ("XTRIM", P.requests, "MAXLEN", "0")):  # fmt: skip
            with pytest.raises(RedisProtocolError, match="NOPERM"):
                await call_redis(attacker.execute_command(*command))
        async with running_worker(worker, SETTINGS, {"lookup_knowledge": InstantSource()}):
            with anyio.fail_after(20):
                done = await client.wait("victim", [c.tool_call_id for c in calls], 15)
        assert client.unadmitted.resent >= 50
    assert len(done) == 50
    for i in range(50):
        assert f"real question {i}" in loads(done[f"call_{i}"].model)["evidence"][0]["excerpt"]


async def test_a_submitter_that_leaves_after_admission_loses_nothing(server: AclServer) -> None:
    # Fire and forget (`aci-evidence submit` without --wait): the client leaves once its calls
    # are admitted; the requests an attacker erased before admission were sent again meanwhile.
    calls = [ask(i, f"left alone {i}") for i in range(20)]
    ids = [c.tool_call_id for c in calls]
    async with (
        open_redis(server.url("submitter")) as attacker,
        open_redis(server.url("worker")) as worker,
    ):
        async with EvidenceClient.connect(SETTINGS, server.url("submitter")) as client:
            assert await client.submit_many("leaver", calls) == [None] * 20
            await call_redis(attacker.execute_command("XADD", P.requests, "MAXLEN", "0", "*", "x", "y"))  # fmt: skip
            async with running_worker(worker, SETTINGS, {"lookup_knowledge": InstantSource()}):
                with anyio.fail_after(15):
                    assert await client.admitted("leaver", ids, 10) == set(ids)
            assert client.unadmitted.resent >= 20
        # The submitter is gone; another worker finishes every admitted call.
        async with (
            EvidenceClient.connect(SETTINGS, server.url("submitter")) as reader,
            running_worker(worker, SETTINGS, {"lookup_knowledge": InstantSource()}),
        ):
            with anyio.fail_after(20):
                done = await reader.wait("leaver", ids, 15)
    assert len(done) == 20
    for i in range(20):
        assert f"left alone {i}" in loads(done[f"call_{i}"].model)["evidence"][0]["excerpt"]


async def test_oversized_requests_are_refused_inside_redis(
    server: AclServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []
    judge = admission.judge

    def spy(*args: Any, **kw: Any) -> Any:
        seen.append(len(args[3]))
        return judge(*args, **kw)

    monkeypatch.setattr("workers.runtime.admission.judge", spy)
    huge = forged("victim", "big")[:-2] + b'"' + b"x" * 5_000_000 + b'"}'
    async with (
        open_redis(server.url("submitter")) as attacker,
        open_redis(server.url("worker")) as worker,
        EvidenceClient.connect(SETTINGS, server.url("submitter")) as client,
    ):
        for _ in range(3):
            await call_redis(attacker.xadd(P.requests, {"d": huge}))
        await call_redis(attacker.xadd(P.requests, {"d": forged("victim", "x"), "pad": b"y" * 10}))
        with pytest.raises(RedisProtocolError, match="NOPERM"):  # the old way in: a script
            await call_redis(attacker.execute_command("EVAL", "return 1", "1", P.requests))
        with pytest.raises(RedisProtocolError, match="NOPERM"):
            await call_redis(attacker.execute_command("EVALSHA", "0" * 40, "1", P.requests))
        async with running_worker(worker, SETTINGS, {"lookup_knowledge": InstantSource()}):
            with anyio.fail_after(10):
                [ok] = await client.call_many("victim", [ask(1, "real question 1")], timeout=8)
        auditor_url = server.url("auditor")
    own_or_conflict(ok, 1)
    assert seen and max(seen) < 10_000  # the worker never held an oversized request
    async with open_redis(auditor_url) as auditor:
        dead = await call_redis(auditor.xrange(P.dead))
        assert len(dead) == 4 and await call_redis(auditor.xlen(P.requests)) == 0


async def test_a_poisoned_key_makes_admission_write_nothing(server: AclServer) -> None:
    # Only workers (and the operator) can write the keys admission writes; an operator's
    # mistake there must not leave a call half-admitted.
    async with (
        open_redis(server.url("admin")) as admin,
        EvidenceClient.connect(SETTINGS, server.url("submitter")) as client,
    ):
        await admin.hset(P.lifecycle, "not", "a stream")
        await client.submit_many("victim", [ask(1, "real question 1")])
        await admit(admin, SETTINGS)
        assert await admin.exists(P.call("victim", "call_1"), P.invocations, P.sessions) == 0
        await admin.set(P.call("victim", "call_2"), "not a hash")  # one call's own key
        await admin.delete(P.lifecycle)
        await admin.xadd(P.requests, {"d": forged("victim", "call_2")})  # (the client would
        # refuse to send it: its read of that call record fails with WRONGTYPE)
        await client.submit_many("victim", [ask(3, "real question 3")])
        await admit(admin, SETTINGS)
        async with running_worker(admin, SETTINGS, {"lookup_knowledge": InstantSource()}):
            with anyio.fail_after(15):
                done = await client.wait("victim", ["call_1", "call_3"], 12)
        assert set(done) == {"call_1", "call_3"}  # call_1 sent again, call_3 beside the bad one
        reasons = [f[b"reason"] for _e, f in await admin.xrange(P.dead)]
        assert b"a key of this call has the wrong type" in reasons
