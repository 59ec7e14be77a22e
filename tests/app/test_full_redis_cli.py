"""The CLI on a full Redis (maxmemory, noeviction): one line that says so and what to do.

Found by the on-call drill: `call` printed `pipeline error: RedisProtocolError: ERR` and a
worker started on a full Redis exited with `could not create the consumer group`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pipeline.test_full_redis import private_redis

pytestmark = pytest.mark.redis
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def full_url() -> Iterator[str]:
    with private_redis() as port:
        subprocess.run(
            ["redis-cli", "-p", str(port), "config", "set", "maxmemory", "1"],
            check=True, capture_output=True,
        )  # fmt: skip
        yield f"redis://127.0.0.1:{port}/0"


def _run(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ACI_REDIS_URL": url, "ACI_PREFIX": "full", "ACI_LOG_LEVEL": "WARNING"}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize(
    "args",
    [
        ("call", "query_logs", "--id", "c1", "--args", '{"topic":"APPLICATION","query":"x"}'),
        ("worker",),
    ],
    ids=["call", "worker"],
)
def test_a_full_redis_is_one_line_saying_maxmemory(full_url: str, args: tuple[str, ...]) -> None:
    done = _run(full_url, *args)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1, done.stderr
    assert last.startswith("pipeline error: RedisProtocolError: OOM from Redis at ACI_REDIS_URL")
    assert "maxmemory" in last and "Traceback" not in done.stderr
