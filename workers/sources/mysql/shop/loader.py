"""Create and load the demo `shop` database and its SELECT-only reader account.

Used three ways: `ensure_demo_shop` (the demo, idempotent and safe under concurrent calls: a
named lock serialises loaders and a completeness check skips a loaded database), `load_shop`
(tests load a uniquely named copy) and `write_init_sql` (the SQL seed files for compose).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final, NamedTuple
from urllib.parse import quote

import anyio.to_thread
import pymysql
from pymysql.converters import escape_item

from workers.sources.mysql.shop.data import generate
from workers.sources.mysql.shop.schema import DDL, TABLES
from workers.sources.mysql.source import ConnectParams, parse_url

__all__ = [
    "DEMO_READER",
    "LOCAL_HOSTS",
    "DemoShop",
    "create_reader",
    "ensure_demo_shop",
    "load_shop",
    "prepare_demo_shop",
    "write_init_sql",
]

DEMO_READER: Final = ("aci_reader", "aci-demo-reader")  # demo only; documented in docs/mysql.md
_NAME: Final = re.compile(r"^[A-Za-z0-9_]{1,64}$")
_LOCK: Final = "aci_demo_shop_load"
# The demo reader's hosts: this machine only (a published password must not open the database
# to the network). Compose's seed files (`write_init_sql`) keep `%`: there the workers are
# other containers, and the database is the compose project's own.
LOCAL_HOSTS: Final = ("localhost", "127.0.0.1")


def _name(value: str) -> str:
    if not _NAME.fullmatch(value):
        raise ValueError("database and user names must match [A-Za-z0-9_]{1,64}")
    return value


def _insert_sql(table: str, width: int) -> str:
    return f"INSERT INTO `{table}` VALUES ({', '.join(['%s'] * width)})"


def _is_loaded(cur: Any, database: str) -> bool:
    cur.execute(
        "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (database,)
    )
    if cur.fetchone()[0] != len(TABLES):
        return False
    cur.execute(f"SELECT COUNT(*) FROM `{database}`.`{TABLES[-1]}`")
    return bool(cur.fetchone()[0] > 0)


def load_shop(conn: pymysql.Connection[Any], database: str) -> None:
    """(Re)create every shop table in `database` (created if missing) and bulk-load the rows."""
    db = _name(database)
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{db}` CHARACTER SET utf8mb4")
        cur.execute(f"USE `{db}`")
        for table in TABLES:
            cur.execute(f"DROP TABLE IF EXISTS `{table}`")
        for ddl in DDL:
            cur.execute(ddl)
        rows = generate()
        for table in TABLES:  # the last table is loaded last: it marks completeness
            data = rows[table]
            cur.executemany(_insert_sql(table, len(data[0])), data)
    conn.commit()


def create_reader(
    conn: pymysql.Connection[Any],
    database: str,
    user: str,
    password: str,
    hosts: tuple[str, ...] = LOCAL_HOSTS,
) -> None:
    """Create (or re-password) a SELECT-only account on `database`, reachable from `hosts`
    only (by default this machine: `localhost` and `127.0.0.1`, never `%`)."""
    db, name = _name(database), _name(user)
    with conn.cursor() as cur:
        for host in hosts:
            account = (name, host, password)
            cur.execute("CREATE USER IF NOT EXISTS %s@%s IDENTIFIED BY %s", account)
            cur.execute("ALTER USER %s@%s IDENTIFIED BY %s", account)
            cur.execute(f"GRANT SELECT ON `{db}`.* TO %s@%s", (name, host))
    conn.commit()


def _connect(params: ConnectParams) -> pymysql.Connection[Any]:
    return pymysql.connect(
        host=params.host, port=params.port, user=params.user, password=params.password,
        charset="utf8mb4", autocommit=False, connect_timeout=5,
    )  # fmt: skip


class DemoShop(NamedTuple):
    """What `prepare_demo_shop` left: the reader's URL and whether it loaded the database."""

    url: str
    loaded: bool
    server: str  # host:port of the MariaDB it used

    def note(self) -> str:
        """One line for the demo: what exists now in that MariaDB and how to remove it."""
        user = DEMO_READER[0]
        accounts = " and ".join(f"{user}@'{h}'" for h in LOCAL_HOSTS)
        done = "created" if self.loaded else "using the existing"
        drop = ", ".join(f"'{user}'@'{h}'" for h in LOCAL_HOSTS)
        host, _, port = self.server.rpartition(":")
        return (
            f"{done} demo database `shop` and SELECT-only account {accounts} (password "
            f"{DEMO_READER[1]!r}, this machine only) in the MariaDB at {self.server}; remove "
            f'them with: mysql -h {host} -P {port} -u root -e "DROP DATABASE shop; '
            f'DROP USER {drop}"'
        )


def _ensure(admin_url: str, database: str) -> DemoShop:
    params = parse_url(admin_url)
    loaded = False
    conn = _connect(params)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT GET_LOCK(%s, 60)", (_LOCK,))
            if cur.fetchone()[0] != 1:
                raise RuntimeError("another loader holds the demo shop lock")
            try:
                if not _is_loaded(cur, database):
                    load_shop(conn, database)
                    loaded = True
                create_reader(conn, database, *DEMO_READER)
            finally:
                cur.execute("SELECT RELEASE_LOCK(%s)", (_LOCK,))
    finally:
        conn.close()
    user, password = DEMO_READER
    url = f"mysql://{user}:{quote(password, safe='')}@{params.host}:{params.port}/{database}"
    return DemoShop(url, loaded, f"{params.host}:{params.port}")


async def prepare_demo_shop(admin_url: str = "mysql://root@127.0.0.1:3306/") -> DemoShop:
    """Create and load `shop` and its SELECT-only reader if missing: the reader URL (for
    `ACI_MYSQL_SHOP_URL`), whether it loaded the database, and a note saying so."""
    return await anyio.to_thread.run_sync(_ensure, admin_url, "shop")


async def ensure_demo_shop(admin_url: str = "mysql://root@127.0.0.1:3306/") -> str:
    """Create and load `shop` and its SELECT-only reader if missing; return the reader URL
    (for `ACI_MYSQL_SHOP_URL`)."""
    return (await prepare_demo_shop(admin_url)).url


def write_init_sql(directory: Path, database: str = "shop") -> list[Path]:
    """Write the compose seed files (schema + data, reader account) into `directory`."""
    db = _name(database)
    rows = generate()
    lines = [f"CREATE DATABASE IF NOT EXISTS `{db}` CHARACTER SET utf8mb4;", f"USE `{db}`;"]
    lines += [ddl + ";" for ddl in DDL]
    for table in TABLES:
        for start in range(0, len(rows[table]), 500):
            chunk = rows[table][start : start + 500]
            values = ",\n".join(
                "(" + ", ".join(escape_item(v, "utf8mb4") for v in row) + ")" for row in chunk
            )
            lines.append(f"INSERT INTO `{table}` VALUES\n{values};")
    user, password = DEMO_READER
    grants = []
    for host in ("%", "localhost"):
        grants += [
            f"CREATE USER IF NOT EXISTS '{user}'@'{host}' IDENTIFIED BY '{password}';",
            f"GRANT SELECT ON `{db}`.* TO '{user}'@'{host}' WITH MAX_STATEMENT_TIME 30;",
        ]
    directory.mkdir(parents=True, exist_ok=True)
    data_path, user_path = directory / "10-shop.sql", directory / "20-reader.sql"
    header = "-- generated by workers.sources.mysql.shop.write_init_sql\n"
    data_path.write_text(header + "\n".join(lines) + "\n")
    user_path.write_text("-- demo only: SELECT-only reader\n" + "\n".join(grants) + "\n")
    return [data_path, user_path]
