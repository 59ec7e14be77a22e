"""Recovery with real processes: SIGKILL mid-invocation, SIGTERM drain, Redis restart (AOF)."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from pipeline.client import EvidenceClient
from pipeline.keys import GROUP, Keys
from pipeline.redis_io import open_redis
from pipeline.settings import Settings
from tests.conftest import REDIS_URL
from tests.pipeline.helpers import assert_exactly_once, books, running_worker
from tests.pipeline.sources import InstantSource
from tests.pipeline.test_pipeline import kcall

pytestmark = [pytest.mark.redis, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def spawn_worker(
    url: str, prefix: str, delay: float, visibility: float = 2.0
) -> Iterator[subprocess.Popen[str]]:
    args = [sys.executable, "-m", "tests.pipeline.slow_worker", url, prefix, str(delay)]
    proc = subprocess.Popen([*args, str(visibility)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        proc.stdout.close()


async def wait_all_final(
    client: EvidenceClient, session: str, ids: list[str], limit: float
) -> None:
    with anyio.fail_after(limit):
        while len(await client.wait(session, ids, 1.0)) < len(ids):
            pass


async def test_sigkill_mid_invocation_loses_nothing(redis: Any, prefix: str) -> None:
    settings = Settings(prefix=prefix, visibility_timeout_s=1.0, deadline_s=0.5)
    async with EvidenceClient(redis, settings) as client:
        calls = [kcall(i, f"q{i}") for i in range(40)]
        ids = [c.tool_call_id for c in calls]
        with spawn_worker(REDIS_URL, prefix, delay=0.3, visibility=1.0) as proc:
            await client.submit_many("k1", calls)
            await anyio.sleep(0.5)  # the worker holds a batch in flight
            pending = (await redis.xpending(Keys(prefix).invocations, GROUP))["pending"]
            assert pending > 0
            proc.send_signal(signal.SIGKILL)
            proc.wait(5)
        async with running_worker(redis, settings, {"lookup_knowledge": InstantSource()}):
            await wait_all_final(client, "k1", ids, 30)
        assert_exactly_once(await books(redis, prefix, "k1"), ids)


async def test_sigterm_drains_in_flight_work(redis: Any, prefix: str) -> None:
    settings = Settings(prefix=prefix)
    async with EvidenceClient(redis, settings) as client:
        calls = [kcall(i, f"q{i}") for i in range(8)]
        with spawn_worker(REDIS_URL, prefix, delay=0.5) as proc:
            await client.submit_many("k2", calls)
            await anyio.sleep(0.3)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(10) == 0
        keys = Keys(prefix)
        assert (await redis.xpending(keys.invocations, GROUP))["pending"] == 0
        done = await client.wait("k2", [c.tool_call_id for c in calls], 0.5)
        # What was read finished; what was not read stays queued for the next worker.
        unread = await redis.xlen(keys.invocations) - len(done)
        assert len(done) + unread == len(calls)
        assert len(done) >= 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def own_redis(port: int, folder: str) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            folder,
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--save",
            "",
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.1):
                break
            time.sleep(0.05)
        yield proc
    finally:
        proc.terminate()
        proc.wait(5)


@contextlib.asynccontextmanager
async def restartable() -> AsyncIterator[tuple[int, str]]:
    folder = tempfile.mkdtemp(prefix="aci-aof-")
    yield free_port(), folder


async def test_redis_restart_with_aof_loses_and_duplicates_nothing(prefix: str) -> None:
    async with restartable() as (port, folder):
        url = f"redis://127.0.0.1:{port}/0"
        settings = Settings(prefix=prefix, visibility_timeout_s=2.0, deadline_s=1.0)
        calls = [kcall(i, f"q{i}") for i in range(200)]
        ids = [c.tool_call_id for c in calls]
        with own_redis(port, folder) as server:
            async with open_redis(url) as redis, EvidenceClient(redis, settings) as client:
                await client.submit_many("r1", calls[:100])
                async with running_worker(
                    redis, settings, {"lookup_knowledge": InstantSource(0.02)}
                ):
                    await anyio.sleep(0.3)
                    server.terminate()
                    server.wait(5)
                    await anyio.sleep(1.0)  # Redis is down: the worker backs off
                    with own_redis(port, folder):
                        await client.submit_many("r1", calls[100:])
                        await wait_all_final(client, "r1", ids, 60)
                        assert_exactly_once(await books(redis, prefix, "r1"), ids)
        assert await anyio.Path(folder).is_dir()
