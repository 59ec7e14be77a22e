"""`query_mysql` against results larger than it shows, on the real MariaDB: a row over the
protocol's 16 MiB chunk is read as prefixes (`wire.py`), and a cut result never holds its
session while the server sends the rest (`session.execute`, `leftovers.drained`)."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import AsyncIterator, Iterator

import anyio
import pytest

from contracts import DEFAULT_BOUNDS, QueryMysqlRequest, project_mysql
from tests.workers.mysql_shop import running, shop_database
from workers.sources.mysql.source import ConnectParams, MysqlSource

pytestmark = pytest.mark.mariadb


@pytest.fixture(scope="module")
def db() -> Iterator[tuple[str, str, str]]:
    with shop_database("lr") as found:
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


async def test_a_row_over_16_mib_is_read_as_prefixes(source: MysqlSource) -> None:
    # 56 MB in one row (each value under max_allowed_packet): the worker held all of it, then
    # its decoded copy; 8,000 characters of `a, a, ...` over one such value made gigabytes.
    sql = (
        "SELECT REPEAT('é', 8000000) AS a, NULL AS n, UNHEX(REPEAT('C3', 8000000)) AS b, "
        "REPEAT('x', 16000000) AS c, REPEAT('y', 8000000) AS d, 42 AS i, "
        "CAST('2026-01-02' AS DATE) AS day, 12.50 AS m, 'tail' AS t"
    )
    await source.fetch(_req("SELECT 1"))  # the guard's modules imported, a connection open
    tracemalloc.start()
    try:
        up = await source.fetch(_req(sql))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40_000_000, peak  # the first 16 MiB chunk and prefixes, not the 56 MB row
    chars = DEFAULT_BOUNDS.mysql_cell_chars
    (row,) = up.rows
    # Every value after the large ones is intact; text cut at a character, bytes as base64.
    assert row[0] == "é" * (chars + 1) and row[1] is None
    assert str(row[2]).startswith("base64:w8PD") and row[3] == "x" * (chars + 1)
    assert row[4] == "y" * (chars + 1) and row[5:] == [42, "2026-01-02", "12.50", "tail"]
    assert project_mysql("c", up, DEFAULT_BOUNDS).truncated
    again = await source.fetch(_req("SELECT 'next' AS v"))  # the connection is in step
    assert again.rows == [["next"]]


async def test_a_cut_result_frees_its_session_at_once(source: MysqlSource) -> None:
    # Millions of rows left: the session was said to be dropped, but the driver's cursor read
    # every remaining row when it was dropped, until the statement's time limit (3 s here).
    # Now the statement is stopped and what the server had sent is read (~0.5 s of CPU).
    start = time.monotonic()
    up = await source.fetch(
        _req("SELECT a.id AS aci_cut_rest FROM order_items a, order_items b LIMIT 100000000")
    )
    assert time.monotonic() - start < 2.5
    assert len(up.rows) == DEFAULT_BOUNDS.mysql_max_rows + 1
    await anyio.sleep(0.3)
    assert running("aci_cut_rest") == 0
    assert (await source.fetch(_req("SELECT 1 AS v"))).rows == [[1]]


async def test_large_rows_past_the_budget_are_evidence_not_a_timeout(
    source: MysqlSource,
) -> None:
    # 1 MB rows under an explicit LIMIT: after the rows shown, 5,000 more were read and dropped
    # to keep the connection, until the time limit, and the call answered TIMEOUT.
    start = time.monotonic()
    up = await source.fetch(_req("SELECT REPEAT('x', 1000000) AS r FROM order_items LIMIT 10000"))
    assert time.monotonic() - start < 1.5
    assert up.stopped_early and project_mysql("c", up, DEFAULT_BOUNDS).truncated
