"""Live updates: the SSE event generator on bounded data (ids are stream entry ids, a resume
starts after the id given, one cursor per partition), and the live stream through a real
uvicorn on a free loopback port, read with httpx-sse under a timeout, resumed by
`Last-Event-ID` after a reconnect."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
import uvicorn
from httpx_sse import aconnect_sse

from app.console import create_app
from app.console.live import lifecycle_events, parse_cursors
from chaos.services import free_port
from pipeline.client import ToolCall
from pipeline.settings import Settings
from tests.conftest import REDIS_URL
from tests.console.seed import drop_prefix, run_calls, settings_for

pytestmark = pytest.mark.redis


@pytest.fixture
def settings() -> Any:
    prefix = f"c{uuid.uuid4().hex[:12]}"
    yield settings_for(prefix, REDIS_URL)
    drop_prefix(REDIS_URL, prefix)


def _calls(n: int, tag: str = "c") -> list[ToolCall]:
    return [
        ToolCall(tool="lookup_knowledge", tool_call_id=f"{tag}{i}", arguments={"query": f"q{i}"})
        for i in range(n)
    ]


async def _all(redis: Any, settings: Settings, **kw: Any) -> list[dict[str, Any]]:
    return [e async for e in lifecycle_events(redis, settings, follow=False, **kw)]


async def test_events_carry_stream_ids_and_resume_after_one(redis: Any, settings: Settings) -> None:
    await run_calls(REDIS_URL, settings, "s-live", _calls(3))
    await run_calls(REDIS_URL, settings, "s-other", _calls(2, "o"))
    events = await _all(redis, settings, session="s-live", last_event_id="0-0")
    assert len(events) == 6 and {e["event"] for e in events} == {"lifecycle"}
    stream = await redis.xrange(settings.keys().lifecycle, "-", "+")
    ids = {eid.decode() for eid, _ in stream}
    assert all(e["id"] in ids for e in events)
    data = [json.loads(e["data"]) for e in events]
    assert {d["session"] for d in data} == {"s-live"}
    assert sorted(d["status"] for d in data).count("PROJECTING") == 3
    # Resume after the third: exactly the rest, in order.
    rest = await _all(redis, settings, session="s-live", last_event_id=events[2]["id"])
    assert [e["id"] for e in rest] == [e["id"] for e in events[3:]]
    # Every session's events; an id that is not ours starts from now (nothing yet).
    assert len(await _all(redis, settings, last_event_id="0-0")) == 10
    assert await _all(redis, settings, last_event_id="garbage") == []


async def test_partitioned_event_ids_hold_one_cursor_per_partition(redis: Any) -> None:
    prefix = f"c{uuid.uuid4().hex[:12]}"
    settings = settings_for(prefix, REDIS_URL, partitions=3)
    try:
        for s in ("p-a", "p-b", "p-c", "p-d"):
            await run_calls(REDIS_URL, settings, s, _calls(1, s))
        events = await _all(redis, settings, last_event_id="0-0,0-0,0-0")
        assert len(events) == 8
        assert all(parse_cursors(e["id"], 3) for e in events)
        middle = events[3]["id"]
        assert len(await _all(redis, settings, last_event_id=middle)) == 4
        one = await _all(redis, settings, session="p-b", last_event_id="0-0")
        assert len(one) == 2 and parse_cursors(one[0]["id"], 1)
    finally:
        drop_prefix(REDIS_URL, prefix)


def test_cursors_are_checked() -> None:
    assert parse_cursors("1-0,2-3", 2) == ["1-0", "2-3"]
    for bad in ("", "1-0", "1-0,x", "1-0,2-3,4-5", "1-0\n,2-0"):
        assert parse_cursors(bad, 2) is None


@contextlib.asynccontextmanager
async def serving(settings: Settings, **kw: Any) -> AsyncIterator[str]:
    """The console under a real uvicorn on a free loopback port; its base URL."""
    port = free_port()
    config = uvicorn.Config(
        create_app(settings, REDIS_URL), host="127.0.0.1", port=port, log_level="warning",
        lifespan="on", **kw,
    )  # fmt: skip
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        for _ in range(500):  # uvicorn says it has started by a flag only
            if server.started:
                break
            await anyio.sleep(0.02)
        assert server.started, "uvicorn did not start"
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True


async def _read(url: str, n: int, headers: dict[str, str] | None = None) -> list[Any]:
    got: list[Any] = []
    async with (
        httpx.AsyncClient(timeout=10) as client,
        aconnect_sse(client, "GET", url, headers=headers or {}) as source,
    ):
        assert source.response.headers["content-type"].startswith("text/event-stream")
        async for event in source.aiter_sse():
            if event.event == "lifecycle":
                got.append(event)
            if len(got) >= n:
                break
    return got


async def test_live_stream_through_uvicorn_resumes_with_last_event_id(settings: Settings) -> None:
    async with serving(settings) as base:
        url = f"{base}/events?session=s-live"
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                results: list[Any] = []

                async def read() -> None:
                    results.extend(await _read(url, 4))

                tg.start_soon(read)
                await anyio.sleep(0.5)  # the stream is open and tailing from now
                await run_calls(REDIS_URL, settings, "s-live", _calls(2))
            assert len(results) == 4
            statuses = [json.loads(e.data)["status"] for e in results]
            assert statuses.count("PROJECTING") == 2 and statuses.count("READY") == 2
            # A reconnect with the first event's id gets the three after it.
            again = await _read(url, 3, {"Last-Event-ID": results[0].id})
            assert [e.id for e in again] == [e.id for e in results[1:]]
            # As the browser's script does after a pause: ?after=.
            after = await _read(f"{url}&after={results[1].id}", 2)
            assert [e.id for e in after] == [e.id for e in results[2:]]


async def test_pages_through_uvicorn_under_a_root_path(settings: Settings) -> None:
    await run_calls(REDIS_URL, settings, "s-root", _calls(1))
    async with serving(settings, root_path="/aci") as base, httpx.AsyncClient() as client:
        # A proxy that strips its prefix forwards `/`; links point under `/aci`.
        page = await client.get(f"{base}/")
        assert page.status_code == 200 and 'href="/aci/session?id=s-root"' in page.text
        again = await client.get(f"{base}/session?id=s-root")
        assert again.status_code == 200 and "c0" in again.text


async def test_event_text_spells_out_bidi_and_invisible_characters(
    redis: Any, settings: Settings
) -> None:
    # A submitter names any tool: admission records it (an UNKNOWN_TOOL error) and the live
    # feed wrote it with textContent, so U+202E reversed the feed's line as the pages never do.
    call = ToolCall(tool="query\u202e_logs\u200bx\x1b", tool_call_id="c1", arguments={})
    await run_calls(REDIS_URL, settings, "s-live", [call])
    events = await _all(redis, settings, session="s-live", last_event_id="0-0")
    tools = {json.loads(e["data"])["tool"] for e in events}
    assert tools == {"query\\u202e_logs\\u200bx\\x1b"}
