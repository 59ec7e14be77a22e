"""Worker processes started by this process (demo, benchmarks): started together, stopped
with SIGTERM (they drain), killed only if they do not stop in time. They do not outlive this
process: on Linux the kernel kills them when it dies, even by SIGKILL
(`pipeline.embedded.die_with_parent`), and a SIGTERM to it stops them as Ctrl-C does
(`sigterm_runs_cleanup`)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from typing import Final

from app.interrupt import GRACE
from pipeline.embedded import die_with_parent, sigterm_runs_cleanup

__all__ = ["CLI", "worker_processes"]

# The console script in a child process. -P: the installed package, never a same-named `app/`
# of the directory the user runs the demo or the benchmark in.
CLI: Final = (sys.executable, "-P", "-m", "app.cli")
# How long the workers have, all together, to drain after SIGTERM before they are killed: well
# inside Ctrl-C's grace (`app.interrupt.GRACE`), so the cleanup after them (the embedded Redis
# and its folder) still runs. A worker killed here leaves its entries pending (taken over).
STOP_S: Final = GRACE - 3.0


@contextlib.contextmanager
def worker_processes(
    env: Mapping[str, str], count: int, concurrency: int = 16, *, quiet: bool = False
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Run `count` `aci-evidence worker` processes with `env` for the duration of the block
    (started from this thread, which must outlive the block: see `die_with_parent`)."""
    cmd = [*CLI, "worker", "--concurrency", str(concurrency)]
    stderr = subprocess.DEVNULL if quiet else None
    with sigterm_runs_cleanup():
        procs: list[subprocess.Popen[bytes]] = []
        try:
            while len(procs) < count:  # one by one: those started are stopped if one fails
                procs.append(
                    subprocess.Popen(
                        cmd,
                        env=dict(env),
                        stdin=subprocess.DEVNULL,
                        stderr=stderr,
                        preexec_fn=die_with_parent(),
                    )
                )
            yield procs
        finally:
            for proc in procs:
                proc.terminate()
            deadline = time.monotonic() + STOP_S  # one deadline for all: they drain together
            for proc in procs:
                try:
                    proc.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
