"""The on-call engineer whose Redis is not there: each command says so in one line, fast, with
its exit code, never a traceback nor a password. Each case starts its own server (a Redis with
a password, one that accepts and never answers) on a free port; the shared Redis is not
touched."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.services import free_port, own_redis
from tests.conftest import REDIS_URL

pytestmark = pytest.mark.redis
ROOT = Path(__file__).resolve().parents[2]
KB = ("call", "lookup_knowledge", "--id", "c1", "--args", '{"query":"q"}', "--timeout", "5")


def _run(url: str, *args: str, prefix: str = "redisaway") -> tuple[int, list[str], float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    env.update(ACI_REDIS_URL=url, ACI_PREFIX=prefix)
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stderr.splitlines(), time.monotonic() - start


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers (a hung Redis, a middlebox)."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()


def test_a_redis_that_never_answers_is_said_in_one_timeout(silent_port: int) -> None:
    # Before: every retry waited its own 10 s reply timeout: `status` was silent for 40 s.
    code, lines, took = _run(f"redis://:hunter2@127.0.0.1:{silent_port}/0", "status")
    assert (code, lines) == (
        1,
        ["pipeline error: RedisUnavailable: no Redis answers at ACI_REDIS_URL"],
    )
    assert took < 20


def test_reindex_with_redis_down_is_one_line() -> None:
    # Before: a driver traceback (its SCAN was not behind the typed errors).
    code, lines, _ = _run(f"redis://:hunter2@127.0.0.1:{free_port()}/0", "reindex")
    assert (code, lines) == (
        1,
        ["pipeline error: RedisUnavailable: no Redis answers at ACI_REDIS_URL"],
    )


def test_no_password_is_noauth_and_a_wrong_one_wrongpass_for_every_client(
    tmp_path: Path,
) -> None:
    # Before: a URL without a password was told "wrong user or password".
    calls = tmp_path / "calls.jsonl"
    calls.write_text('{"tool":"lookup_knowledge","id":"c1","arguments":{"query":"q"}}\n')
    with own_redis(password="s3cret-pw") as server:
        anonymous = f"redis://127.0.0.1:{server.port}/0"
        wrong = f"redis://chaos:hunter2@127.0.0.1:{server.port}/0"
        for args in (("status",), KB, ("submit", "--file", str(calls), "--session", "s")):
            code, lines, took = _run(anonymous, *args)
            # One line (before, submit also logged "calls go through the workers' admission").
            assert code == 1 and took < 20 and len(lines) == 1, (args, lines)
            assert lines[-1].startswith("pipeline error: RedisProtocolError: NOAUTH from Redis")
            code, lines, _ = _run(wrong, *args)
            assert code == 1 and len(lines) == 1 and "hunter2" not in "".join(lines), (args, lines)
            assert lines[-1].startswith("pipeline error: RedisProtocolError: WRONGPASS from Redis")


def test_a_cluster_url_at_a_plain_redis_is_a_configuration_error() -> None:
    # Before: "no Redis answers" (and a worker waited for a cluster that never comes).
    url = REDIS_URL.replace("redis://", "redis+cluster://", 1)
    for args in (("status",), ("worker",)):
        code, lines, _ = _run(url, *args)
        assert code == 2, (args, lines)
        assert lines[-1].startswith("configuration error: ACI_REDIS_URL names a Redis Cluster")


def test_the_console_says_redis_is_away_or_stops_on_refused_credentials() -> None:
    # Before: `console on …`, then nothing while every page answered 503.
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    env.update(ACI_REDIS_URL=f"redis://:hunter2@127.0.0.1:{free_port()}/0", ACI_PREFIX="away")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "console", "--port", str(port)],
        cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline().startswith("console on ")
        line = proc.stderr.readline()
        assert "WARNING aci.console Redis does not answer at ACI_REDIS_URL" in line
        assert "hunter2" not in line and proc.poll() is None
    finally:
        proc.terminate()
        proc.communicate(timeout=15)  # also closes its stderr pipe
    with own_redis(password="s3cret-pw") as server:
        wrong = f"redis://chaos:hunter2@127.0.0.1:{server.port}/0"
        code, lines, took = _run(wrong, "console", "--port", str(port))
    assert code == 1 and took < 20
    assert lines[-1].startswith("pipeline error: RedisProtocolError: WRONGPASS from Redis")


def test_mcp_tells_the_model_that_an_unusable_url_will_not_heal() -> None:
    # Before: a cluster URL at a plain Redis was "unavailable; try again later" to the model.
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "lookup_knowledge", "arguments": {"query": "q"}}},
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    env.update(ACI_REDIS_URL=REDIS_URL.replace("redis://", "redis+cluster://", 1))
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "mcp", "--session", "s", "--timeout", "3"],
        cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write("".join(json.dumps(line) + "\n" for line in lines))
        proc.stdin.flush()
        answers = [json.loads(proc.stdout.readline()) for _ in range(2)]
    finally:
        _, err = proc.communicate(timeout=30)  # closes stdin: the server ends
    assert answers[1]["id"] == 2 and answers[1]["result"]["isError"] is True
    assert "calling again will not help" in answers[1]["result"]["content"][0]["text"]
    assert "the queue failed: RedisConfigError: ACI_REDIS_URL names a Redis Cluster" in err


def test_a_cluster_node_under_a_plain_url_or_a_master_down_is_one_line() -> None:
    from pipeline.local_cluster import local_cluster

    # Prefix `a` hashes to slot 15495: the third master's (3 masters split the slots evenly).
    with local_cluster(masters=3, replicas=0) as cluster:
        plain = f"redis://127.0.0.1:{cluster.ports[0]}/0"
        for args in (("status",), ("reindex",), ("worker",)):
            # Before: a bare `MOVED`, and a worker "could not create the consumer group".
            code, lines, took = _run(plain, *args, prefix="a")
            assert code == 1 and len(lines) == 1 and took < 20, (args, lines)
            assert lines[0].startswith("pipeline error: RedisProtocolError: MOVED from Redis")
            assert "use redis+cluster://" in lines[0]
        cluster.kill(cluster.ports[2])
        for args in (("status",), KB, ("views", "--session", "s", "--view", "model")):
            code, lines, took = _run(cluster.url, *args, prefix="a")
            assert code == 1 and took < 20, (args, lines)
            assert lines == ["pipeline error: RedisUnavailable: no Redis answers at ACI_REDIS_URL"]
