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
