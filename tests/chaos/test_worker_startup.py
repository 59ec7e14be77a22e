"""A worker process started while Redis is unreachable (found by the redis_outage scenario)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chaos.services import free_port

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "Startup-pw-29f"


# The 4th "retrying" line: the worker has met a refused Redis 4 times (backoff 0.1, 0.2, 0.4,
# then this 0.8 s; about 3 s with the connection attempts) and is still up. A fixed 12 s run
# waited for this (startup takes a few seconds first) and then for seconds of nothing.
RETRIED = "redis unavailable at start; retrying in 0.8s"


def run_worker_until_retrying(log: Path, limit: float = 90.0) -> tuple[int | None, str]:
    """Start a worker on a closed port and wait until it has retried 4 times (or exited, or
    `limit` s passed); returns (exit code or None if still running, output)."""
    port = free_port()
    env = {
        **os.environ,
        "ACI_REDIS_URL": f"redis://u:{PASSWORD}@127.0.0.1:{port}/0",
        "ACI_PREFIX": "startup",
    }
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "--log-level", "INFO", "worker"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    deadline = time.monotonic() + limit
    while proc.poll() is None and time.monotonic() < deadline:
        if RETRIED in log.read_text("utf-8", "replace"):
            break
        time.sleep(0.1)
    code = proc.poll()
    if code is None:
        proc.terminate()
    proc.wait(20)
    return code, log.read_text("utf-8", "replace") + f"\n(port {port})"


@pytest.fixture(scope="module")
def brief_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int | None, str]:
    """One run, read by both tests (each used to start its own)."""
    return run_worker_until_retrying(tmp_path_factory.mktemp("startup") / "worker.log")


def test_worker_waits_for_redis_at_startup(brief_run: tuple[int | None, str]) -> None:
    code, out = brief_run
    assert code is None, out
    assert out.count("redis unavailable at start; retrying") >= 4 and RETRIED in out, out


def test_worker_failure_output_names_no_host_or_port(brief_run: tuple[int | None, str]) -> None:
    _code, out = brief_run
    body, port_line = out.rsplit("\n", 1)
    port = port_line.strip("()").split()[1]
    assert "Traceback" not in body and "127.0.0.1" not in body and port not in body, body[-600:]
