"""Worker processes started by the demo and the benchmark run the installed console script."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app import fleet
from app.fleet import CLI


def test_a_users_own_app_package_does_not_shadow_ours(tmp_path: Path) -> None:
    # A user running `aci-evidence demo` inside their own project (a FastAPI `app/`, say):
    # `python -m app.cli` would import their package from the current directory.
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [*CLI, "tools", "--format", "schema"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "lookup_knowledge" in done.stdout


def test_workers_that_do_not_stop_are_killed_on_one_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Three workers that ignore SIGTERM: all killed once the one deadline passes (before, each
    # had 15 s of its own, one after another: 45 s, far past Ctrl-C's grace, so the cleanup
    # after them — the embedded Redis and its folder — was cut short by the forced exit).
    hung = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    monkeypatch.setattr(fleet, "CLI", (sys.executable, "-c", hung))
    monkeypatch.setattr(fleet, "STOP_S", 0.5)
    assert fleet.GRACE - 3.0 == 7.0  # the real deadline: well inside Ctrl-C's grace
    with fleet.worker_processes({}, 3) as procs:
        time.sleep(0.5)  # their SIGTERM handlers set
        stopping = time.monotonic()
    took = time.monotonic() - stopping
    assert all(p.returncode == -9 for p in procs)  # killed, none left running
    assert 0.5 <= took < 1.2  # one deadline (0.5 s) for the three, not 0.5 s each
