"""The SQL guard's answers checked on the real MariaDB (issues 23 and 24): no oracle for other
databases' names, and JSON_TABLE as a FROM source runs (and is the table function)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import msgspec
import pymysql
import pytest

from contracts import DEFAULT_BOUNDS, QueryMysqlRequest, build_error_views, project_mysql
from contracts.status import ErrorCode
from workers.sources import SourceError
from workers.sources.mysql.shop import create_reader, load_shop
from workers.sources.mysql.source import ConnectParams, MysqlSource

pytestmark = pytest.mark.mariadb
ROOT = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}
JSON_TABLE = "JSON_TABLE('[1]', '$[*]' COLUMNS (x INT PATH '$'))"


def _root() -> pymysql.Connection[Any]:
    return pymysql.connect(**ROOT, charset="utf8mb4", autocommit=True)


@pytest.fixture(scope="module")
def schemas() -> Iterator[tuple[str, str, str, str]]:
    """(the data source's schema, its reader, password, a real other database with a table)."""
    tag = uuid.uuid4().hex[:10]
    name, user, password, other = f"aci_g_{tag}", f"aci_gr_{tag}", f"pw-{tag}", f"aci_go_{tag}"
    conn = _root()
    try:
        load_shop(conn, name)
        create_reader(conn, name, user, password)
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{other}`")
            cur.execute(f"CREATE TABLE `{other}`.orders (id INT)")
            # A stored function named like the table function, where a call would find it.
            cur.execute(
                f"CREATE FUNCTION `{name}`.`json_table`(x INT) RETURNS TEXT DETERMINISTIC "
                "RETURN 'STORED'"
            )
        yield name, user, password, other
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
            cur.execute(f"DROP DATABASE IF EXISTS `{other}`")
            for host in ("%", "localhost", "127.0.0.1"):
                cur.execute(f"DROP USER IF EXISTS '{user}'@'{host}'")
        conn.close()


@pytest.fixture(params=["reader", "root"])
async def source(
    request: pytest.FixtureRequest, schemas: tuple[str, str, str, str]
) -> AsyncIterator[MysqlSource]:
    name, user, password, _ = schemas
    if request.param == "root":  # an account that could read the other database
        user, password = "root", ""
    params = ConnectParams(host="127.0.0.1", user=user, password=password, database=name)
    src = MysqlSource({"shop": params}, statement_timeout_ms=2000, pool_size=1)
    yield src
    await src.aclose()


async def _agent_sees(source: MysqlSource, sql: str, params: list[Any] | None = None) -> bytes:
    """The error observation the model gets for `sql`, as bytes."""
    with pytest.raises(SourceError) as info:
        await source.fetch(QueryMysqlRequest(data_source="shop", sql=sql, params=params))
    _, observation, _ = build_error_views(
        info.value.code,
        info.value.message,
        "call-1",
        tool="query_mysql",
        session_id="s",
        bounds=DEFAULT_BOUNDS,
    )
    return msgspec.json.encode(observation)


@pytest.mark.parametrize(
    "template",
    [
        "SELECT * FROM {db}.orders",
        "SELECT * FROM `{db}`.`orders`",
        "SELECT {db}.orders.id FROM orders",
        "SELECT id FROM orders WHERE id IN (SELECT id FROM {db}.orders)",
        "DESCRIBE {db}.orders",
        "EXPLAIN SELECT * FROM {db}.nosuch",
    ],
)
async def test_other_schemas_get_one_answer_whether_or_not_they_exist(
    source: MysqlSource, schemas: tuple[str, str, str, str], template: str
) -> None:
    own, other = schemas[0], schemas[3]
    existing = await _agent_sees(source, template.format(db=other))
    missing = await _agent_sees(source, template.format(db="aci_no_such_db_zz"))
    # Not even a guess of this data source's own physical name is confirmed.
    itself = await _agent_sees(source, template.format(db=own))
    assert existing == missing == itself
    assert other.encode() not in existing and b"outside this data source" in existing


async def test_json_table_in_from_runs_and_returns_rows(source: MysqlSource) -> None:
    up = await source.fetch(
        QueryMysqlRequest(
            data_source="shop",
            sql="SELECT j.n, j.v FROM JSON_TABLE(?, '$[*]' COLUMNS "
            "(n FOR ORDINALITY, v INT PATH '$')) AS j ORDER BY j.n",
            params=["[3, 5, 8]"],
        )
    )
    assert up.columns == ["n", "v"] and up.rows == [[1, 3], [2, 5], [3, 8]]
    lateral = await source.fetch(
        QueryMysqlRequest(
            data_source="shop",
            sql="SELECT e.id, t.tag FROM order_events e JOIN JSON_TABLE(e.payload, "
            "'$.tags[*]' COLUMNS (tag VARCHAR(16) PATH '$')) t ON TRUE ORDER BY e.id LIMIT 4",
        )
    )
    assert lateral.rows and all(row[1] in ("web", "promo") for row in lateral.rows)
    result = project_mysql("call-1", lateral, DEFAULT_BOUNDS)
    assert result.evidence_status.value == "EVIDENCE_FOUND"


async def test_json_table_elsewhere_would_call_a_stored_function(source: MysqlSource) -> None:
    # The FROM source is the table function even beside a stored `json_table` ...
    up = await source._execute_raw("shop", f"SELECT x FROM {JSON_TABLE} j")
    assert up.rows == [[1]]
    # ... while outside FROM the server looks for a stored function: the guard refuses it.
    for sql in ("SELECT json_table(1)", f"SELECT 1 FROM DUAL WHERE {JSON_TABLE} IS NULL"):
        with pytest.raises(SourceError) as info:
            await source.fetch(QueryMysqlRequest(data_source="shop", sql=sql))
        assert info.value.code == ErrorCode.FORBIDDEN_QUERY, sql
