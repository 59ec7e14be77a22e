"""A real slow query log: a private mariadbd (own datadir, own socket, no TCP) with
`slow_query_log=1, long_query_time=0` writes it; the FILE backend reads it back."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest
from logs_helpers import file_source, search

from contracts import Topic

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("mariadbd") is None and not Path("/usr/sbin/mariadbd").exists(),
        reason="no mariadbd",
    ),
]
MARIADBD = shutil.which("mariadbd") or "/usr/sbin/mariadbd"


@pytest.fixture(scope="module")
def slow_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("mariadb")
    data, socket, log = root / "data", root / "mysqld.sock", root / "slow.log"
    subprocess.run(
        ["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=root",
         "--auth-root-authentication-method=normal", "--skip-test-db"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    server = subprocess.Popen(
        [MARIADBD, "--no-defaults", f"--datadir={data}", f"--socket={socket}", "--skip-networking",
         "--user=root", "--slow_query_log=1", "--long_query_time=0", f"--slow_query_log_file={log}",
         f"--pid-file={root / 'mysqld.pid'}", "--log-error=" + str(root / "error.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not socket.exists() and time.monotonic() < deadline and server.poll() is None:
            time.sleep(0.1)  # connecting before the socket exists leaks pymysql's socket
        while True:
            try:
                conn = pymysql.connect(unix_socket=str(socket), user="root")
                break
            except pymysql.err.OperationalError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.2)
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE shop")
            cur.execute("USE shop")
            cur.execute(
                "CREATE TABLE orders (id INT PRIMARY KEY, customer_id INT, status VARCHAR(16))"
            )
            cur.execute("INSERT INTO orders SELECT seq, seq % 100, 'PENDING' FROM seq_1_to_5000")
            for customer in (7, 8, 9):
                cur.execute(
                    "SELECT * FROM orders WHERE customer_id = %s AND status = 'PENDING'",
                    (customer,),
                )
                cur.fetchall()
            cur.execute("SELECT SLEEP(0.3)")
            cur.execute("SELECT 1")  # the statement before it is logged by now
        conn.close()
        deadline = time.monotonic() + 10  # the server writes an entry after it answers
        while "SELECT 1" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        yield log
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_real_slow_log_is_read(slow_log: Path) -> None:
    source = file_source(
        slow_log.parent,
        "mysql_slow",
        ["slow.log"],
        now=time.time() + 2,
        topic=Topic.DATABASE_SLOW_QUERY,
    )
    found = search(source, "table:orders customer_id rows_examined:>=5000")
    assert found.match_count == 3
    fields = found.records[0].fields
    assert fields["sql_template"] == "SELECT * FROM orders WHERE customer_id = ? AND status = ?"
    assert fields["schema"] == "shop" and fields["db_user"] == "root" and fields["rows_sent"] == 50
    assert isinstance(fields["duration_ms"], float) and isinstance(fields["lock_time_ms"], float)
    sleep = search(source, "SLEEP duration_ms:>=290")
    assert sleep.match_count == 1
    # the server's banner (its socket path, its port) is never a record
    everything = search(source, "")
    assert all("socket" not in r.message.lower() for r in everything.records)
