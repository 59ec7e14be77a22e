"""The chaos fleet sees its workers start: `WorkerProc.started` matches the start line a real
worker logs. When it stopped matching, every scenario silently waited out the 60 s limit of
`Run.fleet_ready` (the CI chaos subset ran ~5x slower)."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from chaos.fleet import STARTED, open_fleet
from tests.conftest import REDIS_URL

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("module", ["app.cli", "chaos.worker"])
async def test_fleet_sees_a_real_worker_start(module: str, prefix: str, redis: Any) -> None:
    # Lexical knowledge retrieval: this test is about the start line, not the model's load.
    env = {"ACI_REDIS_URL": REDIS_URL, "ACI_PREFIX": prefix, "ACI_KNOWLEDGE_RETRIEVAL": "lexical"}
    with open_fleet(env, 1, module=module, concurrency=2) as fleet:
        (worker,) = fleet.workers
        deadline = time.monotonic() + 40
        # Polls the worker's log file, as `Run.fleet_ready` does.
        while not worker.started() and worker.alive() and time.monotonic() < deadline:  # noqa: ASYNC110
            await anyio.sleep(0.1)
        assert worker.started(), worker.log.read_text("utf-8", "replace")[-2000:]


def test_start_line_pattern() -> None:
    assert STARTED.search("INFO aci.announce worker h-12-ab started: partitions 0 of 1, ...")
    assert STARTED.search("INFO aci.worker worker h-12-ab started (concurrency 4, partitions 0)")
    assert not STARTED.search("INFO aci.worker worker h-12-ab stopped")
    assert not STARTED.search("export started: job 7 attempt 2")
