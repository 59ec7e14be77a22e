"""Test sources with controlled behaviour (instant, slow, hanging, garbage, failing).

They stand in for a tool's upstream, not for Redis: the pipeline under test is real.
"""

from __future__ import annotations

from typing import Any

import anyio

from contracts import ErrorCode, LogScope, LogsUpstream, Request
from workers.sources import SourceError


def answer(query: str) -> dict[str, Any]:
    """A RAG service's answer: one hit quoting the query, or none for query 'nothing'."""
    if query == "nothing":
        return {"contextPack": {"hits": []}}
    return {
        "contextPack": {
            "relevanceLevel": "high",
            "hits": [
                {
                    "documentId": "doc-1",
                    "source": "runbooks/pool.md",
                    "title": "Pool",
                    "breadcrumb": "Pool > Symptoms",
                    "content": f"Connection pool exhausted while asking: {query}",
                    "scores": {"bm25": 12.5},
                }
            ],
        },
        "retrievalTrace": [{"step": "bm25", "ms": 0.2}],
    }


class InstantSource:
    """Answers every request at once with one knowledge hit (or none for query 'nothing')."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.calls = 0

    async def fetch(self, request: Request) -> Any:
        self.calls += 1
        if self.delay:
            await anyio.sleep(self.delay)
        return answer(getattr(request, "query", ""))

    async def aclose(self) -> None:
        return None


class HangingSource(InstantSource):
    async def fetch(self, request: Request) -> Any:
        await anyio.sleep(3600)


class GarbageSource(InstantSource):
    async def fetch(self, request: Request) -> Any:
        return {"unexpected": [1, 2, 3]}


class FailingSource(InstantSource):
    async def fetch(self, request: Request) -> Any:
        raise SourceError(ErrorCode.UNAVAILABLE, "the knowledge service is unavailable")


class EmptyLogSource(InstantSource):
    async def fetch(self, request: Request) -> Any:
        scope = LogScope(
            topic=request.topic,  # type: ignore[union-attr]
            query="",
            lookback_minutes=60,
            start_time="2026-03-14T09:00:00+08:00",
            end_time="2026-03-14T10:00:00+08:00",
        )
        return LogsUpstream(source_kind="MOCK", scope=scope, match_count=0)


class ImmediateKnowledge(InstantSource):
    """An `ImmediateSource`: the worker runs its calls inline, a read batch at a time.
    Query 'fail' raises a `SourceError`, 'bug' a plain exception, 'garbage' answers nonsense."""

    awaited = 0

    def fetch_now(self, request: Request) -> Any:
        self.calls += 1
        query = getattr(request, "query", "")
        if query == "fail":
            raise SourceError(ErrorCode.UNAVAILABLE, "the knowledge service is unavailable")
        if query == "bug":
            raise RuntimeError("a bug in the source")
        if query == "garbage":
            return {"unexpected": [1, 2, 3]}
        return answer(query)

    async def fetch(self, request: Request) -> Any:
        self.awaited += 1  # by a run that must be awaited (one that records a span)
        return self.fetch_now(request)
