"""Private servers for destructive scenarios: a redis-server (AOF on) and a mariadbd, each on a
free loopback port with its own data directory, stoppable and restartable at will.

The shared Redis on 6379 and MariaDB on 3306 are never touched: other test runs use them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pymysql

from pipeline.local_cluster import ServiceError, wait_port
from workers.sources.mysql.shop import create_reader, load_shop

__all__ = [
    "OwnMariadb",
    "OwnRedis",
    "ServiceError",
    "free_port",
    "own_mariadb",
    "own_redis",
    "wait_port",
]

READER: Final = ("chaos_reader", "chaos-Reader-pw-7Q")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OwnRedis:
    """A redis-server with AOF (`appendfsync always`), restartable on the same port and data."""

    def __init__(self, folder: Path, *, password: str | None = None) -> None:
        self.folder = folder
        self.port = free_port()
        self.password = password
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The URL to connect with (the ACL user and password when one is set)."""
        if self.password:
            return f"redis://chaos:{self.password}@127.0.0.1:{self.port}/0"
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start (or restart) the server; returns when it answers."""
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--dir", str(self.folder), "--appendonly", "yes", "--appendfsync", "always"]
        args += ["--save", "", "--protected-mode", "no", "--loglevel", "warning"]
        if self.password:
            # The default user stays on (with another password): Redis 7.0 replays the AOF's
            # MULTI/EXEC blocks (our Lua scripts' effects) as the default user, and with it off
            # silently drops them on restart (redis/redis#14541, fixed by #14545 after 7.0.15).
            args += ["--user", "default", "on", f">{self.password}-default", "~*", "&*", "+@all"]
            args += ["--user", "chaos", "on", f">{self.password}", "~*", "&*", "+@all"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, up=True)

    def stop(self) -> None:
        """Stop the server (SIGTERM: AOF is flushed) and wait until the port refuses."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            self.proc.wait(15)
        self.proc = None
        wait_port(self.port, up=False)

    def freeze(self) -> None:
        """SIGSTOP: connections hang (a partition), nothing is refused."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT after `freeze`."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)


class OwnMariadb:
    """A mariadbd with its own datadir, the demo shop loaded and a SELECT-only reader."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.datadir = folder / "data"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def reader_url(self) -> str:
        """`ACI_MYSQL_SHOP_URL` for the reader account."""
        user, password = READER
        return f"mysql://{user}:{password}@127.0.0.1:{self.port}/shop"

    def install(self) -> None:
        """Create the datadir, start, load the shop and the reader account."""
        subprocess.run(
            ["mariadb-install-db", "--no-defaults", f"--datadir={self.datadir}",
             "--auth-root-authentication-method=normal", "--skip-test-db", "--user=root"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120,
        )  # fmt: skip
        self.start()
        conn = pymysql.connect(host="127.0.0.1", port=self.port, user="root", charset="utf8mb4")
        try:
            load_shop(conn, "shop")
            create_reader(conn, "shop", *READER)
        finally:
            conn.close()

    def start(self) -> None:
        """Start the server; returns when it answers."""
        args = [
            "mariadbd", "--no-defaults", f"--datadir={self.datadir}", f"--port={self.port}",
            "--bind-address=127.0.0.1", f"--socket={self.folder / 'mysqld.sock'}",
            f"--pid-file={self.folder / 'mysqld.pid'}", "--user=root", "--skip-log-bin",
            "--innodb-buffer-pool-size=32M", "--skip-name-resolve", "--max-connections=500",
        ]  # fmt: skip
        log = (self.folder / "mariadbd.log").open("ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=log)
        log.close()
        wait_port(self.port, up=True, limit=60)
        self._wait_answers(limit=60)

    def _wait_answers(self, limit: float) -> None:
        """Wait until the server answers a query. Its port listens before it is ready: a
        SIGTERM in that window was lost (the `stop` right after a `start` then waited out its
        60 s and killed it; the CI-scale mariadb_restart scenario took 75 s instead of 15 s)."""
        deadline = time.monotonic() + limit
        while True:
            try:
                conn = pymysql.connect(
                    host="127.0.0.1", port=self.port, user="root", connect_timeout=2
                )
            except pymysql.err.OperationalError:
                if time.monotonic() > deadline:
                    raise ServiceError(f"mariadbd on port {self.port} did not answer") from None
                time.sleep(0.05)
                continue
            try:
                with conn.cursor() as cursor:
                    cursor.execute("SELECT 1")
            finally:
                conn.close()
            return

    def stop(self) -> None:
        """Shut down (SIGTERM, a clean shutdown) and wait until the port refuses."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None
        wait_port(self.port, up=False)


@contextlib.contextmanager
def own_redis(password: str | None = None) -> Iterator[OwnRedis]:
    """A private Redis for the duration of the block."""
    folder = Path(tempfile.mkdtemp(prefix="aci-chaos-redis-"))
    server = OwnRedis(folder, password=password)
    try:
        server.start()
        yield server
    finally:
        with contextlib.suppress(Exception):
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def own_mariadb() -> Iterator[OwnMariadb]:
    """A private MariaDB with the shop loaded, for the duration of the block."""
    folder = Path(tempfile.mkdtemp(prefix="aci-chaos-mariadb-"))
    server = OwnMariadb(folder)
    try:
        server.install()
        yield server
    finally:
        with contextlib.suppress(Exception):
            server.stop()
        if os.environ.get("ACI_CHAOS_KEEP") != "1":
            shutil.rmtree(folder, ignore_errors=True)
