"""Ctrl-C at any moment ends `aci-evidence` promptly: exit 130, nothing on stderr, no child
process (workers, the embedded redis-server) and no Redis folder left behind — while it
imports, connects, follows, plays the demo's script, keeps running; also when the parent
left SIGINT ignored (a shell's `cmd &`), which used to make `views --follow` run forever and
`demo --keep-running` miss a Ctrl-C sent as it said "Ctrl-C stops them". A second Ctrl-C
ends it at once. All cases run at once, each in its own session (process group)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import REDIS_URL

pytestmark = [
    pytest.mark.redis,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]
ROOT = Path(__file__).resolve().parents[2]
BOUND = 15.0  # seconds from Ctrl-C to exit, generous for a loaded 2-core machine
VIEWS = ("views", "--session", "s1", "--view", "model", "--follow")
DEMO = ("demo", "--keep-running")


def _group(pgid: int) -> list[int]:
    """Running processes of the process group (zombies nobody reaps are not running)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                found.append(int(stat.parent.name))
    return found


def _connected_to_redis(pid: int) -> bool:
    """The process holds an established TCP connection to the shared Redis (6379)."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                inodes.add(os.readlink(fd))
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
            f = line.split()
            if f[2].endswith(":18EB") and f[3] == "01" and f"socket:[{f[9]}]" in inodes:
                return True
    return False


class Run:
    """One command in its own session; stdout lines collected as they come."""

    def __init__(self, args: tuple[str, ...], env: dict[str, str], *, sigint_ignored: bool):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", *args],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
            # As a parent's `cmd &` leaves it: the CLI must take Ctrl-C all the same.
            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
            if sigint_ignored else None,
        )  # fmt: skip
        self.started = time.monotonic()
        self.lines: list[str] = []
        self.err = ""
        self._readers = [
            threading.Thread(target=self._read_out, daemon=True),
            threading.Thread(target=self._read_err, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        self.err = self.proc.stderr.read()

    def until(self, ready: Callable[[], bool], seconds: float = 120) -> None:
        deadline = time.monotonic() + seconds
        while not ready():
            assert self.proc.poll() is None, f"exited early: {self.proc.returncode} {self.err}"
            assert time.monotonic() < deadline, "never got ready"
            time.sleep(0.005)

    def said(self, text: str) -> Callable[[], bool]:
        return lambda: any(text in line for line in self.lines)

    def interrupt(self, *, group: bool = False, twice: bool = False) -> tuple[int | None, float]:
        """Ctrl-C (to the process, or to its group as a terminal sends it); the exit code
        (None: still running after BOUND) and how long it took."""
        sent = time.monotonic()
        (os.killpg if group else os.kill)(self.proc.pid, signal.SIGINT)
        if twice:
            time.sleep(0.05)
            sent = time.monotonic()
            (os.killpg if group else os.kill)(self.proc.pid, signal.SIGINT)
        try:
            code: int | None = self.proc.wait(BOUND)
        except subprocess.TimeoutExpired:
            code = None
        return code, time.monotonic() - sent

    def left_behind(self) -> list[int]:
        deadline = time.monotonic() + 5  # children stopped by its cleanup or by the kernel
        while _group(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        return _group(self.proc.pid)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        for reader in self._readers:
            reader.join(5)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def _case(
    args: tuple[str, ...],
    env: dict[str, str],
    when: Callable[[Run], None],
    *,
    sigint_ignored: bool = False,
    group: bool = False,
    twice: bool = False,
) -> str:
    """'' when Ctrl-C ended the command as promised, else what went wrong."""
    run = Run(args, env, sigint_ignored=sigint_ignored)
    try:
        when(run)
        at = time.monotonic() - run.started
        code, took = run.interrupt(group=group, twice=twice)
        left = run.left_behind()
        run.close()
        # A second Ctrl-C that lands while the interpreter is already exiting (its handlers
        # reset) kills it by SIGINT: at once as well, and a shell says 130 for both.
        codes, bound = ((130, -signal.SIGINT), 2.0) if twice else ((130,), BOUND)
        if code not in codes or took > bound or run.err or left:
            return (
                f"{args[0]} Ctrl-C at {at:.2f}s: exit {code} after {took:.1f}s, "
                f"left {left}, stderr {run.err[-600:]!r}"
            )
        return ""
    finally:
        run.close()


def _after(seconds: float) -> Callable[[Run], None]:
    return lambda run: time.sleep(max(0.0, run.started + seconds - time.monotonic()))


def test_ctrl_c_at_any_moment_exits_130_quietly_leaving_nothing(tmp_path: Path) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    base.update(TMPDIR=str(tmp_path), COLUMNS="80", ACI_INSTANT_SOURCES="0")
    views = dict(base, ACI_REDIS_URL=REDIS_URL, ACI_PREFIX=f"t{uuid.uuid4().hex[:12]}")

    def on_connection(run: Run) -> None:
        run.until(lambda: _connected_to_redis(run.proc.pid))

    def on_line(text: str) -> Callable[[Run], None]:
        return lambda run: run.until(run.said(text))

    cases: list[Callable[[], str]] = [
        # views --follow: importing, connecting, connected, following; SIGINT ignored or not.
        *(lambda d=d: _case(VIEWS, views, _after(d)) for d in (0.3, 0.7, 1.5)),
        lambda: _case(VIEWS, views, on_connection),
        lambda: _case(VIEWS, views, _after(1.0), sigint_ignored=True),
        lambda: _case(VIEWS, views, on_connection, sigint_ignored=True, twice=True),
        # demo: importing; Redis up and workers starting (Ctrl-C to the whole group, as a
        # terminal sends it); at its "Ctrl-C stops them" with SIGINT left ignored.
        lambda: _case(DEMO, base, _after(0.4)),
        lambda: _case(DEMO, base, on_line("redis: embedded"), group=True),
        lambda: _case(DEMO, base, on_line("Ctrl-C stops them"), sigint_ignored=True),
    ]
    with ThreadPoolExecutor(max_workers=len(cases)) as pool:
        problems = [p for p in pool.map(lambda case: case(), cases) if p]
    assert problems == []
    assert not list(tmp_path.glob("aci-redis-*"))  # each embedded Redis cleaned up its folder


def test_a_second_ctrl_c_ends_the_demo_at_once(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    env.update(TMPDIR=str(tmp_path), COLUMNS="80")

    def workers_started(run: Run) -> None:
        run.until(lambda: len(_group(run.proc.pid)) >= 4)  # itself, redis-server, 2 workers

    # No cleanup waited for: the children go with it (the kernel's parent-death signal).
    assert _case(DEMO, env, workers_started, twice=True) == ""
