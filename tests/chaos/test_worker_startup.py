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


def run_worker_briefly(seconds: float) -> tuple[int | None, str]:
    """Start a worker on a closed port; returns (exit code or None if still running, output)."""
    port = free_port()
    env = {
        **os.environ,
        "ACI_REDIS_URL": f"redis://u:{PASSWORD}@127.0.0.1:{port}/0",
        "ACI_PREFIX": "startup",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "--log-level", "INFO", "worker"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + seconds
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    code = proc.poll()
    if code is None:
        proc.terminate()
    out, _ = proc.communicate(timeout=20)
    return code, out + f"\n(port {port})"


@pytest.fixture(scope="module")
def brief_run() -> tuple[int | None, str]:
    """One 12 s run, read by both tests (each used to start its own: 13 s each)."""
    return run_worker_briefly(12.0)  # startup (sources) takes a few seconds first


def test_worker_waits_for_redis_at_startup(brief_run: tuple[int | None, str]) -> None:
    code, out = brief_run
    assert code is None, out


def test_worker_failure_output_names_no_host_or_port(brief_run: tuple[int | None, str]) -> None:
    _code, out = brief_run
    body, port_line = out.rsplit("\n", 1)
    port = port_line.strip("()").split()[1]
    assert "Traceback" not in body and "127.0.0.1" not in body and port not in body, body[-600:]
