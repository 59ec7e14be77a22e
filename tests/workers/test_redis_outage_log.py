"""A worker's log through a Redis outage: the outage is said when it starts and when it ends,
not once per beat and per takeover round; a Redis back without its data says so.

Found by the on-call drill (a worker on a private Redis, SIGKILLed, restarted empty 45 s
later): the heartbeat and the janitor logged `heartbeat: redis unavailable` and `janitor:
redis unavailable (partition 0)` every few seconds, nothing said when Redis answered again,
and the return of an empty Redis was only `consumer group lost; creating it again`. (The
reader's and admission's per-retry lines are theirs and not checked here.)
"""

from __future__ import annotations

import logging
import subprocess
import time

import anyio
import pytest

from chaos.services import free_port
from pipeline.redis_io import ensure_group, open_redis
from pipeline.settings import Settings
from workers.runtime.admission import admission_loop
from workers.runtime.heartbeat import heartbeat_loop
from workers.runtime.janitor import janitor_loop
from workers.runtime.reader import read_loop
from workers.runtime.state import WorkerState

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def _start(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    for _ in range(100):
        done = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True)
        if done.stdout.strip() == b"PONG":
            return proc
        time.sleep(0.05)
    raise AssertionError("redis-server did not start")


async def test_an_outage_is_said_when_it_starts_and_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = free_port()
    # Beats every 0.2 s, takeover rounds every 0.3 s: an outage of 2 s spans many of each.
    settings = Settings(prefix="outage", visibility_timeout_s=1.2, deadline_s=0.5)
    proc = _start(port)
    try:
        async with open_redis(f"redis://127.0.0.1:{port}/0") as redis:
            await ensure_group(redis, settings.keys())
            state = WorkerState(redis, settings, {}, concurrency=1, consumer="w-outage")
            done = anyio.Event()
            caplog.set_level(logging.WARNING, logger="aci.worker")
            async with anyio.create_task_group() as tg:
                tg.start_soon(heartbeat_loop, state, done)
                tg.start_soon(janitor_loop, state, done, tg)
                # The reader and admission retry meanwhile, at DEBUG: the heartbeat says it.
                tg.start_soon(admission_loop, state, done)
                tg.start_soon(read_loop, state, done, tg)
                await anyio.sleep(0.5)
                proc.kill()
                proc.wait(5)
                await anyio.sleep(2.0)
                proc = _start(port)  # back, empty: no group, no streams
                await anyio.sleep(1.5)
                done.set()
    finally:
        proc.kill()
        proc.wait(5)
    lines = [r.getMessage() for r in caplog.records if r.name == "aci.worker"]
    away = (
        "redis unavailable: this worker waits and retries (reads, admission, takeovers, "
        "finishes and beats); said again when it answers"
    )
    assert lines.count(away) == 1, lines
    assert sum(line.startswith("redis answers again after ") for line in lines) == 1, lines
    lost = [line for line in lines if "consumer group" in line]
    assert lost and all(
        line == "the consumer group of {outage}:invocations is gone (Redis restarted without "
        "its data, or the stream was deleted): creating it again; what it held is lost"
        for line in lost
    ), lines
    assert len(lines) == 2 + len(lost), lines


async def test_a_full_redis_refusing_beats_is_said_once_each_way(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Drill 5: a full Redis got 'heartbeat: redis refused (OOM)' every beat, as an ERROR.
    port = free_port()
    settings = Settings(prefix="full", visibility_timeout_s=1.2, deadline_s=0.5)
    proc = _start(port)
    try:
        async with open_redis(f"redis://127.0.0.1:{port}/0") as redis:
            state = WorkerState(redis, settings, {}, concurrency=1, consumer="w-full")
            done = anyio.Event()
            caplog.set_level(logging.WARNING, logger="aci.worker")
            async with anyio.create_task_group() as tg:
                tg.start_soon(heartbeat_loop, state, done)
                await anyio.sleep(0.3)
                await redis.config_set("maxmemory", 1)
                await anyio.sleep(1.5)  # about seven beats refused
                await redis.config_set("maxmemory", 0)
                await anyio.sleep(0.5)
                done.set()
    finally:
        proc.kill()
        proc.wait(5)
    lines = [r.getMessage() for r in caplog.records if r.name == "aci.worker"]
    assert lines[0] == (
        "heartbeat: redis refused (OOM): status shows this worker dead until a beat is accepted"
    ), lines
    assert len(lines) == 2 and lines[1].startswith("heartbeat: redis accepts beats again after")
