"""Cancellation and progress under the real role users (issue 32): the submitter cancels and
reads progress, the worker admits the cancel, marks and polls, and nothing is refused."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from pipeline.cancel import Stage
from pipeline.client import EvidenceClient, ToolCall
from pipeline.redis_io import open_redis
from pipeline.settings import Settings
from tests.pipeline.helpers import running_worker
from tests.pipeline.sources import InstantSource
from tests.pipeline.test_acl import PREFIX, _denials, server  # noqa: F401  (server: a fixture)

pytestmark = pytest.mark.redis


class Slow(InstantSource):
    def __init__(self) -> None:
        super().__init__(delay=20.0)
        self.stopped = 0

    async def fetch(self, request: Any) -> Any:
        try:
            return await super().fetch(request)
        except anyio.get_cancelled_exc_class():
            self.stopped += 1
            raise


async def test_cancel_and_progress_need_no_new_permission(server: Any) -> None:  # noqa: F811
    settings = Settings(prefix=PREFIX, visibility_timeout_s=30.0, deadline_s=25.0)
    source = Slow()
    call = ToolCall(tool="lookup_knowledge", tool_call_id="c1", arguments='{"query": "q"}')
    with anyio.fail_after(40):
        async with (
            open_redis(server.url("worker")) as worker_redis,
            running_worker(worker_redis, settings, {"lookup_knowledge": source}),
            EvidenceClient.connect(settings, server.url("submitter")) as client,
        ):
            await client.submit_many("sess-c", [call])
            async for step in client.follow("sess-c", "c1"):
                if step.stage is Stage.RUNNING:
                    break
            assert await client.cancel("sess-c", "c1")
            final = await client.wait("sess-c", ["c1"], timeout=10)
            for _ in range(50):
                if source.stopped:
                    break
                await anyio.sleep(0.05)
    assert json.loads(bytes(final["c1"].model))["error"]["code"] == "CANCELLED"
    assert source.stopped == 1
    denials = await _denials(server)
    assert denials == [], [(d["username"], d["object"]) for d in denials]
