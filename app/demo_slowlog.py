"""A slow query log written by MariaDB itself, for the demo's `real-log-files` scenario.

`mariadb_slow_log(folder, target)` starts a private `mariadbd` (its own datadir under
`folder`, a unix socket, no TCP, `slow_query_log=1`, `long_query_time=0`), plays the
incident's statements against a small `shop.orders` table without an index on `customer_id`
(point lookups, then `SELECT ... FOR UPDATE` scans of every row), shuts the server down and
moves its slow log to `target`. Anything missing or failing (no MariaDB installed, a socket
path too long, a slow machine) leaves `target` as it was and returns why, in one line: the
demo then reads the log written in MariaDB's format instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Final

import pymysql

__all__ = ["mariadb_slow_log"]

_ROWS: Final = 20_000
_START_SECONDS: Final = 30.0


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidate = Path("/usr/sbin") / name
    return str(candidate) if candidate.exists() else None


def _connect(socket: Path, server: subprocess.Popen[bytes]) -> Any:
    deadline = time.monotonic() + _START_SECONDS
    while not socket.exists():  # connecting before the socket exists leaks pymysql's socket
        if time.monotonic() > deadline or server.poll() is not None:
            raise RuntimeError("mariadbd did not start")
        time.sleep(0.05)
    while True:
        try:
            return pymysql.connect(unix_socket=str(socket), user="root", autocommit=True)
        except pymysql.err.OperationalError:
            if time.monotonic() > deadline or server.poll() is not None:
                raise
            time.sleep(0.1)


def _play(conn: Any) -> str:
    with conn.cursor() as cur:
        cur.execute("SET SESSION long_query_time = 1000")  # the setup is not the incident
        cur.execute("SELECT VERSION()")
        row = cur.fetchone()
        version = str(row[0]) if row else "?"
        cur.execute("CREATE DATABASE shop")
        cur.execute("USE shop")
        cur.execute(
            "CREATE TABLE orders (id INT PRIMARY KEY, customer_id INT NOT NULL, "
            "status VARCHAR(16) NOT NULL, total DECIMAL(10,2) NOT NULL)"
        )
        cur.execute(
            "INSERT INTO orders SELECT seq, seq % 500, IF(seq % 7 = 0, 'PENDING', 'PAID'), "
            f"seq % 300 FROM seq_1_to_{_ROWS}"
        )
        cur.execute("SET SESSION long_query_time = 0")
        for order in range(9001, 9006):  # routine traffic: one row examined each
            cur.execute("SELECT id, total FROM orders WHERE id = %s", (order,))
            cur.fetchall()
        for customer in range(500, 504):  # the incident: every row scanned and locked
            cur.execute("BEGIN")
            cur.execute(
                "SELECT * FROM orders WHERE customer_id = %s AND status = 'PENDING' FOR UPDATE",
                (customer,),
            )
            cur.fetchall()
            cur.execute("COMMIT")
    return version


def _stop(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        server.terminate()  # a clean shutdown: the slow log is complete afterwards
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)


def mariadb_slow_log(folder: Path, target: Path) -> tuple[bool, str]:
    """Have a private MariaDB write the incident's slow log to `target`: (True, its version)
    or (False, the one-line reason it did not)."""
    mariadbd, install = _binary("mariadbd"), _binary("mariadb-install-db")
    if mariadbd is None or install is None:
        return False, "no mariadbd installed"
    data, socket, log = folder / "mariadb", folder / "my.sock", folder / "mariadb-slow.log"
    try:
        subprocess.run(
            [install, "--no-defaults", f"--datadir={data}", "--user=root",
             "--auth-root-authentication-method=normal", "--skip-test-db"],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"mariadb-install-db failed ({type(exc).__name__})"
    server = subprocess.Popen(
        [mariadbd, "--no-defaults", f"--datadir={data}", f"--socket={socket}",
         "--skip-networking", "--user=root", "--skip-log-bin", "--innodb-buffer-pool-size=16M",
         "--slow_query_log=1", "--long_query_time=0", f"--slow_query_log_file={log}",
         f"--pid-file={folder / 'mariadb.pid'}", f"--log-error={folder / 'mariadb.err'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        conn = _connect(socket, server)
        try:
            version = _play(conn)
        finally:
            conn.close()
    except Exception as exc:  # any failure only means: the demo keeps the written log
        return False, f"the private mariadbd failed ({type(exc).__name__})"
    finally:
        _stop(server)
        shutil.rmtree(data, ignore_errors=True)
    if not log.exists():
        return False, "mariadbd wrote no slow log"
    os.replace(log, target)
    return True, version
