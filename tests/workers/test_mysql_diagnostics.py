"""The server diagnostic views (docs/mysql.md "Diagnostic views"): an operator opt-in per data
source, off by default, that lets a SELECT read who holds connections and locks.

Pure guard cases first (off by default, the hostile corpus unchanged with it on, bypass
attempts on the new views), then the real MariaDB: one session holds a row lock, another
waits for it, a third works in another schema; the agent sees the first two through
PROCESSLIST, INNODB_TRX, INNODB_LOCK_WAITS and INNODB_LOCKS, never the third, never a literal.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pymysql
import pytest

from contracts.requests import QueryMysqlRequest
from contracts.status import ErrorCode
from pipeline.settings import SettingsError
from tests.workers.sql_corpus import CORPUS
from workers.sources import SourceError, warm_up
from workers.sources.mysql.config import data_source_names, diagnostic_names, read_config_file
from workers.sources.mysql.diagnostics import (
    ANCHORED_VIEWS,
    CLEANED_COLUMNS,
    HIDDEN_COLUMNS,
    NOT_SHOWN,
    OTHER_SCHEMA,
    clean_cell,
)
from workers.sources.mysql.source import ConnectParams, MysqlSource
from workers.sources.mysql.sqlguard import guard_sql

ROOT = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}

PROCESSLIST = (
    "SELECT ID, COMMAND, TIME, STATE, INFO FROM information_schema.PROCESSLIST "
    "WHERE DB = DATABASE()"
)
TRX = (
    "SELECT t.trx_id, t.trx_state, t.trx_rows_locked, t.trx_query, p.ID "
    "FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p "
    "WHERE p.DB = DATABASE() AND t.trx_mysql_thread_id = p.ID"
)
WAITS = (
    "SELECT w.requesting_trx_id, w.blocking_trx_id, r.trx_mysql_thread_id, r.trx_query, "
    "b.trx_mysql_thread_id, b.trx_query "
    "FROM information_schema.INNODB_LOCK_WAITS w "
    "JOIN information_schema.INNODB_TRX r JOIN information_schema.PROCESSLIST rp "
    "JOIN information_schema.INNODB_TRX b JOIN information_schema.PROCESSLIST bp "
    "WHERE rp.DB = DATABASE() AND bp.DB = DATABASE() "
    "AND r.trx_mysql_thread_id = rp.ID AND b.trx_mysql_thread_id = bp.ID "
    "AND w.requesting_trx_id = r.trx_id AND w.blocking_trx_id = b.trx_id"
)
LOCKS = (
    "SELECT l.lock_trx_id, l.lock_mode, l.lock_type, l.lock_table, l.lock_index "
    "FROM information_schema.INNODB_LOCKS l JOIN information_schema.INNODB_TRX t "
    "JOIN information_schema.PROCESSLIST p WHERE p.DB = DATABASE() "
    "AND t.trx_mysql_thread_id = p.ID AND l.lock_trx_id = t.trx_id"
)
VIEW_QUERIES = (PROCESSLIST, TRX, WAITS, LOCKS)


# -- the guard (pure) -----------------------------------------------------------------------


@pytest.mark.parametrize("sql", VIEW_QUERIES)
def test_every_view_is_refused_without_the_opt_in(sql: str) -> None:
    with pytest.raises(SourceError) as info:
        guard_sql(sql, [])
    assert info.value.code is ErrorCode.FORBIDDEN_QUERY
    assert "is not allowed" in info.value.message


@pytest.mark.parametrize("sql", VIEW_QUERIES)
def test_every_view_is_read_with_the_opt_in(sql: str) -> None:
    guarded = guard_sql(sql, [], diagnostics=True)
    assert guarded.kind == "select"


@pytest.mark.parametrize(("name", "sql", "params", "expected"), CORPUS, ids=[c[0] for c in CORPUS])
def test_the_hostile_corpus_gets_the_same_verdict_with_the_opt_in(
    name: str, sql: str, params: list[Any], expected: str
) -> None:
    if expected in {"ok", "EXECUTION", "TIMEOUT"}:
        guard_sql(sql, params, schema="shop", diagnostics=True)
        return
    with pytest.raises(SourceError) as info:
        guard_sql(sql, params, schema="shop", diagnostics=True)
    assert info.value.code == ErrorCode(expected), info.value.message


def test_statement_columns_are_marked_for_cleaning_by_position() -> None:
    assert guard_sql(PROCESSLIST, [], diagnostics=True).cleaned == ((4, "sql"),)
    assert guard_sql(LOCKS, [], diagnostics=True).cleaned == ((3, "table"),)
    assert guard_sql(WAITS, [], diagnostics=True).cleaned == ((3, "sql"), (5, "sql"))
    # An EXPLAIN shows no cell of the view.
    assert guard_sql("EXPLAIN " + PROCESSLIST, [], diagnostics=True).cleaned == ()


_P = "information_schema.PROCESSLIST"
_T = "information_schema.INNODB_TRX"
BYPASSES = [
    # the DB term: missing, weakened, not top-level, in ON, on another alias, another value
    f"SELECT ID FROM {_P}",
    f"SELECT ID FROM {_P} WHERE DB = DATABASE() OR 1",
    f"SELECT ID FROM {_P} WHERE (DB = DATABASE() OR ID > 0)",
    f"SELECT ID FROM {_P} WHERE NOT DB <> DATABASE()",
    f"SELECT ID FROM {_P} WHERE DB = DATABASE() || 1",
    f"SELECT ID FROM {_P} WHERE DB = DATABASE() IS TRUE",
    f"SELECT ID FROM {_P} WHERE ID BETWEEN 0 AND DB = DATABASE()",
    f"SELECT ID FROM {_P} WHERE DB <=> DATABASE() ",
    f"SELECT ID FROM {_P} WHERE DB = 'mysql'",
    f"SELECT ID FROM {_P} WHERE DB = ?",
    f"SELECT ID FROM {_P} WHERE DB IN (DATABASE(), 'mysql')",
    f"SELECT ID FROM {_P} WHERE DB LIKE '%'",
    f"SELECT p.ID FROM {_P} p LEFT JOIN orders o ON p.DB = DATABASE()",
    f"SELECT p.ID FROM {_P} p JOIN {_P} q WHERE q.DB = DATABASE()",
    f"SELECT p.ID FROM {_P} p JOIN orders o WHERE DB = DATABASE()",
    f"SELECT ID FROM orders WHERE id IN (SELECT ID FROM {_P})",
    f"SELECT ID FROM {_P} WHERE DB = DATABASE() UNION SELECT ID FROM {_P}",
    f"WITH c AS (SELECT ID FROM {_P}) SELECT ID FROM c",
    f"SELECT x.ID FROM (SELECT ID FROM {_P}) x",
    f"SELECT ID FROM orders o WHERE EXISTS (SELECT 1 FROM {_P} WHERE 1 = 1)",
    # columns naming accounts, hosts, the schema, raw statements, key values
    f"SELECT USER FROM {_P} WHERE DB = DATABASE()",
    f"SELECT p.HOST FROM {_P} p WHERE p.DB = DATABASE()",
    f"SELECT DB FROM {_P} WHERE DB = DATABASE()",
    f"SELECT INFO_BINARY FROM {_P} WHERE DB = DATABASE()",
    f"SELECT ID FROM {_P} WHERE DB = DATABASE() AND USER = 'root'",
    f"SELECT COUNT(*) FROM {_P} WHERE DB = DATABASE() GROUP BY HOST",
    f"SELECT ID AS USER FROM {_P} WHERE DB = DATABASE()",
    f"SELECT * FROM {_P} WHERE DB = DATABASE()",
    f"SELECT p.* FROM {_P} p WHERE p.DB = DATABASE()",
    # a statement column anywhere but a plain, unaliased column of the top SELECT
    f"SELECT ID FROM {_P} WHERE DB = DATABASE() AND INFO LIKE '%IDENTIFIED BY%'",
    f"SELECT CONCAT(INFO, '') FROM {_P} WHERE DB = DATABASE()",
    f"SELECT SUBSTR(INFO, 1, 40) FROM {_P} WHERE DB = DATABASE()",
    f"SELECT LENGTH(INFO) FROM {_P} WHERE DB = DATABASE()",
    f"SELECT INFO AS q FROM {_P} WHERE DB = DATABASE() HAVING q LIKE 'x%'",
    f"SELECT ID, INFO FROM {_P} WHERE DB = DATABASE() ORDER BY INFO",
    f"SELECT ID, INFO FROM {_P} WHERE DB = DATABASE() ORDER BY 2",
    f"SELECT INFO FROM {_P} WHERE DB = DATABASE() GROUP BY 1",
    f"SELECT ID, INFO FROM {_P} WHERE DB = DATABASE() ORDER BY (2)",  # a position to MariaDB
    f"SELECT ID, INFO FROM {_P} WHERE DB = DATABASE() ORDER BY ?",  # bound as 2 by the driver
    f"SELECT ID, INFO FROM {_P} WHERE DB = DATABASE() GROUP BY ID, ?",
    f"SELECT ID FROM {_P} WHERE DB = DATABASE() GROUP BY INFO",
    f"SELECT x.INFO FROM (SELECT INFO FROM {_P} WHERE DB = DATABASE()) x",
    f"WITH c AS (SELECT INFO FROM {_P} WHERE DB = DATABASE()) SELECT INFO FROM c",
    f"SELECT ID FROM {_P} WHERE DB = DATABASE() UNION SELECT INFO FROM {_P} WHERE DB = DATABASE()",
    f"SELECT (SELECT INFO FROM {_P} WHERE DB = DATABASE() LIMIT 1)",
    f"SELECT CASE WHEN 1 THEN INFO END FROM {_P} WHERE DB = DATABASE()",
    f"SELECT ID, `INFO` = 'x' FROM {_P} WHERE DB = DATABASE()",
    f"SELECT ID, STATE AS INFO FROM {_P} WHERE DB = DATABASE()",
    f"SELECT p.ID FROM {_P} p JOIN (SELECT 'SELECT 1' AS INFO) x USING (INFO) WHERE p.DB = DATABASE()",
    f"SELECT p.ID FROM {_P} p NATURAL JOIN (SELECT 1 AS ID) x WHERE p.DB = DATABASE()",
    f"SELECT x.a FROM (SELECT INFO FROM {_P} WHERE DB = DATABASE()) x(a)",
    # the InnoDB views: not joined, joined weakly, to an unscoped or the wrong anchor
    f"SELECT trx_id FROM {_T}",
    f"SELECT t.trx_id FROM {_T} t WHERE t.trx_mysql_thread_id = 1",
    f"SELECT t.trx_id FROM {_T} t JOIN {_P} p WHERE p.DB = DATABASE()",
    f"SELECT t.trx_id FROM {_T} t JOIN {_P} p WHERE p.DB = DATABASE() OR t.trx_mysql_thread_id = p.ID",
    f"SELECT t.trx_id FROM {_T} t JOIN {_P} p ON t.trx_mysql_thread_id = p.ID WHERE p.DB = DATABASE()",
    f"SELECT t.trx_id FROM {_T} t JOIN {_P} p WHERE p.DB = DATABASE() AND t.trx_mysql_thread_id <> p.ID",
    f"SELECT t.trx_id FROM {_T} t JOIN {_P} p WHERE p.DB = DATABASE() AND t.trx_mysql_thread_id = p.TIME",
    f"SELECT t.trx_id FROM {_T} t JOIN {_P} p WHERE p.DB = DATABASE() AND t.trx_weight = p.ID",
    f"SELECT t.trx_id FROM {_T} t JOIN {_T} u WHERE t.trx_mysql_thread_id = u.trx_mysql_thread_id",
    f"SELECT t.trx_id FROM {_T} t JOIN orders p WHERE t.trx_mysql_thread_id = p.id",
    f"SELECT t.trx_id FROM {_T} t JOIN {_P} p WHERE p.DB = DATABASE() AND trx_mysql_thread_id = ID",
    f"SELECT t.trx_id FROM {_T} t WHERE t.trx_mysql_thread_id IN (SELECT ID FROM {_P} WHERE DB = DATABASE())",
    f"SELECT t.trx_last_foreign_key_error FROM {_T} t JOIN {_P} p WHERE p.DB = DATABASE() AND t.trx_mysql_thread_id = p.ID",
    f"SELECT t.trx_id FROM {_T} t JOIN {_P} p WHERE p.DB = DATABASE() AND t.trx_mysql_thread_id = p.ID AND t.trx_query LIKE '%x%'",
    "SELECT w.blocking_trx_id FROM information_schema.INNODB_LOCK_WAITS w",
    f"SELECT w.blocking_trx_id FROM information_schema.INNODB_LOCK_WAITS w JOIN {_T} t WHERE w.requesting_trx_id = t.trx_id",
    f"SELECT l.lock_data FROM information_schema.INNODB_LOCKS l JOIN {_T} t JOIN {_P} p WHERE p.DB = DATABASE() AND t.trx_mysql_thread_id = p.ID AND l.lock_trx_id = t.trx_id",
    f"SELECT l.lock_id FROM information_schema.INNODB_LOCKS l JOIN {_T} t JOIN {_P} p WHERE p.DB = DATABASE() AND t.trx_mysql_thread_id = p.ID AND l.lock_id = t.trx_id",
    # views outside the list, functions, other schemas, SHOW
    "SELECT 1 FROM information_schema.USER_PRIVILEGES WHERE 1",
    "SELECT 1 FROM information_schema.INNODB_BUFFER_PAGE",
    "SELECT 1 FROM information_schema.INNODB_METRICS",
    "SELECT 1 FROM performance_schema.data_locks",
    "SELECT 1 FROM sys.innodb_lock_waits",
    "SELECT 1 FROM mysql.user",
    f"SELECT CONNECTION_ID(), ID FROM {_P} WHERE DB = DATABASE()",
    f"SELECT USER() FROM {_P} WHERE DB = DATABASE()",
    f"SELECT ID FROM {_P} WHERE DB = DATABASE() AND SLEEP(1) = 0",
    f"SELECT ID FROM {_P} WHERE DB = SCHEMA() AND DATABASE() = DATABASE()",
    "SHOW PROCESSLIST",
    "SHOW FULL PROCESSLIST",
    "SHOW ENGINE INNODB STATUS",
    "SHOW ENGINE INNODB MUTEX",
    "KILL 1",
]


@pytest.mark.parametrize("sql", BYPASSES)
def test_bypass_attempts_on_the_views_are_refused(sql: str) -> None:
    with pytest.raises(SourceError) as info:
        guard_sql(sql, [2] if "?" in sql else [], diagnostics=True)
    assert info.value.code is ErrorCode.FORBIDDEN_QUERY, info.value.message


@pytest.mark.parametrize(
    ("sql", "names"),
    [
        ("SHOW PROCESSLIST", "information_schema.PROCESSLIST WHERE DB = DATABASE()"),
        ("show full processlist;", "information_schema.PROCESSLIST WHERE DB = DATABASE()"),
        ("SHOW ENGINE INNODB STATUS", "information_schema.INNODB_TRX"),
    ],
)
def test_show_names_the_select_that_works_when_diagnostics_are_on(sql: str, names: str) -> None:
    with pytest.raises(SourceError) as off:
        guard_sql(sql, [])
    assert off.value.message == "only SELECT is allowed, not SHOW"
    with pytest.raises(SourceError) as on:
        guard_sql(sql, [], diagnostics=True)
    assert on.value.code is ErrorCode.FORBIDDEN_QUERY
    assert names in on.value.message
    hinted = on.value.message.split("this reads the same: ", 1)[1]
    guard_sql(hinted, [], diagnostics=True)  # the SELECT it names passes the guard


@pytest.mark.parametrize(
    ("text", "kept", "gone"),
    [
        (
            "UPDATE accounts SET email = 'alice@example.com' WHERE id = 42",
            "UPDATE accounts SET email = ? WHERE id = ?",
            ["alice", "42"],
        ),
        ("CREATE USER 'bob'@'%' IDENTIFIED BY 'S3cret!'", "IDENTIFIED BY ?", ["S3cret", "bob"]),
        ("SET PASSWORD FOR 'bob'@'%' = PASSWORD('hunter2')", "SET PASSWORD", ["hunter2"]),
        ('ALTER USER bob IDENTIFIED BY "dq-secret"', "IDENTIFIED BY ?", ["dq-secret"]),
        ("SELECT * FROM `dbx`.t WHERE tok = x'deadbeef' AND n IN (1, 2, 3)", "IN (?+)", ["dead"]),
        ("SELECT 'unterminated secret", "SELECT ?", ["secret"]),
        ("SELECT * FROM dbx.orders JOIN `dbx`.items", "FROM orders JOIN items", ["dbx"]),
        (
            "SELECT /* for alice@example.com */ id FROM t -- by bob@example.com\nWHERE a = 1",
            "SELECT /* ? */ id FROM t /* ? */ WHERE a = ?",
            ["alice", "bob"],
        ),
        ("SELECT id FROM t /* unterminated: carol@example.com", "FROM t /* ? */", ["carol"]),
        ("SELECT id FROM t # dave@example.com", "FROM t /* ? */", ["dave"]),
        # A quote inside a comment, a comment opener inside a literal: read as the server does.
        ("SELECT /* don't */ id FROM t WHERE e = 'erin@x.test'", "WHERE e = ?", ["erin"]),
        ("SELECT '/*', 2*/3, 'frank@x.test'", "SELECT ?, ?*/?, ?", ["frank"]),
        # `'it\\'s'` is one literal with escapes, `'it\\'` then `s` without (NO_BACKSLASH_ESCAPES,
        # the session's setting): read both ways, everything from it on is hidden as one `?`.
        ("SELECT 'it''s', 'it\\'s', \"gina@x.test\"", "SELECT ?, ?", ["gina", "s'"]),
        ("SELECT `a'b`, 'hal@x.test' FROM t", "SELECT `a", ["hal"]),  # more hidden, not less
        ("SELECT id, 'hal@x.test' FROM `t``q`", "FROM `t``q`", ["hal"]),
        ("SELECT 1--1, 'ivy@x.test'", "SELECT ?-?, ?", ["ivy"]),  # `--` without a space
    ],
)
def test_statements_are_served_without_literals_or_this_schema(
    text: str, kept: str, gone: list[str]
) -> None:
    cleaned = clean_cell("sql", text, "dbx")
    assert isinstance(cleaned, str) and kept in cleaned, cleaned
    for word in gone:
        assert word not in cleaned, cleaned


def test_lock_tables_lose_this_schema_and_hide_another() -> None:
    assert clean_cell("table", "`dbx`.`orders`", "dbx") == "`orders`"
    assert clean_cell("table", "`other`.`payroll`", "dbx") == OTHER_SCHEMA
    assert clean_cell("table", None, "dbx") is None


def test_the_opt_in_is_read_from_env_and_file(tmp_path: Path) -> None:
    assert diagnostic_names({"ACI_MYSQL_SHOP_URL": "mysql://u@h/db"}) == frozenset()
    env = {"ACI_MYSQL_SHOP_URL": "mysql://u@h/db", "ACI_MYSQL_SHOP_DIAGNOSTICS": "true"}
    assert diagnostic_names(env) == {"shop"}
    config = tmp_path / "mysql.toml"
    config.write_text(
        '[mysql]\npkgs = "mysql://u@h/p"\n[mysql.shop]\nurl = "mysql://u:pw@h/db"\n'
        "diagnostics = true\n"
    )
    assert diagnostic_names({"ACI_MYSQL_CONFIG": str(config)}) == {"shop"}
    # The environment wins, both ways.
    off = {"ACI_MYSQL_CONFIG": str(config), "ACI_MYSQL_SHOP_DIAGNOSTICS": "0"}
    assert diagnostic_names(off) == frozenset()
    source = MysqlSource.from_env({"ACI_MYSQL_CONFIG": str(config)})
    assert source.data_sources == ("pkgs", "shop")
    # An agent host lists the names of both forms; a worker re-reads the table form's URL.
    assert data_source_names({"ACI_MYSQL_CONFIG": str(config)}) == ("pkgs", "shop")
    assert read_config_file(str(config))["shop"] == "mysql://u:pw@h/db"
    assert source._diagnostics == {"shop"}


@pytest.mark.parametrize(
    "env",
    [
        {"ACI_MYSQL_SHOP_URL": "mysql://u@h/db", "ACI_MYSQL_SHOP_DIAGNOSTICS": "maybe"},
        {"ACI_MYSQL_SHOP_URL": "mysql://u@h/db", "ACI_MYSQL_NOPE_DIAGNOSTICS": "true"},
    ],
)
def test_an_unclear_opt_in_is_a_settings_error(env: dict[str, str]) -> None:
    with pytest.raises(SettingsError) as info:
        MysqlSource.from_env(env)
    assert "pw" not in str(info.value)


def test_the_opt_in_in_the_file_must_be_a_boolean(tmp_path: Path) -> None:
    config = tmp_path / "mysql.json"
    config.write_text('{"mysql": {"shop": {"url": "mysql://u:pw@h/db", "diagnostics": "yes"}}}')
    with pytest.raises(SettingsError) as info:
        diagnostic_names({"ACI_MYSQL_CONFIG": str(config)})
    assert "shop" in str(info.value) and "pw" not in str(info.value)


# -- the real MariaDB ------------------------------------------------------------------------

# Every column of each view, as the agent may read it: shown, cleaned or hidden.
SHOWN = {
    "PROCESSLIST": "ID COMMAND TIME STATE TIME_MS STAGE MAX_STAGE PROGRESS MEMORY_USED "
    "MAX_MEMORY_USED EXAMINED_ROWS QUERY_ID TID",
    "INNODB_TRX": "TRX_ID TRX_STATE TRX_STARTED TRX_REQUESTED_LOCK_ID TRX_WAIT_STARTED "
    "TRX_WEIGHT TRX_MYSQL_THREAD_ID TRX_OPERATION_STATE TRX_TABLES_IN_USE TRX_TABLES_LOCKED "
    "TRX_LOCK_STRUCTS TRX_LOCK_MEMORY_BYTES TRX_ROWS_LOCKED TRX_ROWS_MODIFIED "
    "TRX_CONCURRENCY_TICKETS TRX_ISOLATION_LEVEL TRX_UNIQUE_CHECKS TRX_FOREIGN_KEY_CHECKS "
    "TRX_IS_READ_ONLY TRX_AUTOCOMMIT_NON_LOCKING",
    "INNODB_LOCKS": "LOCK_ID LOCK_TRX_ID LOCK_MODE LOCK_TYPE LOCK_INDEX LOCK_SPACE LOCK_PAGE "
    "LOCK_REC",
    "INNODB_LOCK_WAITS": "REQUESTING_TRX_ID REQUESTED_LOCK_ID BLOCKING_TRX_ID BLOCKING_LOCK_ID",
}


def _root(database: str | None = None) -> pymysql.Connection[Any]:
    return pymysql.connect(**ROOT, database=database, charset="utf8mb4", autocommit=True)


@pytest.mark.mariadb
@pytest.mark.parametrize("view", sorted(SHOWN))
def test_every_column_of_each_view_is_reviewed(view: str) -> None:
    conn = _root()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT UPPER(COLUMN_NAME) FROM information_schema.COLUMNS "
                "WHERE TABLE_SCHEMA = 'information_schema' AND TABLE_NAME = %s",
                (view,),
            )
            columns = {row[0] for row in cur.fetchall()}
    finally:
        conn.close()
    reviewed = set(SHOWN[view].split())
    assert not reviewed & (HIDDEN_COLUMNS | set(CLEANED_COLUMNS))
    assert columns - reviewed <= HIDDEN_COLUMNS | set(CLEANED_COLUMNS)
    assert columns >= reviewed
    assert view == "PROCESSLIST" or view in ANCHORED_VIEWS


class Scene:
    """A schema with a row held by one session and waited for by another, a third session
    busy in another schema, and the accounts the tests read with."""

    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:10]
        self.db, self.other = f"aci_dg_{tag}", f"aci_dgo_{tag}"
        self.reader, self.plain, self.password = f"aci_dr_{tag}", f"aci_dp_{tag}", f"pw-{tag}"
        self.holder: pymysql.Connection[Any] | None = None
        self.waiter: pymysql.Connection[Any] | None = None
        self.outsider: pymysql.Connection[Any] | None = None
        self.waiting: threading.Thread | None = None

    def build(self) -> None:
        conn = _root()
        with conn.cursor() as cur:
            for db in (self.db, self.other):
                cur.execute(f"CREATE DATABASE `{db}`")
                cur.execute(
                    f"CREATE TABLE `{db}`.accounts (id INT PRIMARY KEY, email VARCHAR(80), "
                    "secret VARCHAR(80)) ENGINE=InnoDB"
                )
                cur.execute(
                    f"INSERT INTO `{db}`.accounts VALUES (1, 'a@x.test', 's1'), (2, 'b', 's2')"
                )
            for user, process in ((self.reader, True), (self.plain, False)):
                cur.execute(f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY %s", (self.password,))
                cur.execute(f"GRANT SELECT ON `{self.db}`.* TO '{user}'@'127.0.0.1'")
                if process:  # what the InnoDB views need (docs/mysql.md)
                    cur.execute(f"GRANT PROCESS ON *.* TO '{user}'@'127.0.0.1'")
        conn.close()

    def lock(self) -> None:
        """The holder keeps row 1 locked (it wrote a secret); the waiter waits for it; the
        outsider holds a row of another schema."""
        self.holder = _root(self.db)
        self.holder.autocommit(False)
        with self.holder.cursor() as cur:
            cur.execute("UPDATE accounts SET secret = 'hunter2-holder' WHERE id = 1")
        self.outsider = _root(self.other)
        self.outsider.autocommit(False)
        with self.outsider.cursor() as cur:
            cur.execute("UPDATE accounts SET secret = 'outsider-secret' WHERE id = 2")
        self.waiter = _root(self.db)
        waiter = self.waiter

        def wait() -> None:
            with waiter.cursor() as cur:
                cur.execute("SET SESSION innodb_lock_wait_timeout = 30")
                try:
                    cur.execute(
                        "UPDATE accounts SET email = 'alice.waiter@example.com' WHERE id = 1"
                    )
                except pymysql.MySQLError:
                    pass

        self.waiting = threading.Thread(target=wait, daemon=True)
        self.waiting.start()
        probe = _root()
        try:
            for _ in range(100):
                with probe.cursor() as cur:
                    cur.execute("SELECT COUNT(*) FROM information_schema.INNODB_LOCK_WAITS")
                    if cur.fetchone()[0]:
                        return
                time.sleep(0.05)
        finally:
            probe.close()
        raise AssertionError("the waiter never waited")

    def ids(self) -> tuple[int, int, int]:
        assert self.holder and self.waiter and self.outsider
        return self.holder.thread_id(), self.waiter.thread_id(), self.outsider.thread_id()

    def release(self) -> None:
        for conn in (self.holder, self.outsider):
            if conn is not None:
                try:
                    conn.rollback()
                finally:
                    conn.close()
        if self.waiting is not None:
            self.waiting.join(10)
        if self.waiter is not None:
            self.waiter.close()

    def drop(self) -> None:
        conn = _root()
        with conn.cursor() as cur:
            for db in (self.db, self.other):
                cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
            for user in (self.reader, self.plain):
                cur.execute(f"DROP USER IF EXISTS '{user}'@'127.0.0.1'")
        conn.close()


@pytest.fixture(scope="module")
def scene() -> Iterator[Scene]:
    s = Scene()
    s.build()
    try:
        s.lock()
        yield s
    finally:
        s.release()
        s.drop()


def _source(scene: Scene, *, user: str | None = None, diagnostics: bool = True) -> MysqlSource:
    params = ConnectParams(
        host="127.0.0.1", user=user or scene.reader, password=scene.password, database=scene.db
    )
    opted = frozenset({"shop"}) if diagnostics else frozenset()
    return MysqlSource({"shop": params}, statement_timeout_ms=3000, pool_size=1, diagnostics=opted)


@pytest.fixture
async def source(scene: Scene) -> AsyncIterator[MysqlSource]:
    src = _source(scene)
    yield src
    await src.aclose()


async def _rows(source: MysqlSource, sql: str) -> list[list[Any]]:
    up = await source.fetch(QueryMysqlRequest(data_source="shop", sql=sql))
    return up.rows


def _flat(rows: list[list[Any]]) -> str:
    return repr(rows)


@pytest.mark.mariadb
async def test_processlist_shows_this_schemas_sessions_without_literals(
    scene: Scene, source: MysqlSource
) -> None:
    holder, waiter, outsider = scene.ids()
    rows = await _rows(source, PROCESSLIST)
    by_id = {row[0]: row for row in rows}
    assert holder in by_id and waiter in by_id
    assert outsider not in by_id  # a session of another schema is not shown
    assert by_id[waiter][4] == "UPDATE accounts SET email = ? WHERE id = ?"
    # The agent's own statement, as it sent it: not the tool's time and row limits before it.
    assert PROCESSLIST in [row[4] for row in rows]
    assert "max_statement_time" not in _flat(rows)
    for secret in ("alice", "example.com", "hunter2", "outsider", scene.db, scene.other):
        assert secret not in _flat(rows)


@pytest.mark.mariadb
async def test_the_lock_wait_is_seen_through_the_innodb_views(
    scene: Scene, source: MysqlSource
) -> None:
    holder, waiter, outsider = scene.ids()
    trx = await _rows(source, TRX)
    states = {row[4]: row[1] for row in trx}
    assert states.get(waiter) == "LOCK WAIT" and states.get(holder) == "RUNNING"
    assert outsider not in states  # its transaction belongs to another schema's session
    waits = await _rows(source, WAITS)
    assert len(waits) == 1
    _, _, requesting, requesting_sql, blocking, blocking_sql = waits[0]
    assert (requesting, blocking) == (waiter, holder)
    assert requesting_sql == "UPDATE accounts SET email = ? WHERE id = ?"
    assert blocking_sql is None  # the holder is idle in its transaction
    locks = await _rows(source, LOCKS)
    assert locks and {row[3] for row in locks} == {"`accounts`"}
    assert {row[1] for row in locks} >= {"X"}
    for secret in ("alice", "hunter2", "outsider", scene.db, scene.other):
        assert secret not in _flat(trx + waits + locks)


@pytest.mark.mariadb
async def test_the_views_stay_refused_for_a_source_that_did_not_opt_in(scene: Scene) -> None:
    src = _source(scene, diagnostics=False)
    try:
        for sql in VIEW_QUERIES:
            with pytest.raises(SourceError) as info:
                await src.fetch(QueryMysqlRequest(data_source="shop", sql=sql))
            assert info.value.code is ErrorCode.FORBIDDEN_QUERY
        assert await _rows(src, "SELECT COUNT(*) FROM accounts") == [[2]]
    finally:
        await src.aclose()


@pytest.mark.mariadb
async def test_an_account_without_process_gets_an_error_not_no_evidence(scene: Scene) -> None:
    src = _source(scene, user=scene.plain)
    try:
        with pytest.raises(SourceError) as info:
            await src.fetch(QueryMysqlRequest(data_source="shop", sql=TRX))
        assert info.value.code is ErrorCode.AUTHORIZATION
        assert scene.plain not in info.value.message
    finally:
        await src.aclose()


@pytest.mark.mariadb
async def test_the_hinted_select_for_show_runs(scene: Scene, source: MysqlSource) -> None:
    with pytest.raises(SourceError) as info:
        await source.fetch(QueryMysqlRequest(data_source="shop", sql="SHOW ENGINE INNODB STATUS"))
    hinted = info.value.message.split("this reads the same: ", 1)[1]
    rows = await _rows(source, hinted)
    assert {row[5] for row in rows} >= set(scene.ids()[:2])


REPO = Path(__file__).resolve().parents[2]
DOCUMENTED = [
    REPO / "docs/mysql.md",
    REPO / "workers/sources/knowledge/runbooks/database-lock-waits.md",
    REPO / "workers/sources/knowledge/runbooks/db-connection-pool-exhaustion.md",
    REPO / "workers/sources/knowledge/runbooks/zh/db-connection-pool-exhaustion.zh.md",
]


def _documented_queries(path: Path) -> list[str]:
    """The diagnostic SELECTs a page teaches: inline `SELECT ...` and code-block statements
    (separated by blank lines or `-- ` comment lines)."""
    text = path.read_text(encoding="utf-8")
    found = re.findall(r"`(SELECT [^`]+)`", text)
    for block in re.findall(r"```(?:sql)?\n(.*?)```", text, re.S):
        current: list[str] = []
        for line in [*block.splitlines(), ""]:
            if line.strip() and not line.startswith("--"):
                current.append(line.strip())
            elif current:
                found.append(" ".join(current))
                current = []
    return [q for q in found if "PROCESSLIST" in q or "INNODB_" in q]


def test_the_runbooks_teach_no_query_the_guard_refuses() -> None:
    for path in DOCUMENTED[1:]:
        text = path.read_text(encoding="utf-8")
        for refused in ("SHOW PROCESSLIST`:", "SELECT * FROM information_schema", "SHOW ENGINE"):
            assert refused not in text, (path.name, refused)


@pytest.mark.mariadb
@pytest.mark.parametrize("path", DOCUMENTED, ids=lambda p: p.name)
async def test_every_documented_diagnostic_query_runs(
    scene: Scene, source: MysqlSource, path: Path
) -> None:
    queries = _documented_queries(path)
    assert queries, path
    for sql in queries:
        up = await source.fetch(QueryMysqlRequest(data_source="shop", sql=sql))
        assert up.rows, sql  # the holder and the waiter are there to be seen


def test_a_wait_on_a_blocker_of_another_schema_shows_its_trx_id_only() -> None:
    only_ours = (
        "SELECT r.trx_mysql_thread_id, w.blocking_trx_id FROM information_schema.INNODB_LOCK_WAITS w "
        "JOIN information_schema.INNODB_TRX r JOIN information_schema.PROCESSLIST rp "
        "WHERE rp.DB = DATABASE() AND r.trx_mysql_thread_id = rp.ID AND w.requesting_trx_id = r.trx_id"
    )
    assert guard_sql(only_ours, [], diagnostics=True).cleaned == ()
    with pytest.raises(SourceError):  # its details need it to be a session of this schema
        guard_sql(
            only_ours.replace("SELECT ", "SELECT b.trx_state, ", 1).replace(
                " WHERE", " JOIN information_schema.INNODB_TRX b WHERE", 1
            )
            + " AND w.blocking_trx_id = b.trx_id",
            [],
            diagnostics=True,
        )


@pytest.mark.parametrize(
    ("sql", "cleaned"),
    [
        (f"SELECT INFO, ID, INFO FROM {_P} WHERE DB = DATABASE()", ((0, "sql"), (2, "sql"))),
        (
            f"SELECT p.INFO, p.ID, p.`info` FROM {_P} p WHERE p.DB = DATABASE()",
            ((0, "sql"), (2, "sql")),
        ),
    ],
)
def test_a_statement_column_selected_twice_is_cleaned_twice(
    sql: str, cleaned: tuple[tuple[int, str], ...]
) -> None:
    assert guard_sql(sql, [], diagnostics=True).cleaned == cleaned


@pytest.mark.mariadb
async def test_a_statement_selected_twice_shows_no_literal(
    scene: Scene, source: MysqlSource
) -> None:
    rows = await _rows(source, f"SELECT INFO, ID, INFO FROM {_P} WHERE DB = DATABASE()")
    assert rows and "alice" not in _flat(rows)


@pytest.mark.parametrize("value", [b"SELECT 'secret'", "base64:U0VMRUNUICdzZWNyZXQn", 7])
def test_a_statement_that_is_not_text_is_not_shown(value: object) -> None:
    assert clean_cell("sql", value, "dbx") == NOT_SHOWN


@pytest.mark.mariadb
async def test_a_missing_process_grant_is_said_at_start(
    scene: Scene, caplog: pytest.LogCaptureFixture
) -> None:
    src = _source(scene, user=scene.plain)
    caplog.set_level(logging.INFO, logger="aci.sources")
    try:
        await warm_up({"query_mysql": src}, timeout_s=10)
    finally:
        await src.aclose()
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("aci.sources")]
    assert lines == [
        "warm-up of query_mysql (shop: its diagnostic views need the PROCESS privilege) failed "
        "(this data source's account may not see other sessions (no PROCESS privilege), so "
        "its process list would show only its own); its calls may fail the same way"
    ]
    granted = _source(scene)
    caplog.clear()
    try:
        await warm_up({"query_mysql": granted}, timeout_s=10)
    finally:
        await granted.aclose()
    assert not [r for r in caplog.records if r.name.startswith("aci.sources")]


@pytest.mark.mariadb
async def test_a_process_list_without_process_is_an_error_not_a_partial_list(
    scene: Scene,
) -> None:
    # Without PROCESS the server shows an account only its own sessions, silently: the agent
    # would read "one session, no pool exhaustion" during an incident.
    src = _source(scene, user=scene.plain)
    try:
        with pytest.raises(SourceError) as info:
            await src.fetch(QueryMysqlRequest(data_source="shop", sql=PROCESSLIST))
        assert info.value.code is ErrorCode.AUTHORIZATION
        assert "other sessions" in info.value.message and scene.plain not in info.value.message
        assert await _rows(src, "SELECT COUNT(*) FROM accounts") == [[2]]  # the rest works
    finally:
        await src.aclose()


def test_diagnostics_need_a_database_in_the_url() -> None:
    env = {"ACI_MYSQL_SHOP_URL": "mysql://u:pw@h:3306/", "ACI_MYSQL_SHOP_DIAGNOSTICS": "yes"}
    with pytest.raises(SettingsError) as info:
        MysqlSource.from_env(env)
    assert "database" in str(info.value) and "pw" not in str(info.value)


# -- attack5: statements another session's settings make the server read differently ---------


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        # A session with NO_BACKSLASH_ESCAPES: `'C:\'` is a whole literal to its server, so a
        # reading with escapes took `', b = '` for the literal and showed the next one as code.
        ("UPDATE t SET a = 'C:\\', b = 'hunter2' WHERE id = 1", ["hunter2"]),
        ("SELECT 'a\\', 'hunter2', \"b\\\", \"hunter3\"", ["hunter2", "hunter3"]),
        # `--` then any control character is a comment to the server, not only a space
        ("SELECT id FROM t --\x0bdon't\nWHERE e = 'alice@x.test'", ["alice"]),
        ("SELECT id FROM t --\x01it's\nWHERE e = 'bob@x.test'", ["bob"]),
    ],
)
def test_a_literal_is_hidden_however_the_sessions_server_reads_it(
    text: str, gone: list[str]
) -> None:
    cleaned = clean_cell("sql", text, "dbx")
    assert isinstance(cleaned, str)
    for word in gone:
        assert word not in cleaned, cleaned


@pytest.mark.mariadb
async def test_a_no_backslash_escapes_sessions_literals_stay_hidden(
    scene: Scene, source: MysqlSource
) -> None:
    conn = _root(scene.db)

    def run() -> None:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'")
            cur.execute("SELECT SLEEP(2), 'C:\\', 'hunter2-nbe' FROM accounts WHERE id = 1")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        for _ in range(40):
            rows = await _rows(source, PROCESSLIST)
            if any("SLEEP" in str(row[4]) for row in rows):
                break
            await anyio.sleep(0.05)
        assert any("SLEEP" in str(row[4]) for row in rows)
        assert "hunter2" not in _flat(rows)
    finally:
        thread.join(10)
        conn.close()


@pytest.mark.mariadb
async def test_a_schema_named_alike_up_to_case_or_accents_is_another_schema(
    scene: Scene, source: MysqlSource
) -> None:
    # PROCESSLIST.DB is utf8mb3_general_ci: `DB = DATABASE()` also held for a schema whose name
    # differs only in case (two schemas on a server with lower_case_table_names=0) or accents.
    admin = _root()
    names = [scene.db.upper(), scene.db.replace("aci", "\u00e4ci", 1)]
    sessions: list[tuple[pymysql.Connection[Any], threading.Thread]] = []
    try:
        with admin.cursor() as cur:
            for name in names:
                cur.execute(f"CREATE DATABASE `{name}`")
        for name in names:
            conn = _root(name)

            def run(conn: pymysql.Connection[Any] = conn) -> None:
                with conn.cursor() as cur:
                    cur.execute("SELECT SLEEP(2), 'lookalike'")

            thread = threading.Thread(target=run, daemon=True)
            thread.start()
            sessions.append((conn, thread))
        await anyio.sleep(0.3)
        ids = {conn.thread_id() for conn, _ in sessions}
        for sql in (PROCESSLIST, TRX):
            rows = await _rows(source, sql)
            assert not ids & ({row[0] for row in rows} | {row[-1] for row in rows}), sql
    finally:
        for conn, thread in sessions:
            thread.join(10)
            conn.close()
        with admin.cursor() as cur:
            for name in names:
                cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        admin.close()


@pytest.mark.parametrize(
    ("sql", "params", "runs"),
    [
        (PROCESSLIST, [], PROCESSLIST.replace("= DATABASE()", "= BINARY DATABASE()")),
        (
            f"SELECT ID FROM {_P} p WHERE ID > ? AND STATE LIKE '%a%' AND DATABASE() = p.DB",
            [1],
            f"SELECT ID FROM {_P} p WHERE ID > %s AND STATE LIKE '%%a%%' AND BINARY DATABASE() = p.DB",
        ),
    ],
)
def test_the_process_list_scope_runs_byte_for_byte(sql: str, params: list[Any], runs: str) -> None:
    assert guard_sql(sql, params, diagnostics=True).text == runs
    # Not with the opt-in off, nor for the schema views (their rows are the account's own).
    schema_view = "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()"
    assert guard_sql(schema_view, [], diagnostics=True).text == schema_view


@pytest.mark.parametrize(
    "sql",
    [
        # DISTINCT compares the raw statements: whether two sessions sent byte for byte the same
        # literals would be read from the row count, which the cleaning cannot hide.
        f"SELECT DISTINCT INFO FROM {_P} WHERE DB = DATABASE()",
        f"SELECT DISTINCT ID, INFO FROM {_P} WHERE DB = DATABASE()",
        f"SELECT DISTINCT t.trx_query FROM {_T} t JOIN {_P} p "
        "WHERE p.DB = DATABASE() AND t.trx_mysql_thread_id = p.ID",
    ],
)
def test_a_statement_column_is_never_compared_by_distinct(sql: str) -> None:
    with pytest.raises(SourceError) as info:
        guard_sql(sql, [], diagnostics=True)
    assert info.value.code is ErrorCode.FORBIDDEN_QUERY


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        # Number forms the slow log's template leaves: a decimal without its leading 0, a
        # binary literal, an exponent after a bare point.
        ("UPDATE accounts SET balance = .75 WHERE id = 1", [".75"]),
        ("UPDATE flags SET bits = 0b101101 WHERE id = 1", ["101101"]),
        ("UPDATE t SET x = 1.e5, y = .5E-3 WHERE id = 1", ["e5", "5E"]),
    ],
)
def test_every_number_form_is_hidden(text: str, gone: list[str]) -> None:
    cleaned = clean_cell("sql", text, "dbx")
    assert isinstance(cleaned, str) and "WHERE id = ?" in cleaned, cleaned
    for word in gone:
        assert word not in cleaned, cleaned
    # names that hold digits stay names
    assert clean_cell("sql", "SELECT t1.a2, 1abc FROM t1", "dbx") == "SELECT t1.a2, 1abc FROM t1"


@pytest.mark.mariadb
async def test_a_statement_is_cleaned_from_its_raw_text_not_after_masking(
    scene: Scene, source: MysqlSource
) -> None:
    # Masking a cell by shape first (`password="..."` to the next `"`) took three quotes out
    # of the statement, so the literals after it were read as code.
    conn = _root(scene.db)
    statement = (
        "SELECT SLEEP(2), 'password=\"abc', 'S3cretZ', \"x\", 'public', 'S3cret2' "
        "FROM accounts WHERE id = 1"
    )

    def run() -> None:
        with conn.cursor() as cur:
            cur.execute(statement)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        for _ in range(40):
            rows = await _rows(source, PROCESSLIST)
            if any("SLEEP" in str(row[4]) for row in rows):
                break
            await anyio.sleep(0.05)
        assert any("SLEEP" in str(row[4]) for row in rows)
        for word in ("S3cret", "public", "abc"):
            assert word not in _flat(rows), rows
    finally:
        thread.join(10)
        conn.close()


@pytest.mark.parametrize(
    "text",
    [
        "USE dbx",
        "use `dbx`",
        "SHOW FULL TABLES FROM `dbx` LIKE ?",
        "SHOW TABLES IN dbx",
        "CREATE DATABASE IF NOT EXISTS dbx",
        "ALTER SCHEMA `dbx` CHARACTER SET utf8mb4",
        "GRANT SELECT ON `dbx`.* TO reader",
    ],
)
def test_this_schemas_name_is_not_shown_where_a_statement_names_it_alone(text: str) -> None:
    # The agent never sees the physical name of its database (docs/mysql.md, Guard); a session
    # that switches to it, or lists its tables, named it without a `db.` before a table.
    cleaned = clean_cell("sql", text, "dbx")
    assert isinstance(cleaned, str) and "dbx" not in cleaned, cleaned
    assert clean_cell("sql", "SELECT dbx_total FROM t", "dbx") == "SELECT dbx_total FROM t"
