"""`wrap_sources`: the one hook that puts a wrapper (fault injection, tracing) around every
source, as `chaos.worker` does with `FaultySource`. No server: the instant sources."""

from __future__ import annotations

from typing import Any

import anyio

from chaos.worker import GARBAGE, HANG, FaultySource
from contracts import LookupKnowledgeRequest, QueryLogsRequest, QueryMysqlRequest, Request, Topic
from workers.sources import Source, open_sources, wrap_sources
from workers.stage import is_immediate

REQUESTS: dict[str, Request] = {
    "lookup_knowledge": LookupKnowledgeRequest(query="pool exhausted"),
    "query_logs": QueryLogsRequest(topic=Topic.APPLICATION, query="timeout"),
    "query_mysql": QueryMysqlRequest(data_source="shop", sql="SELECT 1"),
}


class _Counting:
    def __init__(self, inner: Source) -> None:
        self.inner = inner
        self.calls = 0

    async def fetch(self, request: Request) -> Any:
        self.calls += 1
        return await self.inner.fetch(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_every_source_is_wrapped_and_the_map_is_left_alone() -> None:
    async with open_sources({"ACI_INSTANT_SOURCES": "1"}) as real:
        before = dict(real)
        wrapped = wrap_sources(real, _Counting)
        assert real == before
        assert set(wrapped) == set(real) == set(REQUESTS)
        for tool, source in wrapped.items():
            assert isinstance(source, _Counting) and source.inner is real[tool]
            assert await source.fetch(REQUESTS[tool]) == await real[tool].fetch(REQUESTS[tool])
            assert source.calls == 1


async def test_a_wrapper_without_fetch_now_sees_every_call() -> None:
    async with open_sources({"ACI_INSTANT_SOURCES": "1"}) as real:
        assert all(is_immediate(tool, real) for tool in real)
        wrapped = wrap_sources(real, _Counting)
        assert not any(is_immediate(tool, wrapped) for tool in wrapped)


async def test_faulty_sources_through_the_hook() -> None:
    async with open_sources({"ACI_INSTANT_SOURCES": "1"}) as real:
        faulty = wrap_sources(real, FaultySource)
        garbage = QueryLogsRequest(topic=Topic.APPLICATION, query=GARBAGE)
        assert await faulty["query_logs"].fetch(garbage) == {
            "rows": "not a log answer",
            "match_count": "many",
        }
        hang = LookupKnowledgeRequest(query=HANG)
        with anyio.move_on_after(0.2) as scope:
            await faulty["lookup_knowledge"].fetch(hang)
        assert scope.cancelled_caught
        plain = REQUESTS["query_mysql"]
        assert await faulty["query_mysql"].fetch(plain) == await real["query_mysql"].fetch(plain)
