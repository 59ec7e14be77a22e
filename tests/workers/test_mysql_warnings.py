"""`query_mysql` never returns a value a server warning says may be wrong (real MariaDB),
however many harmless warnings come before it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from contracts import QueryMysqlRequest
from contracts.status import ErrorCode
from tests.workers.mysql_shop import shop_database
from workers.sources import SourceError
from workers.sources.mysql.source import ConnectParams, MysqlSource

pytestmark = pytest.mark.mariadb


@pytest.fixture(scope="module")
def db() -> Iterator[tuple[str, str, str]]:
    with shop_database("wn") as found:
        yield found


@pytest.fixture
async def source(db: tuple[str, str, str]) -> AsyncIterator[MysqlSource]:
    name, user, password = db
    params = ConnectParams(host="127.0.0.1", user=user, password=password, database=name)
    src = MysqlSource({"shop": params}, statement_timeout_ms=3000, pool_size=1)
    yield src
    await src.aclose()


def _req(sql: str) -> QueryMysqlRequest:
    return QueryMysqlRequest(data_source="shop", sql=sql)


async def test_a_wrong_value_behind_many_harmless_warnings_is_an_error(
    source: MysqlSource,
) -> None:
    # 120 divisions by zero (harmless: NULL, said beside the rows), then 'zz' read as 0 by
    # the SUM (1292). The server lists 64 warnings by default: the SUM, 119 instead of 120,
    # came back as evidence with the note "division by zero".
    sql = (
        "SELECT MAX(id / 0) AS a, SUM(CAST(IF(id = 100100, 'zz', '1') AS SIGNED)) AS b "
        "FROM orders WHERE id <= 100120"
    )
    with pytest.raises(SourceError) as info:
        await source.fetch(_req(sql))
    assert info.value.code is ErrorCode.EXECUTION and "1292" in info.value.message


async def test_more_warnings_than_the_server_keeps_is_an_error(source: MysqlSource) -> None:
    # Past the list the tool asks the server to keep, an unlisted warning may cut a value.
    sql = "SELECT MAX(a.id / 0) AS m FROM order_items a, order_items b WHERE b.id < 3"
    with pytest.raises(SourceError) as info:
        await source.fetch(_req(sql))
    assert info.value.code is ErrorCode.EXECUTION
    assert "more warnings" in info.value.message


async def test_a_few_harmless_warnings_are_said_beside_the_rows(source: MysqlSource) -> None:
    up = await source.fetch(_req("SELECT id / 0 AS z FROM orders ORDER BY id LIMIT 3"))
    assert up.rows == [[None]] * 3
    assert up.warnings == ["warning 1365: division by zero; the server answered NULL"]


async def test_a_cut_result_still_has_its_warnings_read(source: MysqlSource) -> None:
    # 10,000 rows asked, 51 read: the rest was dropped with the session, unread, and with it
    # the warning about row 2 ('zz' read as 0), which came back as evidence.
    sql = (
        "SELECT a.id, CAST(IF(a.id = 2, 'zz', '1') AS SIGNED) AS b FROM order_items a "
        "ORDER BY a.id LIMIT 10000"
    )
    with pytest.raises(SourceError) as info:
        await source.fetch(_req(sql))
    assert info.value.code is ErrorCode.EXECUTION and "1292" in info.value.message
    clean = await source.fetch(_req(sql.replace("'zz'", "'2'")))  # the same cut, no warning
    assert len(clean.rows) == 51 and clean.rows[1] == [2, 2]
