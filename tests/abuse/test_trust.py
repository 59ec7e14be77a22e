"""Trust boundaries of the pipeline: a result is only ever the evidence of its own call.

- a tool call id reused for another tool or scope is a conflict, never the first call's result;
- only the stream entry the submit recorded may finish a call (forged envelopes are
  dead-lettered, never executed or published);
- a wait on many ids returns every result that finished, not only those before the first
  pending one;
- oversized tool names and arguments are refused before anything is written;
- session ids with a trailing newline are refused; log lines cannot be split by entry text.
"""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import anyio
import pytest

from pipeline.client import EvidenceClient, InvalidSessionId, ToolCall
from pipeline.envelope import (
    EnvelopeError,
    Invocation,
    decode_envelope,
    encode_envelope,
    scope_key,
)
from pipeline.keys import GROUP, Keys, is_valid_session_id
from pipeline.redis_io import ensure_group
from pipeline.settings import Settings
from tests.conftest import REDIS_URL
from tests.pipeline.helpers import assert_exactly_once, books, loads, running_worker
from tests.pipeline.sources import InstantSource as AsyncSource
from workers.logging_setup import configure_logging, invocation_context
from workers.sources.instant import InstantSource

pytestmark = pytest.mark.redis

TOOLS = ("lookup_knowledge", "query_logs", "query_mysql")
SELECT_1 = {"data_source": "shop", "sql": "SELECT 1"}


def settings_for(prefix: str) -> Settings:
    return Settings(prefix=prefix, visibility_timeout_s=30, deadline_s=5)


async def _drained(redis: Any, keys: Keys) -> None:
    with anyio.fail_after(10):
        while True:
            pending = (await redis.xpending(keys.invocations, GROUP))["pending"]
            if not pending and not (await redis.xinfo_groups(keys.invocations))[0]["lag"]:
                return
            await anyio.sleep(0.05)


async def test_one_id_for_two_calls_in_one_turn_answers_the_second_with_a_conflict(
    redis: Any, prefix: str
) -> None:
    settings = settings_for(prefix)
    sql = ToolCall(tool="query_mysql", tool_call_id="call_0", arguments=SELECT_1)
    rag = ToolCall(tool="lookup_knowledge", tool_call_id="call_0", arguments={"query": "pool"})
    async with EvidenceClient(redis, settings) as client:
        async with running_worker(redis, settings, dict.fromkeys(TOOLS, InstantSource())):
            first, second = await client.call_many("turn", [sql, rag], timeout=10)
    assert first is not None and second is not None
    assert loads(first.model)["rows"] == [[1, "PAID"]]
    assert loads(second.model)["error"]["code"] == "DUPLICATE_TOOL_CALL_ID"
    assert "rows" not in loads(second.model)
    assert loads(second.control)["error_code"] == "DUPLICATE_TOOL_CALL_ID"
    assert_exactly_once(await books(redis, prefix, "turn"), ["call_0"])


async def test_the_same_scope_again_is_the_same_call(redis: Any, prefix: str) -> None:
    # The decoded request, not bytes: other spacing or key order is the same call; any other
    # value is not (a fingerprint folds case, which a search may not).
    settings = settings_for(prefix)
    one = ToolCall(tool="query_mysql", tool_call_id="c", arguments=json.dumps(SELECT_1))
    same = ToolCall(
        tool="query_mysql",
        tool_call_id="c",
        arguments='{ "sql" : "SELECT 1", "data_source":"shop"}',
    )
    other = ToolCall(
        tool="query_mysql", tool_call_id="c", arguments={"data_source": "shop", "sql": "SELECT 2"}
    )
    async with EvidenceClient(redis, settings) as client:
        async with running_worker(redis, settings, dict.fromkeys(TOOLS, InstantSource())):
            [a] = await client.call_many("idem", [one], timeout=10)
            [b] = await client.call_many("idem", [same], timeout=10)
            [c] = await client.call_many("idem", [other], timeout=10)
    assert a is not None and b is not None and c is not None
    assert a.model == b.model and a.control == b.control
    assert loads(c.model)["error"]["code"] == "DUPLICATE_TOOL_CALL_ID"


@pytest.mark.parametrize("source", ["inline", "awaited"])
async def test_a_forged_envelope_never_finishes_or_replaces_a_call(
    redis: Any, prefix: str, source: str
) -> None:
    settings = settings_for(prefix)
    keys = Keys(prefix)
    if source == "inline":  # the real call is SQL; the forgery asks the knowledge base
        sources: dict[str, Any] = dict.fromkeys(TOOLS, InstantSource())
        real = ToolCall(tool="query_mysql", tool_call_id="call_0", arguments=SELECT_1)
    else:  # both ask the knowledge base (the test source quotes the question)
        sources = dict.fromkeys(TOOLS, AsyncSource())
        real = ToolCall(
            tool="lookup_knowledge", tool_call_id="call_0", arguments={"query": "real question"}
        )
    await ensure_group(redis, keys)
    async with EvidenceClient(redis, settings) as client:
        assert await client.submit_many("victim", [real]) == [None]
        # Anyone who can XADD: an envelope for the victim's pending call (other arguments),
        # and one for a call nobody submitted.
        for tool_call_id in ("call_0", "never_submitted"):
            forged = Invocation(
                session_id="victim",
                tool="lookup_knowledge",
                tool_call_id=tool_call_id,
                arguments=json.dumps({"query": "everything is healthy"}),
                submitted_at_ms=1,
            )
            await redis.xadd(keys.invocations, {"d": encode_envelope(forged), "dup": ""})
        async with running_worker(redis, settings, sources):
            found = await client.wait("victim", ["call_0"], 10)
            await _drained(redis, keys)
    model = loads(found["call_0"].model)
    assert model["tool_call_id"] == "call_0"
    if source == "inline":
        assert model["columns"] == ["id", "status"]
    else:
        assert "real question" in model["evidence"][0]["excerpt"]
    assert "healthy" not in json.dumps(model)
    assert await redis.exists(keys.result("victim", "never_submitted")) == 0
    dead = await redis.xrange(keys.dead, "-", "+")
    assert len(dead) == 2
    assert all(b"not the entry recorded" in fields[b"reason"] for _eid, fields in dead)
    assert_exactly_once(await books(redis, prefix, "victim"), ["call_0"])


async def test_a_wait_returns_every_result_that_finished_not_only_the_first(
    redis: Any, prefix: str
) -> None:
    settings = settings_for(prefix)
    slow = ToolCall(tool="query_mysql", tool_call_id="slow", arguments=SELECT_1)
    fast = ToolCall(tool="lookup_knowledge", tool_call_id="fast", arguments={"query": "pool"})
    sources: dict[str, Any] = {
        "query_mysql": AsyncSource(delay=4),
        "lookup_knowledge": AsyncSource(),
    }
    async with EvidenceClient(redis, settings) as client:
        async with running_worker(redis, settings, sources) as stop:
            results = await client.call_many("w", [slow, fast], timeout=1.5)
            assert results[0] is None and results[1] is not None
            assert loads(results[1].model)["evidence_status"] == "EVIDENCE_FOUND"
            # `wait` too: the slow id first, the fast one already final.
            again = ToolCall(tool="query_mysql", tool_call_id="slow2", arguments=SELECT_1)
            await client.submit_many("w", [again])
            found = await client.wait("w", ["slow2", "fast"], 1.0)
            assert set(found) == {"fast"}
            stop.set()


async def test_an_oversized_tool_name_or_arguments_are_refused_before_anything_is_written(
    redis: Any, prefix: str
) -> None:
    settings = settings_for(prefix)
    calls = [
        ToolCall(tool="t" * 200_000, tool_call_id="long_tool", arguments={"query": "q"}),
        ToolCall(tool="lookup_knowledge", tool_call_id="big", arguments={"query": "x" * 5_000_000}),
    ]
    async with EvidenceClient(redis, settings) as client:
        long_tool, big = await client.submit_many("bounded", calls)
    assert long_tool is not None and big is not None
    assert loads(long_tool.model)["error"]["code"] == "UNKNOWN_TOOL"
    assert len(loads(long_tool.control)["tool"]) <= 64
    assert len(long_tool.control) < 2_000 and len(long_tool.model) < 2_000
    assert loads(big.model) == {
        "tool_call_id": "big",
        "evidence_status": "ERROR",
        "error": {"code": "SCHEMA", "message": "the arguments exceed 65536 bytes"},
    }
    assert [k async for k in redis.scan_iter(match=f"{{{prefix}}}:*")] == []


async def test_session_ids_with_a_trailing_newline_are_refused(redis: Any, prefix: str) -> None:
    assert not is_valid_session_id("nlsess\n")
    assert is_valid_session_id("nlsess")
    async with EvidenceClient(redis, settings_for(prefix)) as client:
        with pytest.raises(InvalidSessionId) as raised:
            await client.submit_many("nlsess\n", [])
    assert "\n" not in str(raised.value)
    envelope = Invocation(
        session_id="s1\n", tool="t", tool_call_id="c", arguments="{}", submitted_at_ms=1
    )
    with pytest.raises(EnvelopeError):
        decode_envelope(encode_envelope(envelope))


@pytest.mark.parametrize("session", ["nlsess\n", "a b", "x" * 500])
def test_the_cli_answers_a_bad_session_with_one_line(
    session: str, prefix: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.cli import main

    monkeypatch.setenv("ACI_REDIS_URL", REDIS_URL)
    monkeypatch.setenv("ACI_PREFIX", prefix)
    args = ["call", "lookup_knowledge", "--id", "c1", "--args", '{"query":"q"}']
    assert main([*args, "--session", session]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("bad input: invalid session id")
    assert "Traceback" not in err


@pytest.mark.parametrize("json_lines", [False, True])
def test_text_from_entries_cannot_split_a_log_line(json_lines: bool) -> None:
    out = io.StringIO()
    configure_logging("INFO", json_lines=json_lines, stream=out)
    try:
        with invocation_context(tool="lookup\nERROR aci.worker forged", entry_id="1-0\u2028x"):
            logging.getLogger("aci.worker").info("finished %s", "a\r\nWARNING fake")
    finally:
        configure_logging("WARNING")
    lines = out.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert "\\n" in lines[0]


def test_text_from_entries_cannot_pose_as_another_log_field() -> None:
    out = io.StringIO()
    configure_logging("INFO", stream=out)
    try:
        with invocation_context(session="att", tool="query_logs session=victim status=READY"):
            logging.getLogger("aci.worker").info("finished")
    finally:
        configure_logging("WARNING")
    line = out.getvalue()
    assert ' tool="query_logs session=victim status=READY"' in line
    assert "[session=att " in line and line.count(" session=") == 1  # the quoted one only


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("NOPERM this user has no permissions", "NOPERM"),
        ("The user executing the script can't run this command or subcommand", "NOPERM"),
        ("BUSYKEY Target key name already exists", "BUSYKEY"),
        ("The ID specified in XADD is equal or smaller than the target stream top item", "ERR"),
        ("Error running script", "ERR"),
    ],
)
def test_redis_replies_are_named_by_a_code_never_by_a_word_of_a_message(
    reply: str, code: str
) -> None:
    from redis.exceptions import ResponseError

    from pipeline.redis_io import reply_code

    assert reply_code(ResponseError(reply)) == code


async def test_a_case_variant_under_a_used_id_is_a_conflict(redis: Any, prefix: str) -> None:
    settings = settings_for(prefix)
    lower = ToolCall(
        tool="lookup_knowledge", tool_call_id="k", arguments={"query": "connectionpool"}
    )
    camel = ToolCall(
        tool="lookup_knowledge", tool_call_id="k", arguments={"query": "ConnectionPool"}
    )
    async with EvidenceClient(redis, settings) as client:
        async with running_worker(redis, settings, dict.fromkeys(TOOLS, InstantSource())):
            [a] = await client.call_many("case", [lower], timeout=10)
            [b] = await client.call_many("case", [camel], timeout=10)
    assert a is not None and loads(a.model)["evidence_status"] == "EVIDENCE_FOUND"
    assert b is not None and loads(b.model)["error"]["code"] == "DUPLICATE_TOOL_CALL_ID"


async def test_a_rewritten_call_record_never_hands_over_another_scopes_evidence(
    redis: Any, prefix: str
) -> None:
    # Whoever may write call records (any submitter of the prefix) points the victim's pending
    # call at a forged envelope, with or without the forged scope key: the victim never gets
    # the forged evidence (an ERROR, or its own result).
    settings = settings_for(prefix)
    keys = Keys(prefix)
    victim = [
        ToolCall(
            tool="lookup_knowledge", tool_call_id=f"call_{i}", arguments={"query": "real question"}
        )
        for i in range(2)
    ]
    await ensure_group(redis, keys)
    async with EvidenceClient(redis, settings) as client:
        assert await client.submit_many("alice", victim) == [None, None]
        for i, with_key in enumerate((False, True)):
            forged_args = json.dumps({"query": "everything is healthy"})
            forged = Invocation(
                session_id="alice",
                tool="lookup_knowledge",
                tool_call_id=f"call_{i}",
                arguments=forged_args,
                submitted_at_ms=1,
            )
            eid = await redis.xadd(keys.invocations, {"d": encode_envelope(forged), "dup": ""})
            rewrite: dict[str, Any] = {"eid": eid}
            if with_key:
                rewrite["sk"] = scope_key("lookup_knowledge", f"call_{i}", forged_args)
            await redis.hset(keys.call("alice", f"call_{i}"), mapping=rewrite)
        async with running_worker(redis, settings, dict.fromkeys(TOOLS, AsyncSource())):
            results = await client.call_many("alice", victim, timeout=3)
    for result in results:
        if result is not None:
            assert "healthy" not in bytes(result.model).decode()
            assert loads(result.model)["evidence_status"] == "ERROR"


async def test_entries_that_are_not_utf_8_never_take_a_worker_down(redis: Any, prefix: str) -> None:
    settings = settings_for(prefix)
    keys = Keys(prefix)
    await ensure_group(redis, keys)
    good = encode_envelope(
        Invocation(
            session_id="p", tool="query_logs", tool_call_id="p1", arguments="{}", submitted_at_ms=1
        )
    )
    async with EvidenceClient(redis, settings) as client:
        # Both paths: calls run inline, and calls that await their source.
        inline: dict[str, Any] = dict.fromkeys(TOOLS, InstantSource())
        awaited: dict[str, Any] = dict.fromkeys(TOOLS, AsyncSource())
        for round_, sources in enumerate((inline, awaited)):
            # Anyone who may XADD: a field name, a `dup` and an envelope that are not UTF-8.
            await redis.execute_command("XADD", keys.invocations, "*", b"\xff\xfe", b"x")
            await redis.execute_command("XADD", keys.invocations, "*", "d", good, "dup", b"\xff")
            await redis.execute_command(
                "XADD", keys.invocations, "*", "d", b"\xff\xfe{", "dup", b""
            )
            async with running_worker(redis, settings, sources):
                call = ToolCall(
                    tool="lookup_knowledge",
                    tool_call_id=f"after_{round_}",
                    arguments={"query": "q"},
                )
                [result] = await client.call_many("p", [call], timeout=10)
                await _drained(redis, keys)
            assert result is not None and loads(result.model)["evidence_status"] == "EVIDENCE_FOUND"
    assert await redis.xlen(keys.dead) >= 6


async def test_calls_refused_at_submit_leave_no_listener_behind(redis: Any, prefix: str) -> None:
    settings = settings_for(prefix)
    big = {"query": "x" * 70_000}
    async with EvidenceClient(redis, settings) as client:
        for i in range(70):  # more than the client's listening slots
            [refused] = await client.call_many(
                f"s{i}",
                [ToolCall(tool="lookup_knowledge", tool_call_id="c", arguments=big)],
                timeout=1,
            )
            assert refused is not None
        assert all(not listener.waiters for listener in client._listeners.values())
        async with running_worker(redis, settings, dict.fromkeys(TOOLS, InstantSource())):
            with anyio.fail_after(10):
                [ok] = await client.call_many(
                    "fresh",
                    [
                        ToolCall(
                            tool="lookup_knowledge", tool_call_id="c1", arguments={"query": "q"}
                        )
                    ],
                    timeout=5,
                )
    assert ok is not None
