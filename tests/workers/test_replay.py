"""Replay against recorded stream entries: re-project, re-execute, re-inject, export/import."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from app.cli import _parser
from app.replay import run_export, run_import, run_replay
from contracts import RagResult
from contracts import projection as projection_module
from pipeline.client import EvidenceClient, ToolCall
from pipeline.keys import Keys
from pipeline.redis_io import open_redis
from pipeline.settings import Settings
from tests.conftest import REDIS_URL
from tests.pipeline.helpers import running_worker
from tests.pipeline.sources import FailingSource
from tests.pipeline.test_recovery import free_port
from workers.replay import load_file
from workers.sources.instant import InstantSource

pytestmark = pytest.mark.redis

GOLDEN = Path(__file__).parent.parent / "golden" / "replay"
SESSION = "rec-1"


def calls() -> list[ToolCall]:
    """A small session over all three tools, with a duplicate and two ERROR results."""
    mysql = {
        "data_source": "orders",
        "sql": "SELECT id, status FROM orders WHERE id = ?",
        "params": [1],
    }
    return [
        ToolCall(tool="lookup_knowledge", tool_call_id="k1", arguments={"query": "pool exhausted"}),
        ToolCall(
            tool="query_logs",
            tool_call_id="l1",
            arguments={"topic": "APPLICATION", "query": "timeout"},
        ),
        ToolCall(tool="query_mysql", tool_call_id="m1", arguments=mysql),
        ToolCall(tool="lookup_knowledge", tool_call_id="d1", arguments={"query": "pool exhausted"}),
        ToolCall(tool="lookup_knowledge", tool_call_id="e1", arguments={"query": " "}),
        ToolCall(tool="delete_everything", tool_call_id="e2", arguments={}),
    ]


def settings_for(prefix: str, url: str = REDIS_URL, **kw: Any) -> Settings:
    return Settings(prefix=prefix, redis_url=url, visibility_timeout_s=2.0, deadline_s=1.0, **kw)


async def record(
    redis: Any, settings: Settings, session: str = SESSION, sources: Any = None
) -> None:
    instant = InstantSource()
    sources = sources or dict.fromkeys(("lookup_knowledge", "query_logs", "query_mysql"), instant)
    async with running_worker(redis, settings, sources), EvidenceClient(redis, settings) as client:
        results = await client.call_many(session, calls(), timeout=10)
    assert all(r is not None for r in results)


async def replay(capsys: Any, settings: Settings, *argv: str) -> tuple[int, list[Any]]:
    args = _parser().parse_args(["replay", *argv, "--json"])
    code = await run_replay(args, settings)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    return code, lines


async def test_replay_of_a_recorded_session_is_identical(
    redis: Any, prefix: str, capsys: Any
) -> None:
    settings = settings_for(prefix)
    await record(redis, settings)
    code, lines = await replay(capsys, settings, "--session", SESSION)
    assert lines[-1] | {"mode": None} == {
        "replayed": 6,
        "identical": 6,
        "changed": 0,
        "failed": 0,
        "skipped": 0,
        "mode": None,
        "contract_version": 1,
    }
    assert code == 0


class IndexedSource(InstantSource):
    """The embedded index's answer shape: its size beside the hits (`indexed_chunks`)."""

    def fetch_now(self, request: Any) -> Any:
        answer = super().fetch_now(request)
        if isinstance(answer, dict):
            return answer | {"contextPack": answer["contextPack"] | {"indexedChunks": 99}}
        return answer


async def test_replay_keeps_the_index_size_the_control_view_recorded(
    redis: Any, prefix: str, capsys: Any
) -> None:
    # Before: re-projecting dropped it, so every fresh lookup_knowledge call "changed".
    settings = settings_for(prefix)
    indexed = IndexedSource()
    await record(redis, settings, sources=dict.fromkeys(("lookup_knowledge", "query_logs",
                                                          "query_mysql"), indexed))  # fmt: skip
    entries = await redis.xrange(Keys(prefix).control(SESSION))
    assert any(b'"indexed_chunks":99' in value for _, f in entries for value in f.values())
    code, lines = await replay(capsys, settings, "--session", SESSION)
    assert (code, lines[-1]["identical"], lines[-1]["changed"]) == (0, 6, 0), lines


async def test_a_changed_projector_shows_the_exact_changed_fields(
    redis: Any, prefix: str, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(prefix)
    await record(redis, settings)
    original = projection_module.project_rag

    def retitled(*args: Any) -> Any:
        result = original(*args)
        assert isinstance(result, RagResult)
        evidence = [msgspec.structs.replace(e, title=e.title.upper()) for e in result.evidence]
        return msgspec.structs.replace(result, evidence=evidence)

    monkeypatch.setattr(projection_module, "project_rag", retitled)
    code, lines = await replay(capsys, settings, "--session", SESSION, "--tool", "lookup_knowledge")
    assert code == 1
    changed = {v["tool_call_id"]: v["changes"] for v in lines[:-1]}
    title = "Database connection pool exhaustion"
    expected = [
        {
            "view": "result",
            "path": "$.evidence[0].title",
            "recorded": title,
            "replayed": title.upper(),
        },
        {
            "view": "model",
            "path": "$.evidence[0].title",
            "recorded": title,
            "replayed": title.upper(),
        },
    ]
    assert changed == {"k1": expected, "d1": expected}
    assert lines[-1]["replayed"] == 3 and lines[-1]["changed"] == 2 and lines[-1]["identical"] == 1


async def test_changed_bounds_show_cut_excerpts_readably(
    redis: Any, prefix: str, capsys: Any
) -> None:
    settings = settings_for(prefix)
    await record(redis, settings)
    from contracts import Bounds

    tighter = msgspec.structs.replace(settings, bounds=Bounds(rag_excerpt_chars=20))
    args = _parser().parse_args(["replay", "--session", SESSION, "--id", "k1"])
    assert await run_replay(args, tighter) == 1
    out = capsys.readouterr().out
    assert "changed: rec-1/k1 (lookup_knowledge)" in out
    assert (
        """  result $.evidence[0].excerpt: "Requests fail with 'connection not available' after 30000 ms; active connectio… → "Requests fail with '"
"""
        in out
    )
    assert "result $.truncated: false → true" in out
    assert "control $.truncated: false → true" in out


async def test_selection_by_tool_status_evidence_id_and_time(
    redis: Any, prefix: str, capsys: Any
) -> None:
    settings = settings_for(prefix)
    await record(redis, settings)
    for argv, count in [
        (["--evidence", "ERROR"], 2),
        (["--status", "READY"], 4),
        (["--tool", "query_mysql"], 1),
        (["--id", "l1"], 1),
        (["--since", "2999-01-01T00:00:00"], 0),
        (["--until", "1000"], 0),
    ]:
        code, lines = await replay(capsys, settings, "--session", SESSION, *argv)
        if count:
            assert (code, lines[-1]["replayed"]) == (0, count), argv
        else:  # nothing recorded matches the selection: exit 1, no summary (issue 24)
            assert (code, lines) == (1, []), argv
    # Without --session, the sessions zset lists where to look.
    code, lines = await replay(capsys, settings, "--tool", "query_logs")
    assert (code, lines[-1]["identical"]) == (0, 1)
    code, _ = await replay(capsys, settings, "--since", "yesterday")
    assert code == 2


async def test_source_failures_and_dropped_raw_answers(
    redis: Any, prefix: str, capsys: Any
) -> None:
    settings = settings_for(prefix)
    failing = {"lookup_knowledge": FailingSource()}
    await record(redis, settings, "failing", failing)
    code, lines = await replay(capsys, settings, "--session", "failing", "--id", "k1")
    assert (code, lines[-1]["identical"]) == (0, 1)  # recorded ERROR, views rebuilt identically
    small = settings_for(prefix, raw_max_bytes=64)
    await record(redis, small, "small")
    code, lines = await replay(capsys, small, "--session", "small", "--tool", "lookup_knowledge")
    assert code == 1
    assert {v["reason"] for v in lines[:-1]} == {"raw not kept (too large)"}
    assert lines[-1]["failed"] == 2


async def test_golden_recording_replays_identically(capsys: Any, prefix: str) -> None:
    code, lines = await replay(
        capsys, settings_for(prefix), "--file", str(GOLDEN / "session.jsonl")
    )
    assert lines[-1]["replayed"] == 6 and lines[-1]["identical"] == 6
    assert code == 0


async def test_a_recording_of_another_contract_version_fails_loudly(
    capsys: Any, prefix: str
) -> None:
    code, lines = await replay(
        capsys, settings_for(prefix), "--file", str(GOLDEN / "contract_v2.jsonl")
    )
    assert code == 1
    assert lines[0]["outcome"] == "failed"
    assert lines[0]["reason"] == "recorded under contract v2, this build speaks v1"
    assert lines[-1]["failed"] == 1 and lines[-1]["recorded_contract_versions"] == {"2": 1}


async def test_a_garbage_envelope_fails_loudly(capsys: Any, prefix: str) -> None:
    code, lines = await replay(
        capsys, settings_for(prefix), "--file", str(GOLDEN / "garbage.jsonl")
    )
    assert code == 1
    assert lines[0]["reason"].startswith("undecodable recording")
    assert lines[-1] | {"mode": None} == {
        "replayed": 1,
        "identical": 0,
        "changed": 0,
        "failed": 1,
        "skipped": 0,
        "mode": None,
        "contract_version": 1,
    }


async def test_a_file_that_is_not_an_export_is_refused(
    capsys: Any, prefix: str, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"tool": "query_logs"}\n')
    args = _parser().parse_args(["replay", "--file", str(bad)])
    assert await run_replay(args, settings_for(prefix)) == 2
    assert "not an aci-evidence export line" in capsys.readouterr().err


@contextlib.contextmanager
def second_redis() -> Iterator[str]:
    port = free_port()
    folder = tempfile.mkdtemp(prefix="aci-replay-")
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", folder, "--save", ""],
        stdout=subprocess.DEVNULL,
    )
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(5)


@contextlib.asynccontextmanager
async def ready(url: str) -> AsyncIterator[Any]:
    async with open_redis(url) as client:
        for _ in range(100):
            with contextlib.suppress(Exception):
                await client.ping()
                break
            await __import__("anyio").sleep(0.05)
        yield client


async def test_export_import_replay_across_two_redis_instances(
    redis: Any, prefix: str, capsys: Any, tmp_path: Path
) -> None:
    settings = settings_for(prefix)
    await record(redis, settings)
    path = str(tmp_path / "export.jsonl")
    assert (
        await run_export(
            _parser().parse_args(["export", "--session", SESSION, "--file", path]), settings
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out) == {"exported": 6, "file": path}
    exported = load_file(path)
    assert {r.tool_call_id for r in exported} == {"k1", "l1", "m1", "d1", "e1", "e2"}
    assert all(len(r.lifecycle) == 2 for r in exported)  # PROJECTING, then final
    with second_redis() as url:
        other = settings_for(prefix, url)
        async with ready(url) as remote:
            for argv in (
                ["import", "--file", path],
                ["import", "--file", path, "--session", "moved"],
            ):
                assert await run_import(_parser().parse_args(argv), other) == 0
                assert json.loads(capsys.readouterr().out)["imported"] == 6
            assert await run_import(_parser().parse_args(["import", "--file", path]), other) == 0
            assert json.loads(capsys.readouterr().out)["existing"] == 6  # idempotent
            assert await remote.xlen(Keys(prefix).model("moved")) == 6
            for session in (SESSION, "moved"):
                code, lines = await replay(capsys, other, "--session", session)
                assert (code, lines[-1]["identical"]) == (0, 6), session
            control = json.loads(await remote.hget(Keys(prefix).result("moved", "k1"), "cv"))
            assert control["session_id"] == "moved"


async def test_reexecute_against_todays_sources(
    redis: Any, prefix: str, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(prefix)
    await record(redis, settings)
    monkeypatch.setitem(os.environ, "ACI_INSTANT_SOURCES", "1")
    code, lines = await replay(capsys, settings, "--session", SESSION, "--reexecute")
    assert lines[-1]["mode"] == "reexecute"
    assert (code, lines[-1]["identical"]) == (0, 6), lines


async def test_reinject_into_a_new_session_keeps_the_tool_call_ids(
    redis: Any, prefix: str, capsys: Any
) -> None:
    settings = settings_for(prefix)
    await record(redis, settings)
    code, lines = await replay(capsys, settings, "--session", SESSION, "--into", "again")
    assert (code, lines[-1]["submitted"]) == (0, 6)
    sources = dict.fromkeys(("lookup_knowledge", "query_logs", "query_mysql"), InstantSource())
    async with running_worker(redis, settings, sources), EvidenceClient(redis, settings) as client:
        done = await client.wait("again", ["k1", "l1", "m1", "d1", "e1", "e2"], 10)
    assert set(done) == {"k1", "l1", "m1", "d1", "e1", "e2"}
    code, lines = await replay(capsys, settings, "--session", "again")
    assert (code, lines[-1]["identical"]) == (0, 6)
    # The table says what a re-injection did (before: replayed 6, identical 0, nothing else).
    args = _parser().parse_args(["replay", "--session", SESSION, "--into", "again2"])
    assert await run_replay(args, settings) == 0
    table = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert "submitted" in table[2] and table[4][table[2].index("submitted")] == "6", table


@pytest.mark.skipif(os.environ.get("ACI_REGEN_GOLDEN") != "1", reason="set ACI_REGEN_GOLDEN=1")
async def test_regenerate_golden_recordings(redis: Any, prefix: str, capsys: Any) -> None:
    """Re-record tests/golden/replay/ (only when the contract changes on purpose)."""
    settings = settings_for(prefix)
    await record(redis, settings)
    path = GOLDEN / "session.jsonl"
    assert (
        await run_export(
            _parser().parse_args(["export", "--session", SESSION, "--file", str(path)]), settings
        )
        == 0
    )
    first = json.loads(path.read_text().splitlines()[0])
    first["envelope"]["v"] = 2
    (GOLDEN / "contract_v2.jsonl").write_text(json.dumps(first) + "\n")
    first["envelope"] = "\x00not an envelope"
    (GOLDEN / "garbage.jsonl").write_text(json.dumps(first) + "\n")
