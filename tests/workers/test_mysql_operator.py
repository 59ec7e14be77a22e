"""query_mysql on a real schema (issue 35, items 11, 13 and 14): what real use hit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from contracts import QueryMysqlRequest
from tests.workers.test_mysql import _params, db  # noqa: F401  (the module's database)
from workers.sources.mysql.source import MysqlSource

pytestmark = pytest.mark.mariadb


@pytest.fixture
async def source(db: tuple[str, str, str]) -> AsyncIterator[MysqlSource]:  # noqa: F811
    src = MysqlSource({"shop": _params(db)}, statement_timeout_ms=2000, pool_size=1)
    yield src
    await src.aclose()


def _req(sql: str, params: list[Any] | None = None) -> QueryMysqlRequest:
    return QueryMysqlRequest(data_source="shop", sql=sql, params=params)


async def test_explain_of_a_join_never_shows_the_physical_database(
    source: MysqlSource,
    db: tuple[str, str, str],  # noqa: F811
) -> None:
    sql = "EXPLAIN SELECT o.id, i.id FROM orders o JOIN order_items i ON i.order_id = o.id"
    up = await source.fetch(_req(sql + " WHERE o.id < 10"))
    ref = up.columns.index("ref")
    refs = [row[ref] for row in up.rows]
    assert "i.order_id" in refs or "o.id" in refs, refs
    assert db[0] not in repr(up.rows)


async def test_a_warning_that_changes_no_value_is_said_not_fatal(source: MysqlSource) -> None:
    # Issue 35, item 13: one zero denominator failed the whole query.
    up = await source.fetch(_req("SELECT id, 10 / (id - id) AS r FROM orders ORDER BY id LIMIT 2"))
    assert [row[1] for row in up.rows] == [None] * len(up.rows) and up.rows
    assert up.warnings == ["warning 1365: division by zero; the server answered NULL"]
    # A warning that cuts or corrupts a value stays an error.
    from workers.sources import SourceError

    with pytest.raises(SourceError, match="warning 1292"):
        await source.fetch(_req("SELECT CAST('zz' AS SIGNED)"))


def test_the_warnings_reach_the_control_view_and_briefly_the_model() -> None:
    from contracts import Bounds, MysqlUpstream
    from contracts.invocation import build_views
    from contracts.mysql import project_mysql

    up = MysqlUpstream(columns=["r"], rows=[[None]], warnings=["warning 1365: division by zero"])
    result = project_mysql("c1", up, Bounds())
    observation, control = build_views(result, Bounds(), tool="query_mysql", session_id="s")
    assert control.warnings == ["warning 1365: division by zero"]
    assert observation.warnings == ["warning 1365: division by zero"]  # type: ignore[union-attr]


async def test_describe_a_column_runs_and_rownum_says_what_to_write(source: MysqlSource) -> None:
    # Issue 35, item 14: `DESCRIBE film title` "could not be parsed as one SELECT"; ROWNUM()
    # (MariaDB >= 10.6 only) is left out on purpose, and the refusal says what runs instead.
    from contracts.status import ErrorCode
    from workers.sources import SourceError

    up = await source.fetch(_req("DESCRIBE orders status"))
    assert [row[0] for row in up.rows] == ["status"]
    up = await source.fetch(_req("DESC orders 'user%';"))
    assert [row[0] for row in up.rows] == ["user_id"]
    for refused in ("DESCRIBE orders status; SELECT 1", "DESCRIBE mysql.user host"):
        with pytest.raises(SourceError) as caught:
            await source.fetch(_req(refused))
        assert caught.value.code is ErrorCode.FORBIDDEN_QUERY
    with pytest.raises(SourceError, match=r"write ROW_NUMBER\(\) OVER \(\)"):
        await source.fetch(_req("SELECT ROWNUM() FROM orders"))


async def test_a_truncated_result_keeps_its_connection(source: MysqlSource) -> None:
    # Issue 35, item 14: an explicit LIMIT above the row cap dropped the connection, so the
    # next call paid a reconnect (~43 ms).
    pool = source._pool("shop")
    up = await source.fetch(_req("SELECT id FROM orders ORDER BY id LIMIT 1000"))
    assert len(up.rows) > 0
    assert len(pool.idle) == 1
    kept = pool.idle[0]
    await source.fetch(_req("SELECT id FROM orders ORDER BY id LIMIT 1000"))
    assert pool.idle == [kept]  # the same connection, reused
    # Far more rows than it reads to drain: the statement is stopped (KILL QUERY), not read
    # whole, and its session is kept too: its warnings are read on it (test_mysql_warnings;
    # that it is not read whole: test_mysql_large_rows).
    await source.fetch(_req("SELECT a.id FROM orders a CROSS JOIN orders b LIMIT 100000"))
    assert pool.idle == [kept]
