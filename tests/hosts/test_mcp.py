"""The MCP server: golden wire shapes, the stdio server end to end (SDK client against a
subprocess `aci-evidence mcp --local`), and the queue mode in process.

Regenerate the golden files with `UPDATE_GOLDEN=1 pytest tests/hosts/test_mcp.py`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import msgspec
import pytest

from contracts import export_tools
from hosts import mcp_server
from hosts.mcp_server import TOOL_CALL_ID_META_KEY, call_tool_result, list_tools_result, read_call
from pipeline.client import EvidenceClient, ToolCall
from pipeline.keys import Keys, is_valid_session_id
from pipeline.record import lifecycle_entry
from pipeline.settings import Settings
from tests.hosts.test_adapters import CONTROL_ONLY, GatedSource, check_golden, golden_turn
from tests.pipeline.helpers import running_worker

mcp = pytest.importorskip("mcp")

REPO = Path(__file__).resolve().parents[2]
ANNOTATIONS = {
    "readOnlyHint": True,
    "destructiveHint": False,
    "idempotentHint": True,
    "openWorldHint": False,
}


def test_key_is_reverse_dns_and_not_reserved() -> None:
    prefix, _, name = TOOL_CALL_ID_META_KEY.partition("/")
    assert (prefix, name) == ("dev.aci-evidence", "tool_call_id")
    assert prefix.split(".")[1] not in {"modelcontextprotocol", "mcp"}


def test_read_call_takes_the_id_from_meta_only() -> None:
    call = read_call(
        "query_logs", {"topic": "APPLICATION", "query": ""}, {TOOL_CALL_ID_META_KEY: "c1"}
    )
    assert call == ToolCall(
        tool="query_logs", tool_call_id="c1", arguments={"topic": "APPLICATION", "query": ""}
    )
    assert read_call("query_logs", None, None).tool_call_id is None
    assert read_call("query_logs", None, None).arguments == {}
    assert read_call("x", {"tool_call_id": "c9"}, {"progressToken": 1}).tool_call_id is None


@pytest.mark.parametrize(
    ("meta", "request_id", "expected"),
    [
        (None, 1, "1"),  # a JSON number, stringified exactly
        (None, 0, "0"),
        (None, "req-7", "req-7"),  # a JSON string, unchanged
        (None, " padded ", " padded "),  # not trimmed: the contract rejects it downstream
        ({"progressToken": 3}, 12, "12"),  # other _meta keys do not matter
        ({TOOL_CALL_ID_META_KEY: "toolu_1"}, 12, "toolu_1"),  # the model's id wins
        ({TOOL_CALL_ID_META_KEY: ""}, 12, ""),  # present but invalid: an error, no fallback
        (None, None, None),
        (None, True, None),  # not a JSON-RPC id
        (None, 1.5, None),
    ],
)
def test_read_call_falls_back_to_the_request_id(
    meta: dict[str, Any] | None, request_id: object, expected: str | None
) -> None:
    assert read_call("lookup_knowledge", {"query": "q"}, meta, request_id).tool_call_id == expected


def test_sessions_fit_the_session_alphabet() -> None:
    first, second = mcp_server.connection_session(), mcp_server.connection_session()
    assert first != second and is_valid_session_id(first) and first.startswith("mcp-")
    # An MCP session id is never the session's name (the console lists names, and whoever had
    # the id could act in the session): an HMAC under the server's secret, in the stdio form.
    for mcp_id in ("0f3c9a", "session with spaces/and:colons" + "x" * 200):
        derived = mcp_server.session_from_mcp(mcp_id)
        assert re.fullmatch(r"mcp-[0-9a-f]{32}", derived) and mcp_id not in derived
        assert is_valid_session_id(derived) and derived == mcp_server.session_from_mcp(mcp_id)
        assert derived != mcp_server.session_from_mcp(mcp_id + "y")
        assert derived != mcp_server.session_from_mcp(mcp_id, key=b"another server")


def test_call_tool_result_golden() -> None:
    spec, results = golden_turn()
    answers = []
    for (tool_call_id, tool, arguments), result in zip(spec, results, strict=True):
        meta = {TOOL_CALL_ID_META_KEY: tool_call_id} if tool_call_id else None
        answers.append(call_tool_result(read_call(tool, arguments, meta), result))
    check_golden("mcp", answers)
    assert [a["isError"] for a in answers] == [False, False, True, True, True, False]
    for answer in answers:
        [block] = answer["content"]
        assert block["type"] == "text"
        assert block["text"] == msgspec.json.encode(answer["structuredContent"]).decode()
        assert not any(word in block["text"] for word in CONTROL_ONLY)
    assert "tool_call_id" not in answers[4]["structuredContent"]  # invalid id: nothing minted
    assert answers[5]["structuredContent"]["pending"] is True


def test_list_tools_golden() -> None:
    listed = list_tools_result()
    check_golden("mcp_tools", listed)
    assert listed["tools"] == export_tools("mcp")
    assert all(t["annotations"] == ANNOTATIONS for t in listed["tools"])


def dump(result: Any) -> dict[str, Any]:
    out: dict[str, Any] = result.model_dump(by_alias=True, exclude_none=True)
    return out


def meta(tool_call_id: str) -> dict[str, Any]:
    return {TOOL_CALL_ID_META_KEY: tool_call_id}


async def test_stdio_server_end_to_end() -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "app.cli", "mcp", "--local"],
        cwd=str(REPO),
        env={"ACI_MYSQL_SHOP_URL": "mysql://nobody:secret@127.0.0.1:1/shop"},
    )
    got: dict[str, Any] = {}

    async def modern() -> None:
        async with Client(params, read_timeout_seconds=60) as client:
            listed = await client.list_tools()
            got["tools"] = [dump(t) for t in listed.tools]
            got["found"] = await client.call_tool(
                "lookup_knowledge", {"query": "connection pool exhausted"}, meta=meta("call_k1")
            )
            got["logs"] = await client.call_tool(
                "query_logs",
                {"topic": "APPLICATION", "query": "no-such-term-xyz"},
                meta=meta("call_l1"),
            )
            got["mysql"] = await client.call_tool(
                "query_mysql",
                {"data_source": "shop", "sql": "SELECT 1", "params": []},
                meta=meta("call_m1"),
            )
            got["no_id"] = await client.call_tool("lookup_knowledge", {"query": "pool"})
            got["bad_id"] = await client.call_tool(
                "lookup_knowledge", {"query": "pool"}, meta=meta("has space")
            )
            got["bad_args"] = await client.call_tool(
                "query_logs", {"topic": "NOPE", "query": ""}, meta=meta("call_l2")
            )

    async def legacy() -> None:
        # Hosts still on the 2025-11-25 initialize handshake get the same tools and results.
        async with Client(params, read_timeout_seconds=60, mode="legacy") as client:
            got["legacy_tools"] = [dump(t) for t in (await client.list_tools()).tools]
            got["legacy_no_id"] = await client.call_tool("lookup_knowledge", {"query": "pool"})

    async with anyio.create_task_group() as tg:  # two hosts, two servers, at once
        tg.start_soon(modern)
        tg.start_soon(legacy)
    tools, legacy_tools, legacy_no_id = got["tools"], got["legacy_tools"], got["legacy_no_id"]
    found, logs, mysql = got["found"], got["logs"], got["mysql"]
    no_id, bad_id, bad_args = got["no_id"], got["bad_id"], got["bad_args"]
    assert legacy_tools == tools
    legacy_observation = dump(legacy_no_id)["structuredContent"]
    assert legacy_observation["evidence_status"] == "EVIDENCE_FOUND", legacy_observation
    assert legacy_observation["tool_call_id"].isdigit()  # that connection's request id
    assert [t["name"] for t in tools] == ["lookup_knowledge", "query_logs", "query_mysql"]
    # The configured data source (ACI_MYSQL_SHOP_URL) is listed in query_mysql's schema.
    assert tools[2]["inputSchema"]["properties"]["data_source"]["enum"] == ["shop"]
    for tool, exported in zip(tools, export_tools("mcp", data_sources=["shop"]), strict=True):
        assert tool["inputSchema"] == exported["inputSchema"]
        assert tool["annotations"] == ANNOTATIONS
        assert tool["description"] == exported["description"]

    def check(result: Any, tool_call_id: str | None) -> dict[str, Any]:
        wire = dump(result)
        observation = wire["structuredContent"]
        [block] = wire["content"]
        assert block == {"type": "text", "text": msgspec.json.encode(observation).decode()}
        assert wire.get("isError", False) is (observation["evidence_status"] == "ERROR")
        assert observation.get("tool_call_id") == tool_call_id
        assert not any(word in block["text"] for word in CONTROL_ONLY)
        return observation  # type: ignore[no-any-return]

    assert check(found, "call_k1")["evidence_status"] == "EVIDENCE_FOUND"
    assert check(logs, "call_l1")["evidence_status"] == "NO_EVIDENCE"
    assert check(mysql, "call_m1")["evidence_status"] == "ERROR"  # port 1: nothing listens
    assert "secret" not in mysql.content[0].text and "127.0.0.1" not in mysql.content[0].text
    # A standard host sends no _meta id: the JSON-RPC request id is the tool call id.
    no_id_observation = dump(no_id)["structuredContent"]
    assert no_id_observation["tool_call_id"].isdigit()
    assert check(no_id, no_id_observation["tool_call_id"])["evidence_status"] == "EVIDENCE_FOUND"
    assert check(bad_id, None)["error"]["code"] == "INVALID_TOOL_CALL_ID"
    assert bad_id.is_error is True
    assert check(bad_args, "call_l2")["error"]["code"] == "SCHEMA"


@pytest.mark.redis
async def test_queue_mode_in_process(redis: Any, prefix: str) -> None:
    from mcp import Client

    settings = Settings(prefix=prefix, visibility_timeout_s=10.0, deadline_s=5.0)
    knowledge = GatedSource()
    async with (
        EvidenceClient(redis, settings) as evidence,
        running_worker(redis, settings, {"lookup_knowledge": knowledge}),
    ):
        server = mcp_server.build_server(
            mcp_server.queue_runner(evidence, timeout=1.0), session="mcp-queue"
        )
        async with Client(server) as client:
            found = await client.call_tool(
                "lookup_knowledge", {"query": "pool"}, meta={TOOL_CALL_ID_META_KEY: "q1"}
            )
            empty = await client.call_tool(
                "lookup_knowledge", {"query": "nothing"}, meta={TOOL_CALL_ID_META_KEY: "q2"}
            )
            later = await client.call_tool(
                "lookup_knowledge", {"query": "later"}, meta={TOOL_CALL_ID_META_KEY: "q3"}
            )
            unavailable = await client.call_tool(
                "query_mysql",
                {"data_source": "shop", "sql": "SELECT 1"},
                meta={TOOL_CALL_ID_META_KEY: "q4"},
            )
            still = await client.call_tool(  # the same call again, still running: pending
                "lookup_knowledge", {"query": "later"}, meta={TOOL_CALL_ID_META_KEY: "q5"}
            )
            knowledge.gate.set()
            final = await evidence.wait("mcp-queue", ["q3"], 10.0)
            again = await client.call_tool(  # ... and once it is final: its result
                "lookup_knowledge", {"query": "later"}, meta={TOOL_CALL_ID_META_KEY: "q6"}
            )
        ids = {lifecycle_entry(f).tool_call_id
               for _e, f in await redis.xrange(Keys(prefix).lifecycle, "-", "+")}  # fmt: skip
    assert found.structured_content["evidence_status"] == "EVIDENCE_FOUND" and not found.is_error
    assert empty.structured_content["evidence_status"] == "NO_EVIDENCE" and not empty.is_error
    # The host's own session persists: the pending answer says a repeat gets the result.
    assert later.structured_content == {
        "tool_call_id": "q3", "pending": True, "message": mcp_server.MCP_PENDING_MESSAGE
    }  # fmt: skip
    assert not later.is_error and still.structured_content["pending"] is True
    assert again.structured_content["evidence_status"] == "EVIDENCE_FOUND"
    assert again.structured_content["tool_call_id"] == "q3"  # that call's result, not run again
    assert "q5" not in ids and "q6" not in ids
    assert unavailable.is_error and unavailable.structured_content["error"]["code"] == "UNAVAILABLE"
    assert json.loads(bytes(final["q3"].model))["evidence_status"] == "EVIDENCE_FOUND"


@pytest.mark.redis
async def test_request_ids_that_restart_on_reconnect_never_collide(
    redis: Any, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    from mcp import Client

    caplog.set_level("INFO", logger="aci.mcp")

    settings = Settings(prefix=prefix, visibility_timeout_s=10.0, deadline_s=5.0)
    async with (
        EvidenceClient(redis, settings) as evidence,
        running_worker(redis, settings, {"lookup_knowledge": GatedSource()}),
    ):
        server = mcp_server.build_server(mcp_server.queue_runner(evidence, timeout=5.0))
        answers = []
        for query in ("pool", "nothing"):  # two connections, the same request ids
            async with Client(server) as client:
                answers.append(await client.call_tool("lookup_knowledge", {"query": query}))
        lifecycle = await redis.xrange(Keys(prefix).lifecycle, "-", "+")
    first, second = (a.structured_content for a in answers)
    assert first["tool_call_id"] == second["tool_call_id"]  # the host's request id, twice
    assert first["evidence_status"] == "EVIDENCE_FOUND"
    assert second["evidence_status"] == "NO_EVIDENCE"  # its own call, not the first's result
    sessions = {f[b"session"].decode() for _e, f in lifecycle}
    assert len(sessions) == 2 and all(s.startswith("mcp-") for s in sessions)
    logged = {r.getMessage().rsplit(" ", 1)[-1] for r in caplog.records if "session" in r.msg}
    assert logged == sessions  # each connection's session is logged when it opens


def test_the_mcp_command_line_is_typed_options() -> None:
    from app.cli import _parser

    args = _parser().parse_args(["mcp", "--timeout", "2.5", "--http", "8123", "--local"])
    assert (args.timeout, args.http, args.host, args.session, args.local) == (
        2.5,
        8123,
        "127.0.0.1",
        None,
        True,
    )
    defaults = _parser().parse_args(["mcp"])
    # 4 s: answered pending before the Agents SDK's MCP client gives up at 5 s (was 30 s)
    assert (defaults.timeout, defaults.http, defaults.session) == (4.0, None, None)


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        (mcp_server.ServeOptions(session="has space"), "--session"),
        (mcp_server.ServeOptions(timeout=0), "--timeout"),
        (mcp_server.ServeOptions(timeout=float("nan")), "--timeout"),
        (mcp_server.ServeOptions(timeout=float("inf")), "--timeout"),
        (mcp_server.ServeOptions(http_port=70000), "--http"),
    ],
)
async def test_bad_options_are_refused_in_one_line(
    options: mcp_server.ServeOptions, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await mcp_server.serve(options, Settings()) == 2
    err = capsys.readouterr().err
    assert err.startswith(problem) and err.count("\n") == 1


@pytest.mark.parametrize("args", [["mcp"], ["mcp", "--http", "8123"]])
def test_without_redis_or_local_the_server_refuses_to_start(args: list[str]) -> None:
    # Before: with ACI_REDIS_URL unset (a stdio host that did not pass it) the server quietly
    # ran the tools in-process on the MOCK incident, which a deployed agent took as evidence.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=REPO, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
    )  # fmt: skip
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert err.count("\n") == 1 and "ACI_REDIS_URL" in err and "--local" in err, err
    assert err.rstrip("\n") == mcp_server.NO_MODE_PROBLEM


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_http_server_stops_cleanly_on_a_signal(sig: signal.Signals) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "mcp", "--local", "--http", str(port)],
        cwd=REPO,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    server.send_signal(sig)
    _, err = server.communicate(timeout=30)
    assert server.returncode == 0, err.decode()
    assert b"Traceback" not in err
    # At the default level it says where it serves (before: nothing at all).
    assert f"serving Streamable HTTP on http://127.0.0.1:{port}/mcp".encode() in err, err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_stdio_server_stops_cleanly_on_a_signal(sig: signal.Signals) -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "--log-level", "INFO", "mcp", "--local"],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert server.stderr is not None
    server.stderr.readline()  # "stages run in-process"
    assert b"connection opened" in server.stderr.readline()  # serving, signals watched
    server.send_signal(sig)
    _, err = server.communicate(timeout=30)
    assert server.returncode == 0, err.decode()
    assert b"Traceback" not in err


def test_stdio_server_ends_quietly_when_its_host_is_gone() -> None:
    # A host that dies (killed, crashed) with a request in flight leaves the server's answer a
    # broken pipe: the server exited 1 with a BrokenPipeError traceback in the host's log.
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "mcp", "--local"],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert server.stdin and server.stdout and server.stderr
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}
    }}  # fmt: skip
    with server:
        server.stdout.close()  # nothing reads the answer any more
        server.stdin.write(json.dumps(initialize).encode() + b"\n")
        server.stdin.close()
        err = server.stderr.read()
        server.wait(timeout=60)
    assert server.returncode == 0, err.decode()
    assert b"Traceback" not in err, err.decode()


def test_a_repeat_is_the_same_session_tool_and_arguments() -> None:
    from hosts.mcp_pending import repeat_key

    def key(session: str, tool: str, arguments: object) -> object:
        return repeat_key(session, ToolCall(tool=tool, tool_call_id="1", arguments=arguments))

    same = key("s", "query_logs", {"topic": "APPLICATION", "query": "x"})
    assert key("s", "query_logs", '{ "query": "x",  "topic": "APPLICATION" }') == same
    assert key("s", "query_logs", {"query": "x", "topic": "APPLICATION"}) == same
    assert key("t", "query_logs", {"topic": "APPLICATION", "query": "x"}) != same
    assert key("s", "lookup_knowledge", {"topic": "APPLICATION", "query": "x"}) != same
    assert key("s", "query_logs", {"topic": "APPLICATION", "query": "y"}) != same
    assert key("s", "query_logs", "{not json") == key("s", "query_logs", "{not json")


@pytest.mark.redis
async def test_queue_mode_says_a_configuration_error_as_the_calls_error(
    redis: Any, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Review: another ACI_PARTITIONS than the workers' (`pipeline.admit_here`) escaped the
    # runner: the host got "Internal server error" and the server logged a traceback.
    from mcp import Client

    settings = Settings(prefix=prefix, visibility_timeout_s=10.0, deadline_s=5.0)
    part = Keys(prefix).for_session("mcp-queue")
    await redis.hset(part.deployment, mapping={"partitions": "4"})
    async with EvidenceClient(redis, settings) as evidence:
        server = mcp_server.build_server(
            mcp_server.queue_runner(evidence, timeout=1.0), session="mcp-queue"
        )
        async with Client(server) as client:
            found = await client.call_tool(
                "lookup_knowledge", {"query": "pool"}, meta={TOOL_CALL_ID_META_KEY: "q1"}
            )
    error = found.structured_content["error"]
    assert found.is_error is True and error["code"] == "UNAVAILABLE"
    assert "ACI_PARTITIONS is 1 here, 4 for the workers" in error["message"]
    assert not any(r.exc_info for r in caplog.records)  # one line, no traceback


@pytest.mark.redis
async def test_refused_credentials_are_said_as_such_not_try_again_later(
    prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A stdio host configured with a wrong Redis password: every call said "the evidence queue
    # is unavailable; try again later" (the model retried, in vain) and the server's log said
    # only "the queue failed: RedisProtocolError", which names neither the cause nor the fix.
    from mcp import Client

    caplog.set_level("WARNING", logger="aci.mcp")
    settings = Settings(prefix=prefix)
    url = "redis://no-such-user:s3cret-pw@127.0.0.1:6379/0"
    async with EvidenceClient.connect(settings, url=url) as evidence:
        server = mcp_server.build_server(mcp_server.queue_runner(evidence, timeout=2.0))
        async with Client(server) as client:
            refused = await client.call_tool("lookup_knowledge", {"query": "pool"})
    error = refused.structured_content["error"]
    assert refused.is_error is True and error["code"] == "UNAVAILABLE"
    assert "try again later" not in error["message"] and "operator" in error["message"], error
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "WRONGPASS" in logged and "ACI_REDIS_URL" in logged, logged
    assert "s3cret" not in logged + error["message"] and "no-such-user" not in logged
    assert not any(r.exc_info for r in caplog.records)


@pytest.mark.redis
async def test_a_call_pending_because_no_worker_reads_says_so_in_the_log(
    redis: Any, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A new user's host config named ACI_REDIS_URL but not the fleet's ACI_PREFIX (the demo
    # prints one), or no worker was started: every call was pending and the server's log (the
    # host's MCP log) said nothing about why.
    from mcp import Client

    caplog.set_level("WARNING", logger="aci.mcp")
    settings = Settings(prefix=prefix, visibility_timeout_s=10.0, deadline_s=5.0)
    async with EvidenceClient(redis, settings) as evidence:
        server = mcp_server.build_server(mcp_server.queue_runner(evidence, timeout=0.5))
        async with Client(server) as client:
            first = await client.call_tool("lookup_knowledge", {"query": "pool"})
            again = await client.call_tool("lookup_knowledge", {"query": "other"})
    assert first.structured_content["pending"] is True and not first.is_error
    assert again.structured_content["pending"] is True
    [warning] = [r.getMessage() for r in caplog.records if "no worker" in r.getMessage()]
    assert f"ACI_PREFIX {prefix}, partition 0" in warning and "aci-evidence worker" in warning

    caplog.clear()  # with a worker reading, a call still running is pending without a warning
    async with (
        EvidenceClient(redis, settings) as evidence,
        running_worker(redis, settings, {"lookup_knowledge": GatedSource()}),
    ):
        server = mcp_server.build_server(mcp_server.queue_runner(evidence, timeout=2.0))
        async with Client(server) as client:
            found = await client.call_tool("lookup_knowledge", {"query": "pool"})
            later = await client.call_tool("lookup_knowledge", {"query": "later"})
    assert found.structured_content["evidence_status"] == "EVIDENCE_FOUND"
    assert later.structured_content["pending"] is True
    assert not [r for r in caplog.records if "no worker" in r.getMessage()]


@contextlib.asynccontextmanager
async def silent_redis() -> AsyncIterator[tuple[str, anyio.Event]]:
    """A TCP port that accepts and never answers, as a frozen Redis (SIGSTOP, a blocking
    command, a network dropping packets) or a TLS URL to a plain Redis does; setting the event
    closes every connection, so the driver fails at once."""
    release = anyio.Event()

    async def hold(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            await release.wait()

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, hold)
        try:
            yield f"redis://127.0.0.1:{port}/0", release
        finally:
            release.set()
            tg.cancel_scope.cancel()


async def test_a_queue_that_never_answers_is_said_before_the_host_gives_up(prefix: str) -> None:
    # A frozen Redis held every call 14 s (a rediss:// URL to a plain Redis 25 s) before its
    # ERROR/UNAVAILABLE: the submit waits out the driver's timeouts, beyond --timeout, and the
    # host had given up at 5 s ("An error occurred while running the tool").
    from mcp import Client

    async with silent_redis() as (url, release):
        async with (
            EvidenceClient.connect(Settings(prefix=prefix), url=url) as evidence,
            anyio.create_task_group() as background,
        ):
            runner = mcp_server.queue_runner(evidence, timeout=0.5, background=background)
            server = mcp_server.build_server(runner)
            async with Client(server) as client:
                started = anyio.current_time()
                answer = await client.call_tool("lookup_knowledge", {"query": "pool"})
                waited = anyio.current_time() - started
            release.set()  # the abandoned submit fails now, instead of in 10 s
    error = answer.structured_content["error"]
    assert answer.is_error is True and error["code"] == "UNAVAILABLE", error
    assert "did not answer in time" in error["message"]
    assert waited < 0.5 + mcp_server.ANSWER_GRACE_S + 0.5, waited


@pytest.mark.redis
async def test_a_pending_call_whose_record_is_lost_is_run_again_by_its_repeat(
    redis: Any, prefix: str
) -> None:
    # Redis restarted without its data (no AOF) while a call was pending: the pending answer
    # told the model to call again for its result, and every repeat waited for a call no longer
    # recorded anywhere and was answered pending again, for ever.
    from mcp import Client

    settings = Settings(prefix=prefix, visibility_timeout_s=10.0, deadline_s=5.0)
    knowledge = GatedSource()
    part = Keys(prefix).for_session("mcp-lost")
    async with (
        EvidenceClient(redis, settings) as evidence,
        running_worker(redis, settings, {"lookup_knowledge": knowledge}),
    ):
        server = mcp_server.build_server(
            mcp_server.queue_runner(evidence, timeout=1.0), session="mcp-lost"
        )
        async with Client(server) as client:
            first = await client.call_tool(
                "lookup_knowledge", {"query": "later"}, meta={TOOL_CALL_ID_META_KEY: "l1"}
            )
            assert first.structured_content["pending"] is True
            await redis.delete(part.call("mcp-lost", "l1"), part.result("mcp-lost", "l1"))
            knowledge.gate.set()
            again = await client.call_tool(
                "lookup_knowledge", {"query": "later"}, meta={TOOL_CALL_ID_META_KEY: "l2"}
            )
    assert again.structured_content.get("evidence_status") == "EVIDENCE_FOUND", again
    assert again.structured_content["tool_call_id"] == "l2"  # run as itself: l1 is gone


async def test_a_local_server_builds_the_runbook_index_at_start(tmp_path: Path) -> None:
    # `mcp --local` over a runbook folder whose index is not built: the build (11 s for
    # openshift/runbooks, 34 s for gitlab's) starts with the server, as a worker's warm-up,
    # not inside the first lookup's deadline (which answered ERROR TIMEOUT). The index file
    # appears before any call; then a lookup answers within a short deadline.
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    cache = tmp_path / "cache"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "app.cli", "mcp", "--local"],
        cwd=str(REPO),
        env={"ACI_CACHE_DIR": str(cache), "ACI_DEADLINE_S": "0.3"},
    )
    async with Client(params, read_timeout_seconds=60) as client:
        await client.list_tools()
        for _ in range(600):  # a file another process writes: polled, 60 s at most
            if list(cache.glob("knowledge-*.sqlite3")):
                break
            await anyio.sleep(0.1)
        assert list(cache.glob("knowledge-*.sqlite3")), "no index built before any call"
        for attempt in range(20):  # the warm-up's own lookup may still hold the index
            found = await client.call_tool(
                "lookup_knowledge", {"query": "connection pool exhausted"}, meta=meta(f"k{attempt}")
            )
            if found.structured_content["evidence_status"] != "ERROR":
                break
            await anyio.sleep(0.5)
    assert found.structured_content["evidence_status"] == "EVIDENCE_FOUND", found
