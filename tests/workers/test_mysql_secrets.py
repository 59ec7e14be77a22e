"""Secrets in the rows `query_mysql` serves (docs/mysql.md, "Secrets in rows"): a text cell
under a secret column's name (`password`, `api_token`; also when aliased: the column it reads
says) is `***`, and every text cell is masked by shape as a log record is (a DSN's password, a
token's prefix, `password=` inside a note, a JSON column's `"password"` member); numbers (a
count named `password_resets`) and what only looks like a secret stay. Against the real
MariaDB, as a SELECT-only account."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import msgspec
import pymysql
import pytest

from contracts import DEFAULT_BOUNDS, QueryMysqlRequest, project_mysql
from workers.sources.mysql.shop import create_reader
from workers.sources.mysql.source import ConnectParams, MysqlSource

pytestmark = pytest.mark.mariadb
ROOT = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}
GHP = "ghp_S3cretAbCdEfGhIjKlMnOpQrStUvWxYz0123"


@pytest.fixture(scope="module")
def db() -> Iterator[tuple[str, str, str]]:
    tag = uuid.uuid4().hex[:10]
    name, user, password = f"aci_s_{tag}", f"aci_sr_{tag}", f"pw-{tag}"
    conn = pymysql.connect(**ROOT, charset="utf8mb4", autocommit=True)  # type: ignore[arg-type]
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}`")
            cur.execute(
                f"CREATE TABLE `{name}`.accounts (id INT PRIMARY KEY, name VARCHAR(40),"
                " password VARCHAR(80), api_token VARCHAR(80), token_count INT, note TEXT,"
                " settings LONGTEXT CHECK (json_valid(settings)), pin_hash VARBINARY(16),"
                " token_expires_at DATETIME DEFAULT '2026-12-05 10:00:00')"
            )
            cur.execute(
                f"INSERT INTO `{name}`.accounts (id, name, password, api_token, token_count,"
                " note, settings, pin_hash) VALUES (1, 'bob', 'S3cret-1', %s, 3,"
                " 'moved to postgres://app:S3cret-2@db/x; password=S3cret-3 by ops',"
                ' \'{"password": "S3cret-4", "theme": "dark"}\', NULL)',
                (GHP,),
            )
        create_reader(conn, name, user, password)
        yield name, user, password
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
            for host in ("localhost", "127.0.0.1"):
                cur.execute(f"DROP USER IF EXISTS '{user}'@'{host}'")
        conn.close()


@pytest.fixture
async def source(db: tuple[str, str, str]) -> AsyncIterator[MysqlSource]:
    name, user, password = db
    params = ConnectParams(host="127.0.0.1", port=3306, user=user, password=password, database=name)
    src = MysqlSource({"shop": params}, statement_timeout_ms=2000, pool_size=1)
    yield src
    await src.aclose()


async def _rows(source: MysqlSource, sql: str) -> tuple[list[str], list[list[Any]], str]:
    up = await source.fetch(QueryMysqlRequest(data_source="shop", sql=sql, params=[]))
    shown = msgspec.json.encode(project_mysql("call-1", up, DEFAULT_BOUNDS)).decode()
    return list(up.columns), [list(r) for r in up.rows], shown


async def test_a_secret_column_and_secrets_in_text_cells_are_masked(source: MysqlSource) -> None:
    _, rows, shown = await _rows(
        source, "SELECT id, name, password, api_token, token_count, note, settings FROM accounts"
    )
    assert "S3cret" not in shown
    assert rows == [[
        1, "bob", "***", "***", 3, "moved to postgres://app:***@db/x; password=*** by ops",
        {"password": "***", "theme": "dark"},
    ]]  # fmt: skip


async def test_an_alias_does_not_unmask_a_secret_column(source: MysqlSource) -> None:
    _, rows, shown = await _rows(
        source, "SELECT password AS p, name AS password_owner FROM accounts"
    )
    assert rows == [["***", "bob"]] and "S3cret" not in shown


async def test_a_number_under_a_secrets_name_is_evidence(source: MysqlSource) -> None:
    _, rows, _ = await _rows(source, "SELECT COUNT(*) AS password_resets FROM accounts")
    assert rows == [[1]]


# attack5: a secret column read under another name. The guard follows each output column to the
# columns it reads (through CTEs, derived tables, UNION branches, subqueries, functions), by name.
@pytest.mark.parametrize(
    "sql",
    [
        "SELECT x FROM (SELECT password AS x FROM accounts) d",
        "WITH c AS (SELECT password AS x FROM accounts) SELECT x FROM c",
        "WITH c AS (SELECT password AS x FROM accounts) SELECT y FROM (SELECT x AS y FROM c) d",
        "SELECT name FROM accounts WHERE 0 UNION ALL SELECT password FROM accounts",
        "SELECT (SELECT password FROM accounts LIMIT 1) AS s FROM accounts",
        "SELECT JSON_OBJECT('p', password) AS j FROM accounts",
        "SELECT JSON_ARRAY(password) AS k FROM accounts",
        "SELECT CASE WHEN 1 THEN password END AS c FROM accounts",
        "SELECT GROUP_CONCAT(password) AS g FROM accounts",
        "SELECT JSON_ARRAYAGG(password) AS g FROM accounts",
        "SELECT MAX(password) AS m FROM accounts",
        "SELECT COALESCE(password, name) AS m FROM accounts",
        "SELECT CONCAT('x', password) AS c FROM accounts",
        "SELECT * FROM (SELECT id, password AS x FROM accounts) d",
        "SELECT d.* FROM (SELECT id, api_token AS x FROM accounts) d",
        # numbers made of a secret's text: shown as numbers before (8 characters per BIGINT)
        "SELECT CAST(CONV(HEX(SUBSTR(password, 1, 8)), 16, 10) AS UNSIGNED) AS n FROM accounts",
        "SELECT ASCII(password) AS password FROM accounts",
        "SELECT * FROM (SELECT ORD(SUBSTR(password, 2)) AS o FROM accounts) d",
        # names given without an alias: a column list, a later UNION branch, JSON_TABLE, none
        "WITH c(x) AS (SELECT password FROM accounts) SELECT x FROM c",
        "SELECT x FROM (SELECT name AS x FROM accounts WHERE 0 UNION ALL SELECT password "
        "FROM accounts) d",
        "SELECT j.v FROM accounts a JOIN JSON_TABLE(JSON_ARRAY(a.password), '$[*]' "
        "COLUMNS (v VARCHAR(80) PATH '$')) j",
        "SELECT * FROM (SELECT CAST(CONV(HEX(SUBSTR(password, 1, 8)), 16, 10) AS UNSIGNED) "
        "FROM accounts) d",
        "SELECT `ASCII(password)` FROM (SELECT ASCII(password) FROM accounts) d",
        "SELECT * FROM (SELECT CAST(password AS CHAR) FROM accounts) d",
        # a CTE's column list over a `*`: its names cannot be matched to the columns by place
        "WITH c(a, b, c, d, e, f, g, h, i) AS (SELECT * FROM accounts) SELECT c, d FROM c",
        "WITH c(a, b, c, d, e, f, g, h, i) AS (SELECT a.* FROM accounts a) SELECT * FROM c",
    ],
)
async def test_a_secret_read_under_another_name_is_masked(source: MysqlSource, sql: str) -> None:
    _, rows, shown = await _rows(source, sql)
    assert rows and "S3cret" not in shown and "ghp_" not in shown, shown
    assert "5995244871939796273" not in shown and "83" not in shown and "51" not in shown, shown


async def test_a_test_of_a_secret_inside_count_is_masked(source: MysqlSource) -> None:
    # COUNT(password) counts; COUNT(IF(password LIKE ..)) tests the text, a bit per row
    _, rows, _ = await _rows(
        source,
        "SELECT id, COUNT(IF(password LIKE 'S3c%', 1, NULL)) AS c FROM accounts GROUP BY id",
    )
    assert rows == [[1, "***"]]


async def test_a_time_named_after_a_secret_is_evidence(source: MysqlSource) -> None:
    # when a token expires is what an incident asks, not a secret (nor is its latest)
    _, rows, _ = await _rows(
        source,
        "SELECT token_expires_at, MAX(token_expires_at) AS latest FROM accounts "
        "GROUP BY token_expires_at",
    )
    assert rows == [["2026-12-05T10:00:00", "2026-12-05T10:00:00"]]


async def test_what_reads_no_secret_stays(source: MysqlSource) -> None:
    _, rows, _ = await _rows(
        source,
        "SELECT id, name, COUNT(password) AS n, password IS NULL AS unset "
        "FROM (SELECT id, name, password FROM accounts) d GROUP BY id, name, password",
    )
    assert rows == [[1, "bob", 1, 0]]


async def test_a_secret_compared_in_a_condition_is_an_oracle_the_tool_cannot_close(
    source: MysqlSource,
) -> None:
    # docs/mysql.md "Secrets in rows": what a SELECT may filter on, it may test; masking is
    # against reading a secret by accident (SELECT *), the account's grants against the rest.
    _, rows, _ = await _rows(source, "SELECT id FROM accounts WHERE password LIKE 'S3c%'")
    assert rows == [[1]]
