"""The command line scripts depend on: call, submit, views, tools (exact shapes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.fleet import worker_processes
from tests.conftest import REDIS_URL

pytestmark = pytest.mark.redis
ROOT = Path(__file__).resolve().parents[2]


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_call_local_runs_the_stages_without_redis() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    done = cli(env, "call", "query_logs", "--local", "--id", "c1",
               "--args", '{"topic":"APPLICATION","query":"timeout"}')  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert set(out) == {"lifecycle", "model", "control"}
    assert out["lifecycle"] == "READY"
    assert out["model"]["evidence_status"] == "EVIDENCE_FOUND"
    assert out["model"]["tool_call_id"] == "c1"
    assert "scope_fingerprint" in out["control"] and "scope_fingerprint" not in out["model"]


def test_call_submit_and_views_through_the_queue(prefix: str, redis: Any, tmp_path: Path) -> None:
    env = dict(os.environ, ACI_REDIS_URL=REDIS_URL, ACI_PREFIX=prefix, ACI_INSTANT_SOURCES="1")
    with worker_processes(env, 1, quiet=True):
        done = cli(env, "call", "lookup_knowledge", "--id", "k1", "--session", "s1",
                   "--args", '{"query":"pool exhausted"}')  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["model"]["tool_call_id"] == "k1"
        lines = [
            {"id": "k2", "tool": "lookup_knowledge", "arguments": {"query": "disk full"}},
            {"id": "k3", "tool": "no_such_tool", "arguments": "{}"},
            {"id": "k2", "tool": "lookup_knowledge", "arguments": {"query": "disk full"}},
            {"id": "", "tool": "lookup_knowledge", "arguments": {"query": "x"}},
        ]
        calls = tmp_path / "calls.jsonl"
        calls.write_text("\n".join(json.dumps(line) for line in lines))
        done = cli(env, "submit", "--file", str(calls), "--session", "s1", "--wait",
                   "--timeout", "30")  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"submitted": 4, "ready": 2, "error": 2, "pending": 0}
    model = cli(env, "views", "--session", "s1", "--view", "model")
    ids = [json.loads(line)["tool_call_id"] for line in model.stdout.splitlines()]
    assert sorted(ids) == ["k1", "k2", "k3"]
    control = cli(env, "views", "--session", "s1", "--view", "control")
    assert all("scope" in json.loads(line) or "error_code" in json.loads(line)
               for line in control.stdout.splitlines())  # fmt: skip


def test_submit_without_wait_returns_once_a_worker_admitted_the_calls(
    prefix: str, redis: Any, tmp_path: Path
) -> None:
    # As a submitter's client (requests; ACI_ADMIT_HERE=0: this one runs as Redis's default
    # user, which would admit its calls itself).
    env = dict(os.environ, ACI_REDIS_URL=REDIS_URL, ACI_PREFIX=prefix, ACI_INSTANT_SOURCES="1",
               ACI_ADMIT_HERE="0")  # fmt: skip
    calls = tmp_path / "calls.jsonl"
    lines = [{"id": f"f{i}", "tool": "lookup_knowledge", "arguments": {"query": f"q{i}"}}
             for i in range(3)]  # fmt: skip
    calls.write_text("\n".join(json.dumps(line) for line in lines))
    # No worker: nothing admits them; said, exit 3 (pending), the requests stay queued.
    done = cli(env, "submit", "--file", str(calls), "--session", "s2", "--timeout", "0.5")
    assert done.returncode == 3, done.stderr
    assert json.loads(done.stdout) == {"submitted": 3, "not_admitted": 3}
    assert "3 calls not admitted within 0.5 s" in done.stderr
    with worker_processes(env, 1, quiet=True):
        done = cli(env, "submit", "--file", str(calls), "--session", "s2", "--timeout", "30")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"submitted": 3, "not_admitted": 0}
    import redis as sync_redis

    records = sync_redis.Redis.from_url(REDIS_URL)
    assert all(records.hget(f"{{{prefix}}}:call:s2:f{i}", "sk") for i in range(3))
    # A client with a worker's rights admits its calls itself: admitted with no worker.
    env["ACI_ADMIT_HERE"] = "auto"
    done = cli(env, "submit", "--file", str(calls), "--session", "s3", "--timeout", "0.5")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"submitted": 3, "not_admitted": 0}
    assert all(records.hget(f"{{{prefix}}}:call:s3:f{i}", "sk") for i in range(3))


def test_tools_prints_every_format() -> None:
    for fmt in ("openai", "responses", "anthropic", "mcp", "schema"):
        done = cli(dict(os.environ), "tools", "--format", fmt)
        assert done.returncode == 0
        assert len(json.loads(done.stdout)) == 3


def test_a_missing_redis_url_is_a_clear_configuration_error() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    done = cli(env, "call", "lookup_knowledge", "--id", "k1", "--args", '{"query":"x"}')
    assert done.returncode == 2
    assert "ACI_REDIS_URL" in done.stderr and "Traceback" not in done.stderr


def test_bench_pipeline_prints_every_figure_scripts_read() -> None:
    # The embedded Redis (ACI_REDIS_URL unset), a small total, no peers, half a second of
    # paced calls per latency figure (3 s each, 12,000 calls, took 20 of its 44 s): a smoke run.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    done = cli(
        env, "bench", "pipeline", "--total", "1024", "--json", "--no-peers",
        "--agent-rounds", "2", "--agent-pause", "0.2", "--latency-seconds", "0.5",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    for key in ("raw_per_s", "pipeline_per_s", "instant_1w_per_s", "instant_2w_per_s",
                "real_1w_per_s", "real_2w_per_s", "drain_1w_per_s"):  # fmt: skip
        assert figures[key] > 0, key
    for suffix in ("", "_2w", "_real", "_real_2w"):
        assert 0 < figures[f"p50{suffix}_ms"] <= figures[f"p99{suffix}_ms"] < 30_000, suffix
    assert figures["ratio_to_raw"] == round(figures["pipeline_per_s"] / figures["raw_per_s"], 3)
    assert figures["agent_pause_s"] == 0.2
    for name in ("one", "burst", "raw"):  # the agent's pattern: calls after a pause
        assert 0 < figures[f"agent_{name}_p50_ms"] <= figures[f"agent_{name}_p90_ms"] < 30_000
    if os.path.exists("/proc/stat"):
        for suffix in ("", "_2w", "_real", "_real_2w"):
            assert 0 <= figures[f"steal{suffix}_pct"] <= 100, suffix


def test_views_without_redis_is_a_typed_error_not_a_traceback() -> None:
    from chaos.services import free_port

    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    env["ACI_REDIS_URL"] = f"redis://127.0.0.1:{free_port()}/0"
    done = cli(env, "views", "--session", "s1", "--view", "model")
    assert done.returncode == 1
    assert "RedisUnavailable" in done.stderr and "Traceback" not in done.stderr


def test_call_local_builds_the_runbook_index_before_the_call_deadline(tmp_path: Path) -> None:
    # The first `call --local` over a folder whose index is not built yet: the build (model
    # load, chunking, embedding; 10 s for openshift/runbooks' 274 files) is the warm-up's, as
    # in a worker, not the call's: before, it ran inside the call's deadline and the engineer's
    # first lookup answered ERROR TIMEOUT although the index was then built.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    env |= {"ACI_CACHE_DIR": str(tmp_path / "cache"), "ACI_DEADLINE_S": "0.2"}
    done = cli(env, "call", "lookup_knowledge", "--local", "--id", "k1",
               "--args", '{"query":"disk full: No space left on device"}')  # fmt: skip
    out = json.loads(done.stdout)
    assert out["lifecycle"] == "READY", out["model"]
    assert out["model"]["evidence_status"] == "EVIDENCE_FOUND"
