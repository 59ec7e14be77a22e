"""The agent-runtime adapters cancel their calls when their coroutine is cancelled (issue 32):
a user pressing stop cancels the turn's task, and every call of the turn ends CANCELLED."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from hosts import anthropic, openai_chat
from hosts.langchain_tools import evidence_tools
from pipeline.client import EvidenceClient
from pipeline.settings import Settings
from tests.pipeline.helpers import running_worker
from tests.pipeline.sources import InstantSource

pytestmark = pytest.mark.redis


def _chat(ids: list[str]) -> dict[str, Any]:
    calls = [{"id": i, "type": "function", "function": {"name": "lookup_knowledge",
              "arguments": json.dumps({"query": "pool"})}} for i in ids]  # fmt: skip
    return {"role": "assistant", "content": None, "tool_calls": calls}


def _anthropic(ids: list[str]) -> dict[str, Any]:
    content = [{"type": "tool_use", "id": i, "name": "lookup_knowledge",
                "input": {"query": "pool"}} for i in ids]  # fmt: skip
    return {"role": "assistant", "content": content, "stop_reason": "tool_use"}


async def test_cancelling_a_turn_cancels_its_calls(redis: Any, prefix: str) -> None:
    settings = Settings(prefix=prefix, deadline_s=30.0, visibility_timeout_s=40.0)
    source = InstantSource(delay=20.0)
    async with (
        EvidenceClient(redis, settings) as client,
        running_worker(redis, settings, {"lookup_knowledge": source}),
    ):
        with anyio.move_on_after(1.5):
            await openai_chat.answer_tool_calls(_chat(["o1", "o2"]), client, "s-a", timeout=30)
        with anyio.move_on_after(1.5):
            await anthropic.answer_tool_calls(_anthropic(["a1"]), client, "s-a", timeout=30)
        tool = next(t for t in evidence_tools(client, "s-a") if t.name == "lookup_knowledge")
        with anyio.move_on_after(1.5):
            await tool.ainvoke({"name": "lookup_knowledge", "args": {"query": "pool"},
                                "id": "l1", "type": "tool_call"})  # fmt: skip
        ids = ["o1", "o2", "a1", "l1"]
        final = await client.wait("s-a", ids, timeout=10)
    codes = {i: json.loads(bytes(final[i].model))["error"]["code"] for i in ids}
    assert codes == dict.fromkeys(ids, "CANCELLED")
