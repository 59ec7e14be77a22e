"""Hostile upstream answers never kill a worker, never exhaust its memory, never outlive the
deadline: each becomes that call's typed ERROR (a lone surrogate too: an excerpt is verbatim
text, and no text can carry one), and the worker goes on with the next call.

Real sockets throughout: the hostile RAG upstream is `chaos.hostile` (a local HTTP server), the
silent MySQL is a TCP listener that accepts and never answers.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from chaos.hostile import HostileServer, hostile_server
from contracts import ErrorCode, EvidenceStatus, LifecycleStatus, LookupKnowledgeRequest
from contracts.results import ErrorResult, RagResult
from pipeline.client import EvidenceClient, ToolCall
from pipeline.settings import Settings
from tests.pipeline.helpers import assert_exactly_once, books, running_worker
from workers.sources import SourceError, open_sources, warm_up
from workers.sources.knowledge.rag_http import HttpRagSource, RagHttpSettings
from workers.sources.mysql.source import ConnectParams, MysqlSource
from workers.stage import build_outcome, run_stages

MB = 1024 * 1024


@pytest.fixture(scope="module")
def upstream() -> Iterator[HostileServer]:
    with hostile_server(bomb_bytes=256 * MB, drip_interval_s=0.5) as server:
        _ = server.bombs.gzip, server.bombs.zstd, server.bombs.deflate  # built before any test
        yield server


def rag(server: HostileServer, **kw: Any) -> HttpRagSource:
    return HttpRagSource(RagHttpSettings(url=server.url, **kw))


async def fetch_code(server: HostileServer, kind: str, **kw: Any) -> ErrorCode:
    source = rag(server, **kw)
    try:
        with pytest.raises(SourceError) as info:
            await source.fetch(LookupKnowledgeRequest(query=f"hostile:{kind}"))
    finally:
        await source.aclose()
    assert "127.0.0.1" not in info.value.message and "http" not in info.value.message
    return info.value.code


def rag_settings(**kw: Any) -> Settings:
    return Settings(deadline_s=2.0, visibility_timeout_s=4.0, **kw)


# -- lone surrogates ----------------------------------------------------------------------


async def test_lone_surrogate_in_an_answer_is_a_projection_error_not_fatal(
    upstream: HostileServer,
) -> None:
    source = rag(upstream)
    try:
        outcome = await run_stages(
            tool="lookup_knowledge",
            tool_call_id="call_s",
            arguments={"query": "hostile:surrogate"},
            session_id="s",
            sources={"lookup_knowledge": source},
            settings=rag_settings(),
        )
    finally:
        await source.aclose()
    assert isinstance(outcome.result, ErrorResult)
    assert outcome.result.error.code is ErrorCode.PROJECTION


class _SurrogateSource:
    """A source (any source) whose raw answer holds a lone surrogate the projector keeps."""

    async def fetch(self, request: Any) -> Any:
        return {"contextPack": {"hits": [{"documentId": "d", "content": "pool \ud800"}]}}

    def fetch_now(self, request: Any) -> Any:
        return {"contextPack": {"hits": [{"documentId": "d", "content": "pool \ud800"}]}}

    async def aclose(self) -> None:
        return None


async def test_a_view_that_cannot_be_built_is_the_calls_projection_error() -> None:
    outcome = await run_stages(
        tool="lookup_knowledge",
        tool_call_id="call_v",
        arguments={"query": "pool"},
        session_id="s",
        sources={"lookup_knowledge": _SurrogateSource()},
        settings=rag_settings(),
    )
    assert isinstance(outcome.result, ErrorResult)
    assert outcome.result.error.code is ErrorCode.PROJECTION
    assert outcome.control.status is LifecycleStatus.ERROR
    assert outcome.control.error_code is ErrorCode.PROJECTION
    assert outcome.observation.evidence_status is EvidenceStatus.ERROR
    json.loads(outcome.raw)  # the record of the raw answer is still valid JSON


def test_build_outcome_never_raises_on_an_unencodable_result() -> None:
    from contracts.results import Evidence

    result = RagResult(
        evidence_status=EvidenceStatus.EVIDENCE_FOUND,
        tool_call_id="call_b",
        query="q",
        evidence=[
            Evidence(document_id="d", source="s", title="t", breadcrumb="b", excerpt="x\udc80")
        ],
        returned_count=1,
        truncated=False,
    )
    outcome = build_outcome(
        result=result, raw=None, tool="lookup_knowledge", session_id="s", settings=rag_settings()
    )
    assert isinstance(outcome.result, ErrorResult)
    assert outcome.result.error.code is ErrorCode.PROJECTION
    assert outcome.result.tool_call_id == "call_b"


@pytest.mark.redis
async def test_a_worker_survives_every_hostile_answer(
    redis: Any, prefix: str, upstream: HostileServer
) -> None:
    settings = Settings(prefix=prefix, deadline_s=2.0, visibility_timeout_s=4.0)
    kinds = ["surrogate", "deep", "bad_utf8", "not_json", "bad_gzip", "gzip_bomb", "zstd_bomb"]
    calls = [
        ToolCall(
            tool="lookup_knowledge",
            tool_call_id=f"call_{kind}",
            arguments={"query": f"hostile:{kind}"},
        )
        for kind in kinds
    ] + [ToolCall(tool="lookup_knowledge", tool_call_id="call_ok", arguments={"query": "pool"})]
    source = rag(upstream, max_bytes=1 * MB)
    try:
        async with (
            EvidenceClient(redis, settings) as client,
            running_worker(redis, settings, {"lookup_knowledge": source}),
        ):
            results = await client.call_many("s1", calls, timeout=20)
            # The worker is still there: a later call is answered too.
            later = await client.call("s1", ToolCall(
                tool="lookup_knowledge", tool_call_id="call_later", arguments={"query": "again"}
            ), timeout=10)  # fmt: skip
    finally:
        await source.aclose()
    assert later is not None and later.lifecycle is LifecycleStatus.READY
    views = {
        c.tool_call_id: json.loads(bytes(r.model)) for c, r in zip(calls, results, strict=True) if r
    }
    assert len(views) == len(calls)
    assert views["call_ok"]["evidence_status"] == "EVIDENCE_FOUND"
    for kind in kinds:
        assert views[f"call_{kind}"]["error"]["code"] == "PROJECTION", kind
    ids = [str(c.tool_call_id) for c in calls] + ["call_later"]
    assert_exactly_once(await books(redis, prefix, "s1"), ids)


# -- bodies that cannot be read -----------------------------------------------------------


@pytest.mark.parametrize("kind", ["deep", "bad_utf8", "not_json", "bad_gzip"])
async def test_unreadable_answers_are_projection_errors(upstream: HostileServer, kind: str) -> None:
    assert await fetch_code(upstream, kind) is ErrorCode.PROJECTION


# -- decompression bombs ------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["gzip_bomb", "zstd_bomb", "deflate_bomb"])
async def test_bombs_stop_at_the_decoded_byte_limit(upstream: HostileServer, kind: str) -> None:
    # 256 MB of zeros, 1 MB allowed: what is allocated meanwhile stays near the limit.
    tracemalloc.start()
    try:
        assert await fetch_code(upstream, kind, max_bytes=1 * MB) is ErrorCode.PROJECTION
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * MB, f"{peak / MB:.1f} MB allocated"


_PEAK_CHILD = """
import asyncio, resource, sys
from contracts import LookupKnowledgeRequest
from workers.sources.knowledge.rag_http import HttpRagSource, RagHttpSettings
from workers.sources import SourceError

async def main():
    src = HttpRagSource(RagHttpSettings(url=sys.argv[1], max_bytes=4 * 1024 * 1024))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        await src.fetch(LookupKnowledgeRequest(query="hostile:" + sys.argv[2]))
        code = "none"
    except SourceError as exc:
        code = exc.code.value
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(code, (after - before) // 1024)

asyncio.run(main())
"""


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gzip_bomb", "zstd_bomb"])
def test_a_bomb_does_not_raise_peak_memory(kind: str) -> None:
    # Its own process, so the peak RSS is the fetch's alone; 1 GB decoded, 4 MB allowed.
    with hostile_server(bomb_bytes=1024 * MB) as server:
        _ = server.bombs.gzip if kind == "gzip_bomb" else server.bombs.zstd
        proc = subprocess.run(
            [sys.executable, "-c", _PEAK_CHILD, server.url, kind],
            capture_output=True,
            text=True,
            timeout=90,
            env={**os.environ, "PYTHONPATH": os.getcwd()},
            check=False,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    code, grown_mb = proc.stdout.split()
    assert code == "PROJECTION"
    assert int(grown_mb) < 48, f"peak RSS grew by {grown_mb} MB"


# -- slow drip and warm-up ----------------------------------------------------------------


@pytest.mark.serial
async def test_a_slow_drip_ends_at_the_sources_own_time_limit(upstream: HostileServer) -> None:
    started = time.monotonic()
    assert await fetch_code(upstream, "drip", timeout_s=1.0) is ErrorCode.TIMEOUT
    assert time.monotonic() - started < 2.0


@pytest.mark.serial
async def test_warm_up_has_a_deadline_and_the_worker_starts_anyway(
    upstream: HostileServer, caplog: pytest.LogCaptureFixture
) -> None:
    class DripQuery(HttpRagSource):
        async def fetch(self, request: Any) -> Any:
            return await super().fetch(LookupKnowledgeRequest(query="hostile:drip"))

    source = DripQuery(RagHttpSettings(url=upstream.url, timeout_s=60))
    started = time.monotonic()
    try:
        await warm_up({"lookup_knowledge": source}, timeout_s=1.0)
    finally:
        await source.aclose()
    assert time.monotonic() - started < 2.0
    assert "warm-up" in caplog.text


@pytest.mark.serial
async def test_open_sources_warm_up_is_bounded_by_its_setting() -> None:
    # The warm-up query is fixed: a server that drips every answer.
    with hostile_server(drip_interval_s=0.5) as drip:
        drip.always = "drip"
        env = {"ACI_RAG_URL": drip.url, "ACI_RAG_TIMEOUT_S": "60", "ACI_WARMUP_TIMEOUT_S": "1"}
        started = time.monotonic()
        async with open_sources(env, only=("lookup_knowledge",), warm=True) as sources:
            assert "lookup_knowledge" in sources
        assert time.monotonic() - started < 2.5


# -- a silent MySQL -----------------------------------------------------------------------


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A TCP listener that accepts every connection and never sends a byte."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not done.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        done.set()
        thread.join(2)
        for conn in held:
            conn.close()
        listener.close()


@pytest.mark.serial
async def test_a_silent_mysql_ends_as_timeout_within_the_deadline(silent_port: int) -> None:
    params = ConnectParams(host="127.0.0.1", port=silent_port, user="u", database="shop")
    source = MysqlSource({"shop": params}, deadline_s=2.0)
    started = time.monotonic()
    try:
        outcome = await run_stages(
            tool="query_mysql",
            tool_call_id="call_m",
            arguments={"data_source": "shop", "sql": "SELECT 1"},
            session_id="s",
            sources={"query_mysql": source},
            settings=rag_settings(),
        )
    finally:
        await source.aclose()
    took = time.monotonic() - started
    assert isinstance(outcome.result, ErrorResult)
    assert outcome.result.error.code is ErrorCode.TIMEOUT
    assert took < 2.6, f"took {took:.2f}s with a 2s deadline"


@pytest.mark.serial
async def test_the_mysql_source_bounds_itself_without_the_stage(silent_port: int) -> None:
    params = ConnectParams(host="127.0.0.1", port=silent_port, user="u", database="shop")
    source = MysqlSource({"shop": params}, deadline_s=1.0)
    started = time.monotonic()
    try:
        with pytest.raises(SourceError) as info:
            await source._execute_raw("shop", "SELECT 1")
    finally:
        await source.aclose()
    assert info.value.code in (ErrorCode.TIMEOUT, ErrorCode.UNAVAILABLE)
    assert time.monotonic() - started < 2.6


@pytest.mark.serial
@pytest.mark.redis
async def test_a_silent_mysql_is_finished_once_not_taken_over(
    redis: Any, prefix: str, silent_port: int
) -> None:
    settings = Settings(prefix=prefix, deadline_s=2.0, visibility_timeout_s=3.0)
    params = ConnectParams(host="127.0.0.1", port=silent_port, user="u", database="shop")
    source = MysqlSource({"shop": params}, deadline_s=settings.deadline_s)
    call = ToolCall(
        tool="query_mysql",
        tool_call_id="call_m",
        arguments={"data_source": "shop", "sql": "SELECT 1"},
    )
    try:
        async with (
            EvidenceClient(redis, settings) as client,
            running_worker(redis, settings, {"query_mysql": source}),
        ):
            started = time.monotonic()
            result = await client.call("s1", call, timeout=10)
            took = time.monotonic() - started
            await anyio.sleep(settings.visibility_timeout_s + 1.5)  # room for a takeover
    finally:
        await source.aclose()
    assert result is not None and result.lifecycle is LifecycleStatus.ERROR
    control = json.loads(bytes(result.control))
    assert control["error_code"] == "TIMEOUT" and control["attempts"] == 1
    assert took < 3.0
    assert_exactly_once(await books(redis, prefix, "s1"), ["call_m"])
