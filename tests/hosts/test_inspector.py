"""The official MCP Inspector CLI (`@modelcontextprotocol/inspector`, pinned in
tests/inspector/package-lock.json, installed by `make test` with `npm ci`) against
`aci-evidence mcp`, as a standard host uses it: `tools/call` WITHOUT the `_meta` id.

Four servers: stdio and Streamable HTTP, each with the stages in-process (`--local`) and
through the queue (a worker in this test process, on the test's own key prefix). Each gets
`tools/list --strict` (the Inspector's schema portability check) and three calls that must
come back EVIDENCE_FOUND, NO_EVIDENCE and a typed ERROR, each carrying the host's JSON-RPC
request id as its tool call id. The Inspector runs are started together, so the whole file
takes seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from pipeline.keys import Keys
from pipeline.settings import Settings
from tests.conftest import REDIS_URL
from tests.pipeline.helpers import running_worker

pytest.importorskip("mcp")

REPO = Path(__file__).resolve().parents[2]
INSPECTOR = REPO / "tests" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"
# The console script, as a host's configuration names it (README, docs/adapters.md).
SERVER = [str(Path(sys.executable).parent / "aci-evidence"), "mcp"]

# (tool, arguments, expected evidence_status, expected error code)
CALLS: list[tuple[str, dict[str, Any], str, str | None]] = [
    ("lookup_knowledge", {"query": "connection pool exhausted"}, "EVIDENCE_FOUND", None),
    ("query_logs", {"topic": "APPLICATION", "query": "no-such-term-xyz"}, "NO_EVIDENCE", None),
    ("query_logs", {"topic": "NOPE", "query": "timeout"}, "ERROR", "SCHEMA"),
]


@pytest.fixture(scope="module")
def inspector() -> Path:
    if not INSPECTOR.exists():
        message = "the MCP Inspector is not installed: run `make test` (npm ci in tests/inspector)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return INSPECTOR


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def run_inspector(
    inspector: Path, target: list[str], method: list[str], home: Path
) -> tuple[int, Any, str]:
    """One Inspector CLI run: (exit code, the JSON result, stderr)."""
    command = [str(inspector), "--cli", "--format", "json", "-q", "--connect-timeout", "60000"]
    command += [*target, "--method", *method]
    env = {"PATH": os.environ["PATH"], "HOME": str(home)}
    done = await anyio.run_process(command, env=env, cwd=REPO, check=False)
    stdout = done.stdout.decode()
    return done.returncode, json.loads(stdout) if stdout.strip() else None, done.stderr.decode()


async def inspect_all(inspector: Path, target: list[str], home: Path) -> list[Any]:
    """`tools/list --strict` and the three calls, run at once."""
    runs: list[list[str]] = [["tools/list", "--strict"]]
    for tool, arguments, *_ in CALLS:
        runs.append(["tools/call", "--tool-name", tool, "--tool-args-json", json.dumps(arguments)])
    out: list[Any] = [None] * len(runs)

    async def one(index: int) -> None:
        out[index] = await run_inspector(inspector, target, runs[index], home)

    async with anyio.create_task_group() as tg:
        for index in range(len(runs)):
            tg.start_soon(one, index)
    return out


def check(outcomes: list[Any]) -> list[str]:
    """Assert what a standard host sees; returns the tool call ids the observations carry."""
    (rc, listed, err), *calls = outcomes
    assert rc == 0, err
    assert "warning" not in err.casefold() and "error" not in err.casefold(), err
    tools = listed["result"]["tools"]
    assert [t["name"] for t in tools] == ["lookup_knowledge", "query_logs", "query_mysql"]
    assert all(t["title"] and t["annotations"]["readOnlyHint"] is True for t in tools)
    ids = []
    for (rc, answer, err), (_tool, _args, status, code) in zip(calls, CALLS, strict=True):
        result = answer["result"]
        observation = result["structuredContent"]
        assert observation["evidence_status"] == status, observation
        assert result["content"] == [
            # UTF-8 as sent (a Chinese runbook is a hit too), not \u escapes
            {
                "type": "text",
                "text": json.dumps(observation, separators=(",", ":"), ensure_ascii=False),
            }
        ]
        assert result.get("isError", False) is (status == "ERROR")
        assert rc == (5 if status == "ERROR" else 0), err  # 5: the Inspector saw isError
        if code is not None:
            assert observation["error"]["code"] == code
        # No _meta was sent: the id is the host's JSON-RPC request id, never minted.
        assert observation["tool_call_id"].isdigit(), observation
        ids.append(observation["tool_call_id"])
    return ids


@contextlib.contextmanager
def http_server(args: list[str], env: dict[str, str]) -> Iterator[str]:
    port = free_port()
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")} | env
    process = subprocess.Popen(
        [*SERVER, *args, "--http", str(port)],
        cwd=REPO,
        env=full_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - a hung server
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


async def wait_listening(url: str) -> None:
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    with anyio.fail_after(30):
        while True:
            try:
                stream = await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                await anyio.sleep(0.1)
            else:
                await stream.aclose()
                return


@contextlib.asynccontextmanager
async def queue_worker(redis: Any, prefix: str) -> AsyncIterator[None]:
    from workers.sources import open_sources

    settings = Settings(prefix=prefix, visibility_timeout_s=10.0, deadline_s=5.0)
    async with open_sources() as sources, running_worker(redis, settings, sources):
        yield


async def test_inspector_stdio_local(inspector: Path, tmp_path: Path) -> None:
    target = ["--cwd", str(REPO), *SERVER, "--local"]
    check(await inspect_all(inspector, target, tmp_path))


async def test_inspector_strict_check_accepts_the_data_source_enum(
    inspector: Path, tmp_path: Path
) -> None:
    env = ["-e", "ACI_MYSQL_SHOP_URL=mysql://nobody:x@127.0.0.1:1/shop"]
    target = [*env, "--cwd", str(REPO), *SERVER, "--local"]
    rc, listed, err = await run_inspector(inspector, target, ["tools/list", "--strict"], tmp_path)
    assert rc == 0, err
    assert "warning" not in err.casefold() and "error" not in err.casefold(), err
    [mysql] = [t for t in listed["result"]["tools"] if t["name"] == "query_mysql"]
    assert mysql["inputSchema"]["properties"]["data_source"]["enum"] == ["shop"]


@pytest.mark.redis
async def test_inspector_stdio_queue(
    inspector: Path, tmp_path: Path, redis: Any, prefix: str
) -> None:
    env = ["-e", f"ACI_REDIS_URL={REDIS_URL}", "-e", f"ACI_PREFIX={prefix}"]
    target = [*env, "--cwd", str(REPO), *SERVER]
    async with queue_worker(redis, prefix):
        ids = check(await inspect_all(inspector, target, tmp_path))
    lifecycle = await redis.xrange(Keys(prefix).lifecycle, "-", "+")
    sessions = {f[b"session"].decode() for _e, f in lifecycle}
    # Three Inspector runs, three stdio connections: three sessions, so the request ids (the
    # same number each time) never collide.
    assert len(sessions) == 3 and all(s.startswith("mcp-") for s in sessions)
    assert len(set(ids)) == 1


async def test_inspector_http_local(inspector: Path, tmp_path: Path) -> None:
    with http_server(["--local"], {}) as url:
        await wait_listening(url)
        check(await inspect_all(inspector, [url], tmp_path))
        # A 2026-07-28 request has no MCP session: it is a connection of its own.
        rc, answer, err = await run_inspector(
            inspector,
            ["--protocol-era", "modern", url],
            ["tools/call", "--tool-name", "lookup_knowledge", "--tool-args-json",
             json.dumps({"query": "connection pool exhausted"})],
            tmp_path,
        )  # fmt: skip
    assert rc == 0, err
    observation = answer["result"]["structuredContent"]
    assert observation["evidence_status"] == "EVIDENCE_FOUND"
    assert observation["tool_call_id"].isdigit()


@pytest.mark.redis
async def test_inspector_http_queue(
    inspector: Path, tmp_path: Path, redis: Any, prefix: str
) -> None:
    env = {"ACI_REDIS_URL": REDIS_URL, "ACI_PREFIX": prefix}
    async with queue_worker(redis, prefix):
        with http_server([], env) as url:
            await wait_listening(url)
            check(await inspect_all(inspector, [url], tmp_path))
    lifecycle = await redis.xrange(Keys(prefix).lifecycle, "-", "+")
    sessions = {f[b"session"].decode() for _e, f in lifecycle}
    # One server, three hosts (Inspector runs): three sessions, each named by an HMAC of its
    # MCP session id (the stdio form; the id itself is never shown).
    assert len(sessions) == 3
    assert all(re.fullmatch(r"mcp-[0-9a-f]{32}", s) for s in sessions), sessions
