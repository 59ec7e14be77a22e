"""`aci-evidence cancel --session S --id ID` and Ctrl-C on `call` (issue 32), as processes
against the real Redis, with a worker in this process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from pipeline.cancel import Stage
from pipeline.client import EvidenceClient, ToolCall
from pipeline.settings import Settings
from tests.conftest import REDIS_URL
from tests.pipeline.helpers import running_worker
from tests.pipeline.sources import InstantSource

pytestmark = pytest.mark.redis
ROOT = Path(__file__).resolve().parents[2]


class SlowSource(InstantSource):
    def __init__(self) -> None:
        super().__init__(delay=20.0)


def _env(prefix: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(ACI_REDIS_URL=REDIS_URL, ACI_PREFIX=prefix, PYTHONPATH=str(ROOT))
    return env


async def _cli(prefix: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "app.cli", *args]
    return await anyio.to_thread.run_sync(
        lambda: subprocess.run(command, env=_env(prefix), capture_output=True, text=True,
                               timeout=60, check=False)
    )  # fmt: skip


def _call(i: str) -> ToolCall:
    return ToolCall(tool="lookup_knowledge", tool_call_id=i, arguments='{"query": "pool"}')


def _settings(prefix: str) -> Settings:
    return Settings(prefix=prefix, deadline_s=30.0, visibility_timeout_s=40.0)


async def test_cancel_ends_a_running_call_and_exits_0(redis: Any, prefix: str) -> None:
    settings = _settings(prefix)
    async with (
        EvidenceClient(redis, settings) as client,
        running_worker(redis, settings, {"lookup_knowledge": SlowSource()}),
    ):
        await client.submit_many("s-cli", [_call("c1")])
        async for step in client.follow("s-cli", "c1"):
            if step.stage is Stage.RUNNING:
                break
        done = await _cli(prefix, "cancel", "--session", "s-cli", "--id", "c1", "--timeout", "10")
        assert done.returncode == 0, done.stderr
        printed = json.loads(done.stdout)
        assert printed["lifecycle"] == "ERROR"
        assert printed["model"]["error"]["code"] == "CANCELLED"
        assert printed["control"]["error_code"] == "CANCELLED"
        # Already final: exit 0 again, the same result.
        again = await _cli(prefix, "cancel", "--session", "s-cli", "--id", "c1")
        assert again.returncode == 0 and json.loads(again.stdout) == printed


async def test_cancel_of_a_call_that_finished_first_exits_0_with_its_result(
    redis: Any, prefix: str
) -> None:
    settings = _settings(prefix)
    async with (
        EvidenceClient(redis, settings) as client,
        running_worker(redis, settings, {"lookup_knowledge": InstantSource()}),
    ):
        assert await client.call("s-cli", _call("c2"), timeout=10) is not None
    done = await _cli(prefix, "cancel", "--session", "s-cli", "--id", "c2")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["lifecycle"] == "READY"


async def test_cancel_of_no_such_call_exits_1(prefix: str) -> None:
    done = await _cli(prefix, "cancel", "--session", "s-cli", "--id", "nope", "--timeout", "0.5")
    assert done.returncode == 1
    assert "no call 'nope' in session 's-cli'" in done.stderr


async def test_ctrl_c_on_call_cancels_the_call(redis: Any, prefix: str) -> None:
    settings = _settings(prefix)
    source = SlowSource()
    async with (
        EvidenceClient(redis, settings) as client,
        running_worker(redis, settings, {"lookup_knowledge": source}),
    ):
        command = [sys.executable, "-m", "app.cli", "call", "lookup_knowledge", "--id", "c3",
                   "--session", "s-cli", "--args", '{"query": "pool"}']  # fmt: skip
        process = await anyio.open_process(command, env=_env(prefix),
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        async with process:
            with anyio.fail_after(30):
                async for step in client.follow("s-cli", "c3"):
                    if step.stage is Stage.RUNNING:
                        break
            process.send_signal(signal.SIGINT)
            with anyio.fail_after(20):
                code = await process.wait()
        assert code == 130
        found = await client.wait("s-cli", ["c3"], timeout=5)
        model = json.loads(bytes(found["c3"].model))
        assert model["error"]["code"] == "CANCELLED"
