"""The demo shop in a database of its own on the test MariaDB, read by an account of its own
(SELECT only), for the `query_mysql` tests that need a fresh one per module."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import pymysql

from workers.sources.mysql.shop import create_reader, load_shop

ROOT = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}


@contextlib.contextmanager
def shop_database(short: str) -> Iterator[tuple[str, str, str]]:
    """(database, reader, its password): `aci_<short>_<tag>`, dropped with its reader after."""
    tag = uuid.uuid4().hex[:10]
    name, user, password = f"aci_{short}_{tag}", f"aci_{short}r_{tag}", f"pw-{tag}"
    conn = pymysql.connect(**ROOT, charset="utf8mb4", autocommit=True)
    try:
        load_shop(conn, name)
        create_reader(conn, name, user, password)
        yield name, user, password
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
            for host in ("localhost", "127.0.0.1"):
                cur.execute(f"DROP USER IF EXISTS '{user}'@'{host}'")
        conn.close()


def running(fragment: str) -> int:
    """Statements the server is running (another connection's) whose text holds `fragment`."""
    conn = pymysql.connect(**ROOT, charset="utf8mb4", autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE %s AND ID <> "
                "CONNECTION_ID()",
                (f"%{fragment}%",),
            )
            return int(cur.fetchone()[0])
    finally:
        conn.close()
