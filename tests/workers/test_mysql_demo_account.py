"""The demo's reader account is reachable from this machine only, and the demo says what it
created in the MariaDB it found and how to remove it (issue 35, item 5)."""

from __future__ import annotations

import uuid
from typing import Any

import pymysql
import pytest

from workers.sources.mysql.shop import DemoShop, create_reader, prepare_demo_shop

pytestmark = pytest.mark.mariadb


def _root() -> pymysql.Connection[Any]:
    return pymysql.connect(host="127.0.0.1", port=3306, user="root", password="")


def test_the_reader_account_is_local_only() -> None:
    user = f"r{uuid.uuid4().hex[:12]}"
    conn = _root()
    try:
        create_reader(conn, "test", user, "pw")
        with conn.cursor() as cur:
            cur.execute("SELECT Host FROM mysql.user WHERE User = %s", (user,))
            assert {row[0] for row in cur.fetchall()} == {"localhost", "127.0.0.1"}
    finally:
        with conn.cursor() as cur:
            for host in ("localhost", "127.0.0.1", "%"):
                cur.execute("DROP USER IF EXISTS %s@%s", (user, host))
        conn.close()


async def test_the_demo_says_what_it_created_and_how_to_remove_it() -> None:
    shop = await prepare_demo_shop()
    note = shop.note()
    assert "demo database `shop`" in note and "aci_reader@'localhost'" in note
    assert "aci_reader@'127.0.0.1'" in note and "'%'" not in note
    assert "127.0.0.1:3306" in note
    assert "DROP DATABASE shop; DROP USER " in note
    assert DemoShop("u", True, "h:1").note().startswith("created ")
    assert DemoShop("u", False, "h:1").note().startswith("using the existing ")
