"""Layers 2-4 of `query_mysql` against the real MariaDB, as a SELECT-only account."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pymysql
import pytest

from contracts import DEFAULT_BOUNDS, QueryMysqlRequest, project_mysql
from contracts.status import ErrorCode, EvidenceStatus
from tests.workers.mysql_shop import running
from tests.workers.sql_corpus import CORPUS
from workers.sources import SourceError, warm_up
from workers.sources.mysql import sqlguard
from workers.sources.mysql.shop import TABLES, create_reader, ensure_demo_shop, load_shop
from workers.sources.mysql.source import ConnectParams, MysqlSource

pytestmark = pytest.mark.mariadb
ROOT = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}


def _root() -> pymysql.Connection[Any]:
    return pymysql.connect(**ROOT, charset="utf8mb4", autocommit=True)


@pytest.fixture(scope="module")
def db() -> Iterator[tuple[str, str, str]]:
    tag = uuid.uuid4().hex[:10]
    name, user, password = f"aci_t_{tag}", f"aci_r_{tag}", f"pw-{tag}"
    conn = _root()
    try:
        load_shop(conn, name)
        create_reader(conn, name, user, password)
        yield name, user, password
    finally:
        _drop(conn, name, user)


def _drop(conn: pymysql.Connection[Any], name: str, user: str) -> None:
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        for host in ("%", "localhost", "127.0.0.1"):
            cur.execute(f"DROP USER IF EXISTS '{user}'@'{host}'")
    conn.close()


def _params(db: tuple[str, str, str]) -> ConnectParams:
    name, user, password = db
    return ConnectParams(host="127.0.0.1", port=3306, user=user, password=password, database=name)


@pytest.fixture
async def source(db: tuple[str, str, str]) -> AsyncIterator[MysqlSource]:
    src = MysqlSource({"shop": _params(db)}, statement_timeout_ms=1000, pool_size=1,
                      kill_grace_s=0.5)  # fmt: skip
    yield src
    await src.aclose()


# One root connection for every checksum of this module: a new one per checksum (two per
# corpus case, 205 cases) cost about as much as the checksum itself.
_CHECKSUMS: list[pymysql.Connection[Any]] = []


@pytest.fixture(scope="module", autouse=True)
def _checksum_connection() -> Iterator[None]:
    yield
    while _CHECKSUMS:
        _CHECKSUMS.pop().close()


def _checksum(name: str) -> list[Any]:
    if not _CHECKSUMS:
        _CHECKSUMS.append(_root())
    conn = _CHECKSUMS[0]
    with conn.cursor() as cur:
        cur.execute(f"SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA='{name}'")
        tables = sorted(r[0] for r in cur.fetchall())
        cur.execute("CHECKSUM TABLE " + ", ".join(f"`{name}`.`{t}`" for t in TABLES))
        sums = list(cur.fetchall())
    return [tables, sums]


def _req(sql: str, params: list[Any] | None = None, ds: str = "shop") -> QueryMysqlRequest:
    return QueryMysqlRequest(data_source=ds, sql=sql, params=params)


@pytest.mark.parametrize(("name", "sql", "params", "expected"), CORPUS, ids=[c[0] for c in CORPUS])
async def test_corpus(
    source: MysqlSource, db: tuple[str, str, str], name: str, sql: str, params: list[Any],
    expected: str,
) -> None:  # fmt: skip
    before = _checksum(db[0])
    try:
        up = await source.fetch(_req(sql, params))
        outcome = "ok"
        result = project_mysql("call-1", up, DEFAULT_BOUNDS)
        assert len(up.rows) <= DEFAULT_BOUNDS.mysql_max_rows + 1
        assert result.returned_count <= DEFAULT_BOUNDS.mysql_max_rows
    except SourceError as exc:
        outcome = exc.code.value
        for secret in (db[0], db[1], db[2], "127.0.0.1", "3306", "Traceback"):
            assert secret not in exc.message
    assert outcome == expected
    assert _checksum(db[0]) == before


async def test_server_refuses_stacked_statements_without_guard(source: MysqlSource) -> None:
    with pytest.raises(SourceError) as info:
        await source._execute_raw("shop", "SELECT 1; SELECT 2", tool_limit=False)
    assert info.value.code == ErrorCode.EXECUTION and "syntax error" in info.value.message


async def test_read_only_transaction_blocks_writes_even_with_write_grants(
    db: tuple[str, str, str],
) -> None:
    admin = ConnectParams(host="127.0.0.1", user="root", database=db[0])
    src = MysqlSource({"adm": admin}, statement_timeout_ms=2000)
    before = _checksum(db[0])
    with pytest.raises(SourceError) as info:
        await src._execute_raw("adm", "UPDATE orders SET status = 'X' WHERE id = 100001")
    await src.aclose()
    assert info.value.code == ErrorCode.FORBIDDEN_QUERY
    assert _checksum(db[0]) == before


async def test_no_session_state_survives(source: MysqlSource) -> None:
    for sql in ("SET @leak = 42", "SET SESSION sql_mode = 'ANSI_QUOTES'", "USE information_schema",
                "DO GET_LOCK('aci_leak_lock', 0)", "PREPARE leak FROM 'SELECT 1'",
                "HANDLER orders OPEN"):  # fmt: skip
        await source._execute_raw("shop", sql, tool_limit=False)
    up = await source.fetch(_req("SELECT 1"))
    assert up.rows == [[1]]
    probe = await source._execute_raw(
        "shop",
        "SELECT @leak, @@sql_mode LIKE '%%ANSI_QUOTES%%', DATABASE() = 'information_schema', "
        "IS_USED_LOCK('aci_leak_lock'), CONNECTION_ID()",
        tool_limit=False,
    )
    assert probe.rows[0][:4] == [None, 0, 0, None]
    for sql in ("EXECUTE leak", "HANDLER orders READ FIRST"):
        with pytest.raises(SourceError):
            await source._execute_raw("shop", sql, tool_limit=False)


async def test_watchdog_kills_query_on_server(source: MysqlSource) -> None:
    start = time.monotonic()
    with pytest.raises(SourceError) as info:
        await source._execute_raw("shop", "SELECT SLEEP(30) AS aci_watchdog", tool_limit=False)
    assert info.value.code == ErrorCode.TIMEOUT
    assert time.monotonic() - start < 5
    await anyio.sleep(0.2)
    assert running("aci_watchdog") == 0


async def test_statement_limit_stops_cross_join_on_server(source: MysqlSource) -> None:
    sql = "SELECT COUNT(*) AS aci_cross FROM order_items a, order_items b, order_items c"
    with pytest.raises(SourceError) as info:
        await source.fetch(_req(sql))
    assert info.value.code == ErrorCode.TIMEOUT
    assert running("aci_cross") == 0


async def test_caller_cannot_lift_the_limit(source: MysqlSource) -> None:
    with pytest.raises(SourceError):
        await source.fetch(_req("SET STATEMENT max_statement_time=0 FOR SELECT 1"))


async def test_bounded_fetch_and_projection(source: MysqlSource) -> None:
    up = await source.fetch(_req("SELECT * FROM order_items"))
    assert len(up.rows) == DEFAULT_BOUNDS.mysql_max_rows + 1 and not up.stopped_early
    res = project_mysql("c", up, DEFAULT_BOUNDS)
    assert res.returned_count <= 50 and res.truncated
    few = await source.fetch(_req("SELECT id FROM orders ORDER BY id LIMIT 3"))
    assert project_mysql("c", few, DEFAULT_BOUNDS).truncated is False
    big = await source.fetch(_req("SELECT id FROM order_items LIMIT 5000"))
    assert len(big.rows) == 51
    wide = await source.fetch(_req("SELECT REPEAT('x', 100000) AS b, o.* FROM orders o"))
    assert wide.stopped_early and len(wide.rows[0][0]) == DEFAULT_BOUNDS.mysql_cell_chars + 1


async def test_value_types(source: MysqlSource) -> None:
    up = await source.fetch(_req(
        "SELECT e.payload, e.attachment, o.total_amount, o.created_at, p.settle_time, "
        "c.credit_limit, CAST(9007199254740993 AS UNSIGNED) FROM order_events e "
        "JOIN orders o ON o.id = e.order_id JOIN payments p ON p.order_id = o.id "
        "JOIN customers c ON c.id = o.user_id WHERE e.id = 900001"
    ))  # fmt: skip
    payload, blob, amount, created, settle, _limit, big = up.rows[0]
    assert isinstance(payload, dict) and payload["order_id"] == 100001
    assert blob.startswith("base64:")
    assert isinstance(amount, str) and "." in amount
    assert created.startswith("2026-03-") and ":" in settle
    assert big == "9007199254740993"


async def test_zero_rows_is_no_evidence(source: MysqlSource) -> None:
    up = await source.fetch(_req("SELECT * FROM orders WHERE id = ?", [-1]))
    assert project_mysql("c", up, DEFAULT_BOUNDS).evidence_status == EvidenceStatus.NO_EVIDENCE


async def test_safe_error_messages(source: MysqlSource) -> None:
    with pytest.raises(SourceError) as info:
        await source.fetch(_req("SELECT nope FROM orders"))
    assert info.value.message.startswith("unknown column `nope` in '")
    with pytest.raises(SourceError) as info:
        await source.fetch(_req("SELECT * FROM nope"))
    assert info.value.message == "unknown table `nope`"


async def test_unknown_and_unconfigured_data_sources(source: MysqlSource) -> None:
    with pytest.raises(SourceError) as info:
        await source.fetch(_req("SELECT 1", ds="billing"))
    assert info.value.code == ErrorCode.AUTHORIZATION and info.value.message.endswith("shop")
    empty = MysqlSource.from_env({})
    assert empty.data_sources == ()
    with pytest.raises(SourceError) as info:
        await empty.fetch(_req("SELECT 1"))
    assert info.value.code == ErrorCode.AUTHORIZATION


async def test_unreachable_server_is_unavailable() -> None:
    src = MysqlSource.from_env({"ACI_MYSQL_DOWN_URL": "mysql://u:secret@127.0.0.1:1/x"})
    with pytest.raises(SourceError) as info:
        await src.fetch(_req("SELECT 1", ds="down"))
    assert info.value.code == ErrorCode.UNAVAILABLE and info.value.retryable
    assert "secret" not in info.value.message and "127.0.0.1" not in info.value.message


async def test_a_wrong_password_is_said_at_warm_up_by_data_source_and_errno(
    db: tuple[str, str, str], caplog: pytest.LogCaptureFixture
) -> None:
    # Before: no warm-up for query_mysql (docs/operations.md promised one), so a wrong
    # password was first seen as "unavailable; try again later" on an agent's call.
    name, user, _ = db
    wrong = ConnectParams(host="127.0.0.1", port=3306, user=user, password="nope", database=name)
    src = MysqlSource({"shop": _params(db), "billing": wrong}, pool_size=1)
    try:
        with caplog.at_level("WARNING", logger="aci.sources"):
            await warm_up({"query_mysql": src}, timeout_s=10)
    finally:
        await src.aclose()
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("aci.sources")]
    # Said once by the source itself (its state line, tests/workers/test_mysql_reachability.py),
    # which the warm-up does not repeat.
    assert lines == [
        "query_mysql: data source billing refuses the worker's account (error 1045: the user or "
        "password in its URL is wrong); its calls answer ERROR/UNAVAILABLE until it answers"
    ]
    assert "nope" not in lines[0] and user not in lines[0]


async def test_a_wrong_password_tells_the_agent_a_retry_will_not_help(
    db: tuple[str, str, str],
) -> None:
    # Before: "unavailable (error 1045); try again later", retryable: an agent retried a call
    # that only an operator can make succeed.
    name, user, _ = db
    wrong = ConnectParams(host="127.0.0.1", port=3306, user=user, password="nope", database=name)
    src = MysqlSource({"billing": wrong}, pool_size=1)
    try:
        with pytest.raises(SourceError) as info:
            await src.fetch(_req("SELECT 1", ds="billing"))
    finally:
        await src.aclose()
    assert info.value.code == ErrorCode.UNAVAILABLE and not info.value.retryable
    assert info.value.message == (
        "the data source is unavailable (error 1045): it refuses this worker's settings; "
        "retrying will not help until an operator fixes them"
    )
    assert "nope" not in info.value.message and user not in info.value.message


def test_from_env_and_config(tmp_path: Any) -> None:
    cfg = tmp_path / "mysql.toml"
    cfg.write_text('[mysql]\nbilling = "mysql://r:p@db:3307/bill"\n')
    src = MysqlSource.from_env({
        "ACI_MYSQL_CONFIG": str(cfg), "ACI_MYSQL_SHOP_URL": "mysql://r:p%40x@h/shop",
        "ACI_MYSQL_STATEMENT_TIMEOUT_MS": "2500",
    })  # fmt: skip
    assert src.data_sources == ("billing", "shop")
    assert src._pools["shop"].params.password == "p@x" and src._limit_s == 2.5


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("mysql.json", b"\xff\xfe{}", "ACI_MYSQL_CONFIG: the file is not UTF-8"),
        ("mysql.conf", b'[mysql]\nshop = "mysql://r:Pw1@h/shop"\n',
         "ACI_MYSQL_CONFIG: not valid JSON (a file named *.toml is read as TOML): line 1"),
        ("mysql.toml", b'[mysql\nshop = "mysql://r:Pw1@h/shop"\n', "ACI_MYSQL_CONFIG: not valid TOML"),
    ],
)  # fmt: skip
def test_an_unreadable_config_file_names_the_variable(
    tmp_path: Any, name: str, content: bytes, said: str
) -> None:
    # Before: "'utf-16-le' codec can't decode byte 0x7d …", or a bare parser message.
    cfg = tmp_path / name
    cfg.write_bytes(content)
    with pytest.raises(ValueError) as caught:
        MysqlSource.from_env({"ACI_MYSQL_CONFIG": str(cfg)})
    assert str(caught.value).startswith(said) and "Pw1" not in str(caught.value)


async def test_ensure_demo_shop_idempotent_and_concurrent() -> None:
    urls: list[str] = []

    async def one() -> None:
        urls.append(await ensure_demo_shop())

    async with anyio.create_task_group() as tg:
        tg.start_soon(one)
        tg.start_soon(one)
    assert len(set(urls)) == 1
    src = MysqlSource.from_env({"ACI_MYSQL_SHOP_URL": urls[0]})
    up = await src.fetch(_req("SELECT version FROM schema_migrations WHERE statement LIKE "
                              "'DROP INDEX idx_orders_user_status%'"))  # fmt: skip
    await src.aclose()
    assert up.rows == [["V20260314_1"]]


@pytest.fixture
def shadow_schema() -> Iterator[str]:
    """A schema holding a stored function named like every word the guard lets stand right
    before `(` (built-ins and keywords), each returning 'STORED'."""
    name = f"aci_shadow_{uuid.uuid4().hex[:10]}"
    conn = _root()
    words = sqlguard._BUILTINS | sqlguard._PAREN_KEYWORDS | {"DATABASE", "SCHEMA"}
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")
        for word in sorted(words):
            cur.execute(
                f"CREATE FUNCTION `{name}`.`{word}`(x INT) RETURNS TEXT DETERMINISTIC "
                "RETURN 'STORED'"
            )
    try:
        yield name
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        conn.close()


def test_no_accepted_word_before_parenthesis_calls_a_stored_function(shadow_schema: str) -> None:
    # A name that is not a built-in or reserved word resolves to a stored function (DEFINER
    # rights): FORMAT_BYTES and JSON_TABLE (outside FROM) are such names on MariaDB 10.11, and
    # some grammar built-ins fall back to one at another arity (POINT(1)). 1318 ("incorrect
    # number of arguments for FUNCTION db.x") also means the stored function was chosen.
    conn = pymysql.connect(**ROOT, database=shadow_schema, charset="utf8mb4", autocommit=True)
    words = sqlguard._BUILTINS | sqlguard._PAREN_KEYWORDS | {"DATABASE", "SCHEMA"}
    called = []
    with conn.cursor() as cur:
        for word in sorted(words):
            for n in range(6):
                args = ", ".join(["1"] * n)
                for sql in (f"SELECT {word}({args})", f"SELECT 1 + {word}({args})",
                            f"SELECT 1 FROM DUAL WHERE {word}({args}) IS NOT NULL"):  # fmt: skip
                    try:
                        cur.execute(sql)
                        rows = cur.fetchall()
                    except pymysql.MySQLError as exc:
                        if exc.args[0] in (1305, 1318, 1630):
                            called.append(sql)
                        continue
                    if rows and rows[0][0] == "STORED":
                        called.append(sql)
    conn.close()
    assert called == []


def test_every_bare_keyword_function_is_known_to_the_guard() -> None:
    conn = _root()
    evaluated = set()
    with conn.cursor() as cur:
        cur.execute("SELECT WORD FROM information_schema.KEYWORDS")
        for (word,) in cur.fetchall():
            try:
                cur.execute(f"SELECT {word}")
                cur.fetchall()
                evaluated.add(word.upper())
            except pymysql.MySQLError:
                pass
    conn.close()
    known = sqlguard._NILADIC | sqlguard._BARE_ACCOUNT_KEYWORDS | {"TRUE", "FALSE", "NULL"}
    assert evaluated <= known
    assert sqlguard._BARE_ACCOUNT_KEYWORDS <= evaluated


# Columns of the readable information_schema views that name only the data source's own objects
# (reviewed: no schema, account, grant or view text, which carries qualified names).
_VISIBLE_INFO_SCHEMA_COLUMNS = frozenset(
    """
    TABLE_NAME TABLE_TYPE ENGINE VERSION ROW_FORMAT TABLE_ROWS AVG_ROW_LENGTH DATA_LENGTH
    MAX_DATA_LENGTH INDEX_LENGTH DATA_FREE AUTO_INCREMENT CREATE_TIME UPDATE_TIME CHECK_TIME
    TABLE_COLLATION CHECKSUM CREATE_OPTIONS TABLE_COMMENT MAX_INDEX_LENGTH TEMPORARY COLUMN_NAME
    ORDINAL_POSITION COLUMN_DEFAULT IS_NULLABLE DATA_TYPE CHARACTER_MAXIMUM_LENGTH
    CHARACTER_OCTET_LENGTH NUMERIC_PRECISION NUMERIC_SCALE DATETIME_PRECISION CHARACTER_SET_NAME
    COLLATION_NAME COLUMN_TYPE COLUMN_KEY EXTRA COLUMN_COMMENT IS_GENERATED GENERATION_EXPRESSION
    NON_UNIQUE INDEX_NAME SEQ_IN_INDEX COLLATION CARDINALITY SUB_PART PACKED NULLABLE INDEX_TYPE
    COMMENT INDEX_COMMENT IGNORED CONSTRAINT_NAME POSITION_IN_UNIQUE_CONSTRAINT
    REFERENCED_TABLE_NAME REFERENCED_COLUMN_NAME CONSTRAINT_TYPE UNIQUE_CONSTRAINT_NAME
    MATCH_OPTION UPDATE_RULE DELETE_RULE PARTITION_NAME SUBPARTITION_NAME
    PARTITION_ORDINAL_POSITION SUBPARTITION_ORDINAL_POSITION PARTITION_METHOD SUBPARTITION_METHOD
    PARTITION_EXPRESSION SUBPARTITION_EXPRESSION PARTITION_DESCRIPTION PARTITION_COMMENT
    NODEGROUP TABLESPACE_NAME
    """.split()
)


def test_info_schema_columns_are_all_reviewed(db: tuple[str, str, str]) -> None:
    conn = pymysql.connect(**ROOT, database=db[0], charset="utf8mb4", autocommit=True)
    with conn.cursor() as cur:
        for view, schema_column in sqlguard._INFO_SCHEMA_VIEWS.items():
            cur.execute(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS "
                "WHERE TABLE_SCHEMA = 'information_schema' AND TABLE_NAME = %s",
                (view,),
            )
            columns = {r[0].upper() for r in cur.fetchall()}
            assert schema_column in columns & sqlguard._INFO_SCHEMA_HIDDEN
            unreviewed = columns - _VISIBLE_INFO_SCHEMA_COLUMNS - sqlguard._INFO_SCHEMA_HIDDEN
            assert not unreviewed, (view, unreviewed)
            cur.execute(
                f"EXPLAIN SELECT 1 FROM information_schema.{view} WHERE {schema_column} = DATABASE()"
            )
            assert "Scanned 1 database" in cur.fetchall()[0][-1], view
    conn.close()


@pytest.fixture
def over_privileged(db: tuple[str, str, str]) -> Iterator[tuple[str, str]]:
    """An account that may read and execute everything, and a stored DEFINER function in the
    data source's schema and in another schema, both reading a secret of the other schema."""
    other = f"{db[0]}_other"
    conn = _root()
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{other}`")
        cur.execute(f"CREATE TABLE `{other}`.secret (v TEXT)")
        cur.execute(f"INSERT INTO `{other}`.secret VALUES ('the-secret')")
        for schema in (other, db[0]):
            cur.execute(
                f"CREATE FUNCTION `{schema}`.peek(x INT) RETURNS TEXT READS SQL DATA "
                f"SQL SECURITY DEFINER RETURN (SELECT v FROM `{other}`.secret LIMIT 1)"
            )
    try:
        yield db[0], other
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP FUNCTION IF EXISTS `{db[0]}`.peek")
            cur.execute(f"DROP DATABASE IF EXISTS `{other}`")
        conn.close()


async def test_stored_functions_and_other_schemas_stay_out(
    over_privileged: tuple[str, str],
) -> None:
    name, other = over_privileged
    src = MysqlSource({"adm": ConnectParams(host="127.0.0.1", user="root", database=name)})
    try:
        # Without the guard the server runs them (so the guard is what stops the leak).
        leaked = await src._execute_raw("adm", f"SELECT `{other}`.peek(1), peek(1)")
        assert leaked.rows == [["the-secret", "the-secret"]]
        for sql in (f"SELECT {other}.peek(1)", "SELECT peek(1)", "SELECT `peek`(1)",
                    f"SELECT `{other}`.`peek` (1)"):  # fmt: skip
            with pytest.raises(SourceError) as info:
                await src.fetch(_req(sql, ds="adm"))
            assert info.value.code == ErrorCode.FORBIDDEN_QUERY, sql
        up = await src.fetch(_req(
            "SELECT t.TABLE_NAME, c.COLUMN_NAME FROM information_schema.TABLES t JOIN "
            "information_schema.COLUMNS c ON c.TABLE_NAME = t.TABLE_NAME "
            "WHERE t.TABLE_SCHEMA = DATABASE() AND c.TABLE_SCHEMA = DATABASE()", ds="adm",
        ))  # fmt: skip
        assert {row[0] for row in up.rows} <= set(TABLES) and up.rows
        assert not [row for row in up.rows if "secret" in row or "v" == row[1]]
        with pytest.raises(SourceError):
            await src.fetch(_req("SELECT TABLE_NAME FROM information_schema.TABLES", ds="adm"))
    finally:
        await src.aclose()


async def test_a_param_never_completes_a_function_name(over_privileged: tuple[str, str]) -> None:
    # The driver writes a param's value where its `?` stands: glued to a name, it ends that
    # name for the server (`peek?(1)` with [2] is `peek2(1)`), while sqlglot read two tokens
    # and checked none of them as a call. A stored DEFINER function named with a digit at its
    # end ran for the SELECT-only account and read another schema.
    name, other = over_privileged
    conn = _root()
    with conn.cursor() as cur:
        cur.execute(
            f"CREATE FUNCTION `{name}`.peek2(x INT) RETURNS TEXT READS SQL DATA "
            f"SQL SECURITY DEFINER RETURN (SELECT v FROM `{other}`.secret LIMIT 1)"
        )
    src = MysqlSource({"adm": ConnectParams(host="127.0.0.1", user="root", database=name)})
    try:
        assert (await src._execute_raw("adm", "SELECT peek2(1)")).rows == [["the-secret"]]
        for sql, params in (
            ("SELECT peek?(1)", [2]),
            ("SELECT peek?(1) FROM orders LIMIT 1", [2]),
            ("SELECT 1 FROM orders WHERE peek? (1) IS NOT NULL", [2]),
            ("SELECT x? FROM orders", [1]),
            ("SELECT ?x FROM orders", [1]),
            ("SELECT @?", [1]),
            ("SELECT 'a'?", ["b"]),
            ("SELECT 1 FROM orders WHERE id = ?.5", [1]),
        ):
            with pytest.raises(SourceError) as info:
                await src.fetch(_req(sql, params, ds="adm"))
            assert info.value.code == ErrorCode.FORBIDDEN_QUERY, sql
            assert "must not touch" in info.value.message, sql
        fine = _req("SELECT id FROM orders WHERE id IN (?,?) AND id=?", [1, 2, 1], ds="adm")
        assert (await src.fetch(fine)).rows == []
    finally:
        await src.aclose()
        with conn.cursor() as cur:
            cur.execute(f"DROP FUNCTION IF EXISTS `{name}`.peek2")
        conn.close()


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT nofn(1)", "unknown function"),  # 1305 FUNCTION <db>.nofn does not exist
        ("SELECT mid ('abc', 1, 1)", "unknown function"),  # a stored-function lookup
        ("SELECT otherdb.fn(1)", "unknown function"),
        ("SELECT * FROM nope", "unknown table `nope`"),
        ("SELECT * FROM orders o, orders o", "used twice"),
        ("SELECT CAST('zz' AS SIGNED)", "warning 1292"),
        ("SELECT (SELECT id FROM orders)", "more than one row"),
    ],
)
async def test_error_messages_never_name_internals(
    db: tuple[str, str, str], sql: str, expected: str
) -> None:
    # An account with EXECUTE (else 1370 comes first), and the raw path (the guard refuses most).
    src = MysqlSource({"adm": ConnectParams(host="127.0.0.1", user="root", database=db[0])})
    try:
        with pytest.raises(SourceError) as info:
            await src._execute_raw("adm", sql)
    finally:
        await src.aclose()
    message = info.value.message
    assert expected in message
    for secret in (db[0], "root", "127.0.0.1", "localhost", "@", "zz"):
        assert secret not in message, message
