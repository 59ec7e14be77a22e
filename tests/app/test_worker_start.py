"""`aci-evidence worker` says what started (issue 24): a start line at the default level
(consumer, partitions, sources and their kinds, concurrency), a failed warm-up is logged, and
drain3's "Starting Drain3 template miner" lines are gone, also at INFO."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from chaos.services import free_port
from tests.conftest import REDIS_URL

pytestmark = pytest.mark.redis
ROOT = Path(__file__).resolve().parents[2]


def _worker_output(env: dict[str, str], *flags: str, until: str = "started") -> str:
    """The worker's stderr until a line with `until` (its start line; at most 60 s), then
    until it stops (SIGTERM)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "worker", "--concurrency", "4", *flags],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stderr is not None
    reader = threading.Thread(target=lambda: [lines.put(x) for x in proc.stderr], daemon=True)
    reader.start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(until in x for x in seen):
            with contextlib.suppress(queue.Empty):
                seen.append(lines.get(timeout=0.2))
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        reader.join(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        reader.join(10)
        proc.stderr.close()
    while not lines.empty():
        seen.append(lines.get())
    return "".join(seen)


def _env(prefix: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    return {**env, "ACI_REDIS_URL": REDIS_URL, "ACI_PREFIX": prefix, **extra}


def test_the_start_line_shows_at_the_default_level_and_a_failed_warm_up_is_logged(
    prefix: str,
) -> None:
    port = free_port()
    rag = f"http://127.0.0.1:{port}/search"  # nobody listens: the warm-up fails
    out = _worker_output(_env(prefix, ACI_RAG_URL=rag))
    started = next(line for line in out.splitlines() if " started: " in line)
    assert "partitions 0 of 1" in started and "concurrency 4" in started
    assert "lookup_knowledge=RAG service over HTTP" in started
    assert "query_logs=MOCK logs (db-pool-exhaustion)" in started
    assert "query_mysql=MySQL (no data sources)" in started
    assert "warm-up of lookup_knowledge failed" in out
    assert f":{port}" not in out  # the RAG's address is never logged
    assert "stopped" in out and "Traceback" not in out


def test_drain3_is_quiet_at_info_and_global_flags_follow_the_subcommand(prefix: str) -> None:
    out = _worker_output(_env(prefix), "--log-json", "--log-level", "INFO")
    assert "Drain3" not in out and "drain3" not in out
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert any(" started: " in r["msg"] and r["level"] == "INFO" for r in records)


def test_a_wrong_password_stops_the_worker_at_once_in_one_line() -> None:
    # Before: "redis unavailable at start; retrying" forever (redis-py's AuthenticationError
    # is a ConnectionError), then "started" when SIGTERM ended the wait.
    url = REDIS_URL.replace("redis://", "redis://nosuchuser:hunter2@")
    env = _env("unused", ACI_REDIS_URL=url, ACI_INSTANT_SOURCES="1")
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "worker"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and "WRONGPASS" in done.stderr, done.stderr
    assert "hunter2" not in done.stderr and "unavailable" not in done.stderr


def test_a_worker_stopped_before_redis_answered_never_says_started() -> None:
    env = _env("unused", ACI_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",
               ACI_INSTANT_SOURCES="1")  # fmt: skip
    out = _worker_output(env, until="redis unavailable at start")
    assert "stopped before Redis answered" in out and " started: " not in out, out


def test_the_start_line_names_each_log_topics_backend_and_metrics_bind_loopback(
    prefix: str, tmp_path: Path
) -> None:
    # Issue 35, item 9: the start line said `query_logs=LogRouter` (a class), and the metrics
    # listened on 0.0.0.0 where everything else binds loopback by default.
    from workers.sources.logs.scenario_files import write_file_scenario

    config = write_file_scenario(tmp_path)
    port = free_port()
    out = _worker_output(_env(prefix, ACI_LOGS_CONFIG=str(config)), "--metrics-port", str(port))
    started = next(line for line in out.splitlines() if " started: " in line)
    assert "query_logs=logs per topic (" in started and "LogRouter" not in started
    assert "APPLICATION FILE" in started
    assert f"metrics on 127.0.0.1:{port}/metrics" in out
    assert str(tmp_path) not in out  # no path in the start line
