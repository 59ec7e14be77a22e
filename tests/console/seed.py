"""Recorded sessions for the console's tests, made by the real pipeline (a client, an
in-process worker, test sources standing in for the upstreams) on a real Redis."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import redis as redis_sync

from contracts import Bounds, Request
from pipeline.client import EvidenceClient, ToolCall
from pipeline.redis_io import open_redis
from pipeline.settings import Settings
from tests.pipeline.helpers import running_worker
from workers.sources import Source
from workers.sources.instant import InstantSource

TOOLS: Final = ("lookup_knowledge", "query_logs", "query_mysql")
# Printable ASCII without whitespace: a valid tool call id, and markup if it were not escaped.
HOSTILE_ID: Final = "<script>alert('id')</script>"
HOSTILE_TEXT: Final = "<script>alert(1)</script> \x1b[31mRED\x1b[0m \u202egnp.exe <b>bold</b>"
SESSION: Final = "sess-main"
HOSTILE: Final = "sess-hostile"
LARGE: Final = "sess-large"


class HostileSource:
    """A knowledge upstream whose hits quote hostile text, `hits` of them, each `chars` long."""

    def __init__(self, hits: int = 1, chars: int = 200) -> None:
        self.hits = hits
        self.chars = chars

    async def fetch(self, request: Request) -> Any:
        body = (HOSTILE_TEXT + " " + getattr(request, "query", "")).ljust(self.chars, "x")
        return {
            "contextPack": {
                "relevanceLevel": "high",
                "hits": [
                    {
                        "documentId": f"doc-{i}",
                        "source": "runbooks/hostile.md",
                        "title": HOSTILE_TEXT,
                        "breadcrumb": "Hostile > Text",
                        "content": body[: self.chars],
                    }
                    for i in range(self.hits)
                ],
            }
        }

    async def aclose(self) -> None:
        return None


def settings_for(prefix: str, url: str, **kw: Any) -> Settings:
    return Settings(prefix=prefix, redis_url=url, visibility_timeout_s=2.0, deadline_s=1.0, **kw)


def main_calls() -> list[ToolCall]:
    """All three tools, a duplicate scope, an invalid request and an unknown tool."""
    mysql = {"data_source": "orders", "sql": "SELECT id FROM orders WHERE id = ?", "params": [1]}
    return [
        ToolCall(tool="lookup_knowledge", tool_call_id="k1", arguments={"query": "pool exhausted"}),
        ToolCall(
            tool="query_logs", tool_call_id="l1", arguments={"topic": "APPLICATION", "query": "t"}
        ),
        ToolCall(tool="query_mysql", tool_call_id="m1", arguments=mysql),
        ToolCall(tool="lookup_knowledge", tool_call_id="d1", arguments={"query": "pool exhausted"}),
        ToolCall(tool="lookup_knowledge", tool_call_id="e1", arguments={"query": " "}),
        ToolCall(tool="delete_everything", tool_call_id="e2", arguments={}),
    ]


async def run_calls(
    url: str,
    settings: Settings,
    session: str,
    calls: list[ToolCall],
    sources: Mapping[str, Source] | None = None,
    *,
    worker_url: str | None = None,
) -> None:
    """Submit `calls` under `session` and wait until every one is final."""
    sources = sources or dict.fromkeys(TOOLS, InstantSource())
    async with (
        open_redis(worker_url or url, cluster=settings.redis_cluster) as wredis,
        open_redis(url, cluster=settings.redis_cluster) as redis,
        running_worker(wredis, settings, sources),
        EvidenceClient(redis, settings) as client,
    ):
        for start in range(0, len(calls), 2000):
            results = await client.call_many(session, calls[start : start + 2000], timeout=60)
            assert all(r is not None for r in results)


async def seed_all(url: str, settings: Settings, *, worker_url: str | None = None) -> None:
    """The main session, a hostile one, and a 64 KB observation."""
    await run_calls(url, settings, SESSION, main_calls(), worker_url=worker_url)
    hostile = [
        ToolCall(tool="lookup_knowledge", tool_call_id=HOSTILE_ID, arguments={"query": "evil"}),
    ]
    await run_calls(
        url, settings, HOSTILE, hostile, {"lookup_knowledge": HostileSource()},
        worker_url=worker_url,
    )  # fmt: skip


def large_settings(prefix: str, url: str) -> Settings:
    """Bounds that let one observation reach 64 KB (100 hits of 700 characters)."""
    bounds = Bounds(rag_max_evidence=100, rag_excerpt_chars=700, observation_max_bytes=80_000)
    return settings_for(prefix, url, bounds=bounds)


async def seed_large(url: str, settings: Settings) -> None:
    call = ToolCall(tool="lookup_knowledge", tool_call_id="big", arguments={"query": "large"})
    await run_calls(url, settings, LARGE, [call], {"lookup_knowledge": HostileSource(120, 700)})


def drop_prefix(url: str, prefix: str) -> None:
    """Delete this test's keys only (never FLUSHALL the shared server)."""
    client = redis_sync.Redis.from_url(url)
    for pattern in (f"{{{prefix}}}:*", f"{{{prefix}:*"):
        keys = list(client.scan_iter(match=pattern, count=1000))
        for start in range(0, len(keys), 1000):
            client.delete(*keys[start : start + 1000])
    client.close()
