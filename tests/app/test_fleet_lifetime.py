"""Children of the demo and the benchmarks (worker processes, the private redis-server) do not
outlive their parent: killed with SIGKILL, the kernel kills them (Linux: the parent-death
signal); stopped with SIGTERM, the parent runs its cleanup (workers stopped, redis-server
stopped, its folder removed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaps, as under a container's init, is not running)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def start_parent(tmp_path: Path) -> tuple[subprocess.Popen[str], list[int]]:
    env = dict(os.environ, TMPDIR=str(tmp_path))
    parent = subprocess.Popen(
        [sys.executable, "-m", "tests.app.lifetime_parent"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert parent.stdout is not None
    with parent.stdout:
        line = parent.stdout.readline()
    assert line, "the parent did not start its children"
    pids = json.loads(line)
    children = [*pids["redis"], *pids["workers"]]
    assert len(children) == 2 and all(alive(p) for p in children)
    return parent, children


def gone_within(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def test_children_die_when_their_parent_is_killed(tmp_path: Path) -> None:
    parent, children = start_parent(tmp_path)
    try:
        parent.kill()  # SIGKILL: no cleanup can run in the parent
        parent.wait(10)
        assert gone_within(children, 5.0) == []
    finally:
        for pid in children:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_sigterm_runs_the_parents_cleanup(tmp_path: Path) -> None:
    parent, children = start_parent(tmp_path)
    try:
        assert list(tmp_path.glob("aci-redis-*"))
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(20) == 130  # as Ctrl-C: the same cleanup, the same exit code
        assert gone_within(children, 5.0) == []
        assert not list(tmp_path.glob("aci-redis-*"))  # its folder removed: cleanup ran
    finally:
        for pid in children:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
