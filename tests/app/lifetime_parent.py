"""A parent that starts what the demo and the benchmarks start (a private redis-server, one
worker process), prints their pids as one JSON line, then waits to be killed. Run by
tests/app/test_fleet_lifetime.py as `python -m tests.app.lifetime_parent`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio

from app.fleet import worker_processes
from pipeline.embedded import embedded_redis


def _children() -> list[int]:
    me = os.getpid()
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            found.append(int(stat.parent.name))
    return found


async def main() -> None:
    async with embedded_redis() as url:
        redis_pids = _children()
        env = dict(os.environ, ACI_REDIS_URL=url, ACI_PREFIX="life", ACI_INSTANT_SOURCES="1")
        with worker_processes(env, 1, quiet=True) as procs:
            workers = [p.pid for p in procs]
            print(json.dumps({"redis": redis_pids, "workers": workers}), flush=True)
            await anyio.sleep(600)


if __name__ == "__main__":
    try:
        anyio.run(main)
    except KeyboardInterrupt:
        sys.exit(130)
