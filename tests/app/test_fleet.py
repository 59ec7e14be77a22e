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


@pytest.mark.serial
def test_workers_that_do_not_stop_are_killed_on_one_deadline(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Three workers that ignore SIGTERM: all killed once the one deadline passes (before, each
    # had 15 s of its own, one after another: 45 s, far past Ctrl-C's grace, so the cleanup
    # after them — the embedded Redis and its folder — was cut short by the forced exit).
    # Each says when its handler is set (a fixed wait raced a child's start on a loaded
    # machine: one killed by the SIGTERM itself, -15, not by the deadline).
    hung = (
        "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "open(os.path.join(os.environ['READY'], str(os.getpid())), 'w').close(); time.sleep(60)"
    )
    monkeypatch.setattr(fleet, "CLI", (sys.executable, "-c", hung))
    monkeypatch.setattr(fleet, "STOP_S", 1.0)
    assert fleet.GRACE - 3.0 == 7.0  # the real deadline: well inside Ctrl-C's grace
    with fleet.worker_processes({"READY": str(tmp_path)}, 3) as procs:
        waited = time.monotonic() + 60
        while len(list(tmp_path.iterdir())) < 3 and time.monotonic() < waited:
            time.sleep(0.02)
        assert len(list(tmp_path.iterdir())) == 3, "the children did not start"
        stopping = time.monotonic()
    took = time.monotonic() - stopping
    assert all(p.returncode == -9 for p in procs)  # killed, none left running
    assert 1.0 <= took < 2.5  # one deadline (1 s) for the three, not 1 s each (3 s)
