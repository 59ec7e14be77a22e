"""Worker processes started by this process (demo, benchmarks): started together, stopped
with SIGTERM (they drain), killed only if they do not stop in time."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator, Mapping
from typing import Final

__all__ = ["CLI", "worker_processes"]

# The console script in a child process. -P: the installed package, never a same-named `app/`
# of the directory the user runs the demo or the benchmark in.
CLI: Final = (sys.executable, "-P", "-m", "app.cli")


@contextlib.contextmanager
def worker_processes(
    env: Mapping[str, str], count: int, concurrency: int = 16, *, quiet: bool = False
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Run `count` `aci-evidence worker` processes with `env` for the duration of the block."""
    cmd = [*CLI, "worker", "--concurrency", str(concurrency)]
    stderr = subprocess.DEVNULL if quiet else None
    procs = [
        subprocess.Popen(cmd, env=dict(env), stdin=subprocess.DEVNULL, stderr=stderr)
        for _ in range(count)
    ]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
