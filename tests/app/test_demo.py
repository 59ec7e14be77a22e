"""`aci-evidence demo` end to end: embedded Redis, two workers, a scripted diagnosis."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _redis_servers(under: Path) -> set[str]:
    # Only this demo's servers (its sockets live in its TMPDIR): other runs on the machine
    # (a benchmark, a second test session) start embedded servers of their own.
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True)
    return {
        line.split()[0]
        for line in out.stdout.splitlines()
        if "aci-redis-" in line and str(under) in line
    }


@pytest.mark.parametrize("scenario", ["db-pool-exhaustion", "slow-query-storm"])
def test_demo_runs_end_to_end_and_leaves_nothing_behind(scenario: str, tmp_path: Path) -> None:
    before = _redis_servers(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    env["TMPDIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "demo", "--json", "--scenario", scenario],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=110, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    transcript = json.loads(done.stdout.strip().splitlines()[-1])
    calls = {c["id"]: c for c in transcript["calls"]}
    statuses = {c["model"]["evidence_status"] for c in calls.values()}
    assert statuses == {"EVIDENCE_FOUND", "NO_EVIDENCE", "ERROR"}
    assert all(c["lifecycle"] in ("READY", "ERROR") for c in calls.values())
    # The repeated knowledge call is recognised by the harness, not shown to the model.
    assert calls["call_6_kb_again"]["control"]["duplicate_of"] == "call_1_kb"
    assert "duplicate_of" not in calls["call_6_kb_again"]["model"]
    # The unknown data source fails honestly, naming only the allowed names.
    failed = calls["call_9_billing"]["model"]
    assert failed["evidence_status"] == "ERROR"
    assert failed["error"]["code"] == "AUTHORIZATION"
    # Every call went PROJECTING → READY|ERROR exactly once on the lifecycle stream.
    finals = [t for t in transcript["timeline"] if t["status"] != "PROJECTING"]
    assert sorted(t["id"] for t in finals) == sorted(calls)
    # Nothing left: no embedded redis-server, no temporary folder.
    assert _redis_servers(tmp_path) == before
    assert not list(tmp_path.glob("aci-redis-*"))


def test_the_demo_fits_80_columns_and_ends_with_what_you_saw(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    env.update(TMPDIR=str(tmp_path), COLUMNS="80")
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "demo", "--scenario", "oom-kill-restarts"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=110, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    tail = "\n".join(lines[-25:])
    assert "what you saw" in tail and "the incident: oom-kill-restarts" in tail
    assert "duplicate_of call_1_kb" in tail and "the deliberate ERROR" in tail
    assert "the demo world's clock: 2026-03-14T15:10:00+08:00" in done.stdout
    # The rounds start once the workers are warm: their times are the calls' own.
    assert "2 workers ready in" in done.stdout


def test_the_real_log_files_scenario_reads_the_files_it_wrote(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    env.update(TMPDIR=str(tmp_path), COLUMNS="80")
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "demo", "--json", "--scenario", "real-log-files"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=110, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    transcript = json.loads(done.stdout.strip().splitlines()[-1])
    calls = {c["id"]: c for c in transcript["calls"]}
    logs = {i: c for i, c in calls.items() if c["tool"] == "query_logs"}
    assert {c["control"]["source_kind"] for c in logs.values()} == {"FILE"}
    found = {i for i, c in logs.items() if c["model"]["evidence_status"] == "EVIDENCE_FOUND"}
    assert found == {"call_2_app", "call_3_slow", "call_4_oom"}
    assert logs["call_5_payment"]["model"]["evidence_status"] == "NO_EVIDENCE"
    # The evidence is the producers' records: the pool timeouts, the slow FOR UPDATE, the OOM.
    model = json.dumps({i: c["model"] for i, c in logs.items()})
    assert "Connection is not available" in model and "FOR UPDATE" in model
    assert "Out of memory" in model
    # No path of the demo's folder reaches the model.
    assert str(tmp_path) not in json.dumps([c["model"] for c in calls.values()])
    assert calls["call_6_kb_again"]["control"]["duplicate_of"] == "call_1_kb"
    assert calls["call_9_billing"]["model"]["error"]["code"] == "AUTHORIZATION"
    assert any("source_kind FILE" in n for n in transcript["notes"])
    # The ACI_LOGS_CONFIG it wrote is shown whole: the best day-one template (issue 35, 9).
    ((title, config),) = transcript["files"].items()
    assert title.startswith("ACI_LOGS_CONFIG") and "[topics.APPLICATION]" in config
    assert any("(FILE backend)" in line for line in transcript["what_you_saw"])
    if shutil.which("mariadbd") or Path("/usr/sbin/mariadbd").exists():
        assert any("written by MariaDB itself" in n for n in transcript["notes"])
        slow = logs["call_3_slow"]["model"]["events"][0]["fields"]
        assert slow["db_user"] == "root" and slow["rows_examined"] == 20000
    # Nothing left: no embedded redis-server, no private mariadbd, no log folder.
    assert _redis_servers(tmp_path) == set()
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True)
    assert str(tmp_path) not in ps.stdout
    assert not list(tmp_path.glob("aci-redis-*")) and not list(tmp_path.glob("aci-demo-logs-*"))
    # On a terminal it fits 80 columns and ends with its "what you saw" too.
    shown = subprocess.run(
        [sys.executable, "-m", "app.cli", "demo", "--scenario", "real-log-files"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=110, check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-2000:]
    lines = shown.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    tail = " ".join(" ".join(lines[-30:]).replace("│", " ").split())
    assert "what you saw" in tail and "the incident: real-log-files" in tail
    assert "(FILE backend)" in tail
    assert "ACI_LOGS_CONFIG the workers read" in shown.stdout
    assert not list(tmp_path.glob("aci-demo-logs-*"))
