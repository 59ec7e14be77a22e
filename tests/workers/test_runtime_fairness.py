"""Fairness (issue 23): one session's slow calls cannot hold every slot of a worker while another
session's fast call waits (`workers.runtime.share`), against the real Redis."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from pipeline.client import EvidenceClient, ToolCall
from pipeline.settings import Settings
from tests.pipeline.helpers import loads, running_worker
from tests.pipeline.sources import HangingSource, InstantSource
from workers.runtime.share import SessionShare

pytestmark = pytest.mark.redis


def test_the_cap_is_a_share_of_the_slots_and_only_binds_when_contested() -> None:
    share = SessionShare(16, 0.25)
    assert share.cap == 4 and SessionShare(1, 0.25).cap == 1 and SessionShare(3, 0.5).cap == 2
    assert all(share.take("a", contested=True) for _ in range(4))
    assert not share.take("a", contested=True)  # its share, while others may wait
    assert share.take("a", contested=False)  # alone: every slot it can use
    assert share.take("b", contested=True)
    for _ in range(5):
        share.done("a")
    assert share.running == {"b": 1}


async def fast_call_behind(redis: Any, prefix: str, hog: int, settle_s: float) -> float:
    """One fast call of another session submitted `settle_s` after `hog` SQL calls of one
    session that run to the deadline (0.5 s, a source that never answers), on 16 slots: how
    long it waited. Checks its answer, and that every hog call ends (TIMEOUT) once."""
    settings = Settings(prefix=prefix, visibility_timeout_s=3.0, deadline_s=0.5)
    slow = [
        ToolCall(tool="query_mysql", tool_call_id=f"s{i}",
                 arguments={"data_source": "shop", "sql": "SELECT SLEEP(10)"})
        for i in range(hog)
    ]  # fmt: skip
    fast = ToolCall(tool="lookup_knowledge", tool_call_id="f", arguments={"query": "pool"})
    sources = {"query_mysql": HangingSource(), "lookup_knowledge": InstantSource()}
    async with (
        EvidenceClient(redis, settings) as client,
        running_worker(redis, settings, sources, concurrency=16),
    ):
        with anyio.fail_after(60):
            assert await client.submit_many("hog", slow) == [None] * hog
            await anyio.sleep(settle_s)  # the hog's calls are admitted and running first
            started = time.monotonic()
            [result] = await client.call_many("other", [fast], timeout=10)
            waited = time.monotonic() - started
            done = await client.wait("hog", [c.tool_call_id for c in slow], 40)
    assert result is not None and loads(result.model)["evidence_status"] == "EVIDENCE_FOUND"
    assert len(done) == hog  # the hog loses nothing: every call ends (TIMEOUT), once
    assert {loads(r.model)["error"]["code"] for r in done.values()} == {"TIMEOUT"}
    return waited


@pytest.mark.serial
async def test_48_calls_to_the_deadline_do_not_delay_another_sessions_fast_call(
    redis: Any, prefix: str
) -> None:
    # FIFO over 16 slots the fast call would wait for three rounds of deadlines (~1.5 s);
    # with the share (4 of 16 slots) it starts at once.
    waited = await fast_call_behind(redis, prefix, 48, settle_s=0.3)
    assert waited < 0.45, waited  # under one deadline: it never waited for a slow call to end


@pytest.mark.serial
async def test_a_hogs_long_backlog_in_front_of_a_fast_call_is_passed_at_once(
    redis: Any, prefix: str
) -> None:
    # 160 slow calls of one session queued in front of another's fast call: the reader reads
    # 4 entries a time (the slots the hog leaves free), each over the hog's share and put
    # back. It paused 50 ms after every such read, so the fast call waited for the whole
    # backlog to be read past (~0.23 s behind 48 calls, ~0.84 s behind 160, 0.56 s under
    # load); now it reads on at once while a session under its share waits behind them.
    waited = await fast_call_behind(redis, prefix, 160, settle_s=0.1)
    assert waited < 0.45, waited


@pytest.mark.serial
async def test_a_session_alone_uses_every_slot(redis: Any, prefix: str) -> None:
    # 12 calls that run to the deadline (0.5 s) from one session and nobody else's: alone, it
    # holds 3 of the 4 slots (every slot but one share's worth), four rounds (~2 s). Held to
    # its share (1 of 4) while only its own entries waited, they ran one at a time (~6 s),
    # the rest put back over and over (found by the on-call drill helper).
    settings = Settings(prefix=prefix, visibility_timeout_s=3.0, deadline_s=0.5)
    slow = [
        ToolCall(tool="query_mysql", tool_call_id=f"s{i}",
                 arguments={"data_source": "shop", "sql": "SELECT SLEEP(10)"})
        for i in range(12)
    ]  # fmt: skip
    sources = {"query_mysql": HangingSource()}
    async with (
        EvidenceClient(redis, settings) as client,
        running_worker(redis, settings, sources, concurrency=4),
    ):
        with anyio.fail_after(30):
            started = time.monotonic()
            done = await client.call_many("alone", slow, timeout=20)
            took = time.monotonic() - started
    assert all(r is not None for r in done)
    assert {loads(r.model)["error"]["code"] for r in done if r is not None} == {"TIMEOUT"}
    assert took < 3.0, took  # four rounds of deadlines, not twelve
