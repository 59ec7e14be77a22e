"""The call deadline and the warm-up deadline hold for the built-in sources: a slow first build
(the knowledge index of a large folder, the log world) is never waited for past a deadline.
The knowledge index is built once, in one shared build: calls and the warm-up that arrive
meanwhile wait on that build up to their own deadline (ERROR/TIMEOUT, never NO_EVIDENCE), and
later calls use the built index."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import workers.sources.knowledge.index_file as knowledge  # where the source builds
import workers.sources.logs.source as logs
from contracts.requests import LookupKnowledgeRequest, QueryLogsRequest
from contracts.results import ErrorResult, RagResult
from contracts.status import ErrorCode, Topic
from pipeline.settings import Settings
from workers.sources import warm_up
from workers.sources.knowledge.encoder import Encoder
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings
from workers.sources.logs.source import MockLogSource
from workers.stage import run_stages

DEADLINE_S = 0.2
SLACK_S = 0.6  # a loaded CI machine; the build itself is held for several seconds

PAGE = "# Pool {n}\n\n## Symptoms\nThe connection pool is exhausted on service {n}.\n\n{filler}\n"


def _large_folder(root: Path, files: int = 40, filler_words: int = 2000) -> Path:
    root.mkdir()
    words = [f"word{i % 97}" for i in range(filler_words)]
    filler = "\n\n".join(" ".join(words[i : i + 80]) for i in range(0, filler_words, 80))
    for n in range(files):
        (root / f"page{n}.md").write_text(PAGE.format(n=n, filler=filler), encoding="utf-8")
    return root


class _Held:
    """Holds every `build_index` until released (or `hold_s` passes), counting the builds."""

    def __init__(self, hold_s: float) -> None:
        self.release = threading.Event()
        self.builds = 0
        self.hold_s = hold_s
        self._real = knowledge.build_index

    def __call__(
        self,
        folder: Path,
        target: Path,
        encoder: Encoder | None = None,
        previous: Path | None = None,
        **options: Any,
    ) -> int:
        self.builds += 1
        self.release.wait(self.hold_s)
        return self._real(folder, target, encoder, previous, **options)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Held]:
    hold = _Held(hold_s=8.0)
    monkeypatch.setattr(knowledge, "build_index", hold)
    yield hold
    hold.release.set()


def _source(folder: Path, cache: Path) -> KnowledgeIndexSource:
    return KnowledgeIndexSource(KnowledgeSettings(folder=str(folder), cache_dir=str(cache)))


async def _timed_fetch(source: KnowledgeIndexSource, deadline_s: float) -> tuple[str, float]:
    started = time.monotonic()
    try:
        with anyio.fail_after(deadline_s):
            await source.fetch(LookupKnowledgeRequest(query="connection pool exhausted"))
    except TimeoutError:
        return "timeout", time.monotonic() - started
    return "answer", time.monotonic() - started


async def test_a_call_during_the_first_build_ends_at_its_deadline(
    tmp_path: Path, held: _Held
) -> None:
    # Four pages: the build is held anyway, and it runs for real once released (40 pages
    # took 8 s of encoding there; the genuinely large folder has its own test below).
    source = _source(_large_folder(tmp_path / "kb", files=4), tmp_path / "cache")
    try:
        outcome, took = await _timed_fetch(source, DEADLINE_S)
        assert outcome == "timeout" and took < DEADLINE_S + SLACK_S
        # A second call during the same build waits on it (no second build) and ends on time.
        outcome, took = await _timed_fetch(source, DEADLINE_S)
        assert outcome == "timeout" and took < DEADLINE_S + SLACK_S
        assert held.builds == 1
        held.release.set()
        with anyio.fail_after(30):
            answer = await source.fetch(LookupKnowledgeRequest(query="connection pool exhausted"))
        assert answer["contextPack"]["hits"] and held.builds == 1
        outcome, took = await _timed_fetch(source, DEADLINE_S)  # the index is used once built
        assert outcome == "answer" and held.builds == 1
    finally:
        held.release.set()
        await source.aclose()


async def test_concurrent_calls_share_one_build(tmp_path: Path, held: _Held) -> None:
    source = _source(_large_folder(tmp_path / "kb", files=4), tmp_path / "cache")
    outcomes: list[tuple[str, float]] = []

    async def one() -> None:
        outcomes.append(await _timed_fetch(source, DEADLINE_S))

    try:
        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(one)
        assert [o for o, _ in outcomes] == ["timeout"] * 6
        assert max(t for _, t in outcomes) < DEADLINE_S + SLACK_S and held.builds == 1
    finally:
        held.release.set()
        await source.aclose()


async def test_a_call_during_a_build_is_error_timeout_never_no_evidence(
    tmp_path: Path, held: _Held
) -> None:
    source = _source(_large_folder(tmp_path / "kb", files=4), tmp_path / "cache")  # held
    settings = Settings(deadline_s=DEADLINE_S, visibility_timeout_s=5.0)

    async def call() -> tuple[object, float]:
        started = time.monotonic()
        out = await run_stages(
            tool="lookup_knowledge",
            tool_call_id="call_1",
            arguments=json.dumps({"query": "connection pool exhausted"}),
            session_id="s",
            sources={"lookup_knowledge": source},
            settings=settings,
        )
        return out.result, time.monotonic() - started

    try:
        result, took = await call()
        assert isinstance(result, ErrorResult) and result.error.code == ErrorCode.TIMEOUT
        assert took < DEADLINE_S + SLACK_S
        held.release.set()
        with anyio.fail_after(30):  # the shared build ends
            await source.fetch(LookupKnowledgeRequest(query="warm"))
        result, _ = await call()
        assert isinstance(result, RagResult) and result.evidence, result
        assert held.builds == 1
    finally:
        held.release.set()
        await source.aclose()


async def test_warm_up_returns_at_its_timeout_and_the_build_goes_on(
    tmp_path: Path, held: _Held
) -> None:
    source = _source(_large_folder(tmp_path / "kb", files=4), tmp_path / "cache")
    try:
        started = time.monotonic()
        await warm_up({"lookup_knowledge": source}, timeout_s=DEADLINE_S)
        assert time.monotonic() - started < DEADLINE_S + SLACK_S
        held.release.set()
        with anyio.fail_after(30):
            answer = await source.fetch(LookupKnowledgeRequest(query="connection pool exhausted"))
        assert answer["contextPack"]["hits"] and held.builds == 1
    finally:
        held.release.set()
        await source.aclose()


async def test_a_genuinely_large_folder_keeps_the_deadline(tmp_path: Path) -> None:
    # No stand-in build: a folder of a few MB. The call ends by its deadline whether or not
    # the build is done by then; a later call is answered from the index built meanwhile.
    # Lexical: embedding these 4,000 chunks takes minutes on a 2-core machine; the deadline
    # path is the same shared build thread (the held builds above run the default, fused).
    folder = _large_folder(tmp_path / "kb", files=60, filler_words=6000)
    source = KnowledgeIndexSource(
        KnowledgeSettings(folder=str(folder), cache_dir=str(tmp_path / "c"), retrieval="lexical")
    )
    try:
        _outcome, took = await _timed_fetch(source, DEADLINE_S)
        assert took < DEADLINE_S + SLACK_S
        outcome, _ = await _timed_fetch(source, 60)
        assert outcome == "answer"
    finally:
        await source.aclose()


async def test_a_slow_log_world_keeps_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    real = logs.index_of

    def slow_index_of(scenario: str, cache_dir: str = "") -> object:
        release.wait(5.0)
        return real(scenario, cache_dir)

    monkeypatch.setattr(logs, "index_of", slow_index_of)
    source = MockLogSource()
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError), anyio.fail_after(DEADLINE_S):
            await source.fetch(QueryLogsRequest(topic=Topic.APPLICATION, query=""))
        assert time.monotonic() - started < DEADLINE_S + SLACK_S
        started = time.monotonic()
        await warm_up({"query_logs": source}, timeout_s=DEADLINE_S)
        assert time.monotonic() - started < DEADLINE_S + SLACK_S
    finally:
        release.set()
