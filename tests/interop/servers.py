"""The servers the client matrix drives: `aci-evidence mcp` (stdio or HTTP, in-process or
through the queue) and a queue worker, each a subprocess of the project's own venv.

This module imports nothing of the project: the matrix runs in `.venv-interop`, a venv of
its own with the pinned third-party clients (`make interop`), and talks to the servers only
as their hosts do. `ACI_SERVER_PYTHON` names the project's interpreter (default: `.venv`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SERVER_PYTHON = os.environ.get("ACI_SERVER_PYTHON", str(REPO / ".venv" / "bin" / "python"))
REDIS_URL = os.environ.get("ACI_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
TOKEN = "interop-token-0123456789"


def server_env(**extra: str) -> dict[str, str]:
    """The environment of a server: none of the caller's ACI_ settings, the project on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    env["PYTHONPATH"] = str(REPO)
    # A loaded CI machine runs 20 in-process lookups at once: the matrix tests the clients,
    # not the sources' time limit.
    env.update(ACI_DEADLINE_S="60", ACI_VISIBILITY_TIMEOUT_S="90")
    env.update(extra)
    return env


def queue_env(prefix: str) -> dict[str, str]:
    return {"ACI_REDIS_URL": REDIS_URL, "ACI_PREFIX": prefix}


def fresh_prefix() -> str:
    return f"interop-{secrets.token_hex(4)}"


def stdio_command(*args: str) -> tuple[str, list[str]]:
    """(command, args) of a stdio server, as a host's configuration names them."""
    return SERVER_PYTHON, ["-m", "app.cli", "mcp", *args]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def http_server(*args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`aci-evidence mcp --http` on a free port; yields its URL once it accepts connections."""
    port = _free_port()
    process = subprocess.Popen(
        [SERVER_PYTHON, "-m", "app.cli", "mcp", *args, "--http", str(port)],
        cwd=REPO,
        env=server_env(**(env or {})),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert process.poll() is None, "the server exited"
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        _stop(process)


@contextlib.contextmanager
def worker(prefix: str) -> Iterator[None]:
    """A queue worker on `prefix` (the MOCK incident's sources)."""
    process = subprocess.Popen(
        [SERVER_PYTHON, "-m", "app.cli", "worker"],
        cwd=REPO,
        env=server_env(**queue_env(prefix)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        _stop(process)


async def flood(url: str, count: int) -> None:
    """`count` initialize requests from this address, their sessions left open (eviction
    pressure on the address's held sessions)."""
    import httpx

    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "flood", "version": "0"}}}  # fmt: skip
    headers = {"accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as client:
        for _ in range(count):
            await client.post(url, json=body)
