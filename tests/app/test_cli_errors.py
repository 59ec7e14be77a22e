"""Every command with bad input (issue 24): one line on stderr, no traceback, the exit code
that tells what happened (2 usage/configuration, 1 error, 130 Ctrl-C). Each case runs the real
console script in a subprocess; they run concurrently to keep the test short."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from chaos.services import free_port
from tests.app.test_ctrl_c import _connected_to_redis
from tests.conftest import REDIS_URL

pytestmark = pytest.mark.redis
ROOT = Path(__file__).resolve().parents[2]
LOGS = ("call", "query_logs", "--local", "--id", "c1", "--args", '{"topic":"APPLICATION"}')
KB = ("call", "lookup_knowledge", "--local", "--id", "c1", "--args", '{"query":"q"}')
SQL = ("call", "query_mysql", "--local", "--id", "c1",
       "--args", '{"data_source":"shop","sql":"SELECT 1"}')  # fmt: skip
DOWN = f"redis://user:hunter2@127.0.0.1:{free_port()}/0"

# (name, extra environment, arguments, exit code, what the line starts with)
CASES: list[tuple[str, dict[str, str], tuple[str, ...], int, str]] = [
    (
        "mock scenario",
        {"ACI_MOCK_SCENARIO": "bogus"},
        LOGS,
        2,
        "configuration error: unknown mock scenario 'bogus'",
    ),
    ("lookback", {"ACI_LOGS_DEFAULT_LOOKBACK": "5000"}, LOGS, 2, "configuration error: "),
    # A missing runbook folder does not stop a worker (logs and SQL still answer): it is said
    # once at start, and every lookup is ERROR/UNAVAILABLE (docs/knowledge.md, issue 22).
    (
        "knowledge dir",
        {"ACI_KNOWLEDGE_DIR": "/nonexistent"},
        KB,
        1,
        "ERROR aci.knowledge ACI_KNOWLEDGE_DIR does not name a readable folder",
    ),
    # A relative folder is read from the working folder (an MCP client picks its own): said.
    (
        "knowledge dir relative",
        {"ACI_KNOWLEDGE_DIR": "no-such-runbooks"},
        KB,
        1,
        "ERROR aci.knowledge ACI_KNOWLEDGE_DIR does not name a readable folder "
        f"('no-such-runbooks'; a relative path is read from the working folder {ROOT}): lookups",
    ),
    ("mysql url", {"ACI_MYSQL_SHOP_URL": "notaurl"}, SQL, 2, "configuration error: query_mysql"),
    ("mysql config", {"ACI_MYSQL_CONFIG": "/missing"}, SQL, 2, "configuration error: query_mysql"),
    ("mysql clock", {"ACI_MYSQL_CLOCK": "yesterday"}, SQL, 2, "configuration error: query_mysql"),
    ("rag url", {"ACI_RAG_URL": "x"}, KB, 2, "configuration error: lookup_knowledge"),
    ("log level", {}, ("--log-level", "LOUD", "status"), 2, "configuration error: --log-level"),
    ("log level after", {}, ("status", "--log-level", "LOUD"), 2, "configuration error: "),
    ("log level env", {"ACI_LOG_LEVEL": "LOUD"}, ("status",), 2, "configuration error: "),
    (
        "float",
        {"ACI_VISIBILITY_TIMEOUT_S": "soon"},
        ("status",),
        2,
        "configuration error: ACI_VISIBILITY_TIMEOUT_S must be a number",
    ),
    (
        "int",
        {"ACI_PARTITIONS": "many"},
        ("worker",),
        2,
        "configuration error: ACI_PARTITIONS must be an int",
    ),
    ("worker scenario", {"ACI_MOCK_SCENARIO": "bogus"}, ("worker",), 2, "configuration error: "),
    ("partitions", {}, ("worker", "--partitions", "5"), 2, "aci-evidence worker: --partitions"),
    ("no url", {"ACI_REDIS_URL": ""}, ("status",), 2, "configuration error: ACI_REDIS_URL"),
    ("bad url", {"ACI_REDIS_URL": "notaurl"}, ("status",), 2, "configuration error: "),
    (
        "submit file",
        {},
        ("submit", "--file", "/missing.jsonl", "--session", "s"),
        2,
        "bad input: /missing.jsonl",
    ),
    (
        "export dir",
        {},
        ("export", "--file", "/missing/dir/x.jsonl", "--session", "s"),
        2,
        "aci-evidence export: --file: no folder",
    ),
    ("import file", {}, ("import", "--file", "/missing.jsonl"), 2, "bad input: cannot read "),
    ("args file", {}, (*KB[:-1], "@/missing.json"), 2, "bad input: /missing.json"),
    ("session", {}, ("views", "--session", "a b", "--view", "model"), 2, "bad input: "),
    # replay, export and import say their lines as every other command does (app/errors.py).
    ("replay session", {}, ("replay", "--session", "nosuch"), 1, "aci-evidence replay: no rec"),
    (
        "export session",
        {},
        ("export", "--session", "nosuch", "--file", "/tmp/aci-none.jsonl"),
        1,
        "aci-evidence export: the session has no recorded invocation",
    ),
    ("replay status", {}, ("replay", "--status", "DONE"), 2, "aci-evidence replay: --status: "),
    ("replay since", {}, ("replay", "--since", "soon"), 2, "aci-evidence replay: --since: "),
    ("replay file", {}, ("replay", "--file", "/missing.jsonl"), 2, "bad input: cannot read "),
    # Before: printed raw, so a crafted file name could rewrite the terminal.
    ("replay esc", {}, ("replay", "--file", "/\x1b[2Jx"), 2, "bad input: cannot read /\\x1b[2Jx"),
    ("replay id", {}, ("replay", "--session", "a b"), 2, "bad input: invalid session id 'a b'"),
    ("replay into", {}, ("replay", "--into", "a b"), 2, "bad input: invalid session id 'a b'"),
    ("export id", {}, ("export", "--session", "a b", "--file", "x"), 2, "bad input: invalid "),
    ("import id", {}, ("import", "--file", "x", "--session", "a b"), 2, "bad input: invalid "),
    (
        "replay no url",
        {"ACI_REDIS_URL": ""},
        ("replay", "--session", "s"),
        2,
        "configuration error: ACI_REDIS_URL is not set (set it",
    ),
    (
        "export no url",
        {"ACI_REDIS_URL": ""},
        ("export", "--session", "s", "--file", "/tmp/aci-none.jsonl"),
        2,
        "configuration error: ACI_REDIS_URL is not set (set it",
    ),
    ("redis down", {"ACI_REDIS_URL": DOWN}, ("status",), 1, "pipeline error: RedisUnavailable"),
    ("redis down call", {"ACI_REDIS_URL": DOWN}, KB[:2] + KB[3:], 1, "pipeline error: "),
    ("usage", {}, ("call", "--nope"), 2, "aci-evidence call: error: "),
    ("usage top", {}, ("frobnicate",), 2, "aci-evidence: error: "),
    ("tools format", {}, ("tools", "--format", "xml"), 2, "aci-evidence tools: error: "),
    ("mcp port", {}, ("mcp", "--http", "eighty"), 2, "aci-evidence mcp: error: "),
    # Before: `nan` was a traceback out of anyio, `-1` returned "pending" without waiting.
    ("call nan", {}, (*KB[:2], *KB[3:], "--timeout", "nan"), 2, "aci-evidence call: error: "),
    (
        "submit -1",
        {},
        ("submit", "--file", "x", "--session", "s", "--timeout", "-1"),
        2,
        "aci-evidence submit: error: argument --timeout: seconds",
    ),
    ("acl", {"ACI_ACL_ADMIN_PASSWORD": ""}, ("acl", "--aclfile"), 2, "configuration error: "),
    ("demo scenario", {}, ("demo", "--scenario", "bogus"), 2, "unknown scenario"),
]


_STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ")


def _env(prefix: str, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    env.update(ACI_REDIS_URL=REDIS_URL, ACI_PREFIX=prefix, ACI_INSTANT_SOURCES="0")
    env.update(extra)
    return env


def _run(args: tuple[str, ...], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_every_command_with_bad_input_says_one_line_and_its_exit_code(prefix: str) -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = list(pool.map(lambda c: _run(c[2], _env(prefix, c[1])), CASES))
    problems = []
    for (name, _env_extra, args, code, start), proc in zip(CASES, done, strict=True):
        # A log line's time stamp is not part of what it says.
        lines = [_STAMP.sub("", line) for line in proc.stderr.splitlines()]
        if proc.returncode != code or len(lines) != 1 or not lines[0].startswith(start):
            problems.append(f"{name} {args}: exit {proc.returncode}, stderr {proc.stderr[-600:]!r}")
        elif "hunter2" in proc.stderr or "Traceback" in proc.stderr:
            problems.append(f"{name}: leaks or traces: {proc.stderr!r}")
    assert problems == []


def _interrupted(args: tuple[str, ...], env: dict[str, str], ready: str) -> tuple[int, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        assert proc.stdout is not None
        if ready:
            while ready not in proc.stdout.readline():
                assert time.monotonic() < deadline and proc.poll() is None
        else:  # started and reading (a signal before Python's handler would kill): a fixed
            # 5 s sleep before; now until it holds its connection to Redis (about 1-2 s)
            while not _connected_to_redis(proc.pid):
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


@pytest.mark.parametrize(
    "args",
    [("views", "--session", "s1", "--view", "model", "--follow"), ("status", "--watch", "--json")],
    ids=["views-follow", "status-watch"],
)
def test_ctrl_c_exits_130_quietly(prefix: str, args: tuple[str, ...]) -> None:
    code, err = _interrupted(args, _env(prefix, {}), "")
    assert (code, err) == (130, "")


@pytest.mark.slow
def test_ctrl_c_on_demo_keep_running_exits_130_after_cleaning_up(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    env.update(TMPDIR=str(tmp_path), COLUMNS="80")
    code, err = _interrupted(("demo", "--keep-running"), env, "Ctrl-C stops them")
    assert code == 130 and "Traceback" not in err, err[-2000:]
    assert not list(tmp_path.glob("aci-redis-*"))  # the embedded Redis went away


def test_a_port_in_use_is_one_line_for_every_server(prefix: str) -> None:
    # Before: the console printed uvicorn's line and exited 3 ("pending"), mcp --http and
    # worker --metrics-port printed tracebacks.
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = str(held.getsockname()[1])
        cases = [
            (("console", "--port", port), "configuration error: --port: cannot listen on"),
            (("mcp", "--http", port), "--http: cannot listen on"),
            (("worker", "--metrics-port", port), "aci-evidence worker: --metrics-port: cannot"),
        ]
        with ThreadPoolExecutor(max_workers=3) as pool:
            done = list(pool.map(lambda c: _run(c[0], _env(prefix, {})), cases))
    for (args, start), proc in zip(cases, done, strict=True):
        assert proc.returncode == 2, (args, proc.stderr[-600:])
        assert proc.stderr.startswith(start) and proc.stderr.count("\n") == 1, proc.stderr
        assert "in use" in proc.stderr, proc.stderr
