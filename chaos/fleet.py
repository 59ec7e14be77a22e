"""A fleet of worker processes (`python -m app.cli worker`, or the fault-injecting
`python -m chaos.worker`) that can be SIGKILLed, frozen, resumed and restarted.

Each worker's stderr goes to its own log file, kept for the secrets scan; an exit nobody asked
for is counted as a crash (and the worker restarted, as a supervisor would).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Final

__all__ = ["STARTED", "Fleet", "WorkerProc", "open_fleet"]

ROOT: Final = Path(__file__).resolve().parents[1]
# The worker's start line (`workers.runtime.worker`: "worker <consumer> started: partitions
# ..."); the older "started (concurrency ..." form too. A pattern that stops matching makes
# every scenario wait out `Run.fleet_ready`'s limit, so the scenario notes that wait.
STARTED: Final = re.compile(r"\bworker \S+ started[:(]| started \(concurrency ")


class WorkerProc:
    """One worker process and its log file."""

    def __init__(self, argv: list[str], env: Mapping[str, str], log: Path) -> None:
        self.log = log
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                argv, cwd=ROOT, env=dict(env), stdout=out, stderr=subprocess.STDOUT
            )
        self.expected_exit = False

    @property
    def pid(self) -> int:
        """The process id (part of the worker's consumer name)."""
        return self.proc.pid

    def started(self) -> bool:
        """True once the worker logged that it started (its group exists; it reads next)."""
        return STARTED.search(self.log.read_text("utf-8", "replace")) is not None

    def alive(self) -> bool:
        """True while the process runs."""
        return self.proc.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        """Send a signal; SIGKILL and SIGTERM mark the exit as expected."""
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.expected_exit = True
        if self.alive():
            self.proc.send_signal(sig)


class Fleet:
    """Worker processes sharing one configuration."""

    def __init__(self, env: Mapping[str, str], folder: Path, *, module: str, concurrency: int):
        self.env = env
        self.folder = folder
        self.module = module
        self.concurrency = concurrency
        self.workers: list[WorkerProc] = []
        self.crashes = 0
        self.started = 0
        self.kept_logs: str | None = None

    def argv(self) -> list[str]:
        """The command line of one worker."""
        # -P: the installed package, never a same-named one of the current directory.
        head = [sys.executable, "-P", "-m", self.module, "--log-level", "INFO"]
        return [*head, "worker", "--concurrency", str(self.concurrency)]

    def spawn(self) -> WorkerProc:
        """Start one more worker."""
        self.started += 1
        log = self.folder / f"worker-{self.started}.log"
        worker = WorkerProc(self.argv(), self.env, log)
        self.workers.append(worker)
        return worker

    def replace(self, worker: WorkerProc) -> WorkerProc:
        """Wait for a (killed) worker to be gone and start a fresh one in its place."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.proc.wait(10)
        self.workers.remove(worker)
        return self.spawn()

    def supervise(self) -> int:
        """Restart workers that exited on their own; returns how many did."""
        gone = [w for w in self.workers if not w.alive() and not w.expected_exit]
        for worker in gone:
            self.crashes += 1
            self.replace(worker)
        return len(gone)

    def stop(self) -> None:
        """SIGTERM every worker (drain), then SIGKILL the stragglers."""
        for worker in self.workers:
            worker.signal(signal.SIGCONT)
            worker.signal(signal.SIGTERM)
        for worker in self.workers:
            try:
                worker.proc.wait(15)
            except subprocess.TimeoutExpired:
                worker.proc.kill()
                worker.proc.wait(5)

    def logs(self) -> str:
        """Every worker's log, concatenated."""
        if self.kept_logs is not None:
            return self.kept_logs
        return "".join(p.read_text("utf-8", "replace") for p in sorted(self.folder.glob("*.log")))


@contextlib.contextmanager
def open_fleet(
    env: Mapping[str, str], size: int, *, module: str = "app.cli", concurrency: int = 16
) -> Iterator[Fleet]:
    """`size` workers for the duration of the block; stopped (drained) on exit."""
    folder = Path(tempfile.mkdtemp(prefix="aci-chaos-fleet-"))
    full = {**os.environ, **env}
    fleet = Fleet(full, folder, module=module, concurrency=concurrency)
    try:
        for _ in range(size):
            fleet.spawn()
        yield fleet
    finally:
        fleet.stop()
        if os.environ.get("ACI_CHAOS_KEEP") != "1":
            fleet.kept_logs = fleet.logs()
            shutil.rmtree(folder, ignore_errors=True)
