"""One clock for the demo world (issue 24): with ACI_MYSQL_CLOCK a session's NOW() is the mock
incident's time, so "the last day" SQL over the demo shop finds the incident's rows."""

from __future__ import annotations

import pytest

from app.demo import scenario_clock
from contracts import QueryMysqlRequest
from workers.sources.mysql.clock import clock_statement
from workers.sources.mysql.shop import ensure_demo_shop
from workers.sources.mysql.source import MysqlSource

pytestmark = pytest.mark.mariadb
LAST_DAY = (
    "SELECT COUNT(*) AS orders, MAX(created_at) <= NOW() + INTERVAL 1 DAY AS near, NOW() AS now "
    "FROM orders WHERE created_at >= NOW() - INTERVAL 1 DAY"
)


async def test_last_day_sql_finds_the_incidents_rows_on_the_scenario_clock() -> None:
    url = await ensure_demo_shop()
    clock, _story = scenario_clock("db-pool-exhaustion")
    assert clock == "2026-03-14T10:10:00+08:00"
    source = MysqlSource.from_env({"ACI_MYSQL_SHOP_URL": url, "ACI_MYSQL_CLOCK": clock})
    try:
        request = QueryMysqlRequest(data_source="shop", sql=LAST_DAY, params=[])
        first = await source.fetch(request)
        again = await source.fetch(request)  # a reused (reset) session keeps the clock
    finally:
        await source.aclose()
    for upstream in (first, again):
        orders, near, now = upstream.rows[0]
        assert orders > 0 and near == 1
        assert str(now).startswith("2026-03-14T10:10:00")  # local time of the scenario


def test_the_clock_must_be_a_time_with_its_offset() -> None:
    assert clock_statement(None) == ""
    assert clock_statement("2026-03-14T10:10:00+08:00") == (
        "SET timestamp = 1773454200.000000, time_zone = '+08:00'"
    )
    assert clock_statement("2026-03-14T10:10:00-03:30").endswith("time_zone = '-03:30'")
    for bad in ("yesterday", "2026-03-14T10:10:00"):
        with pytest.raises(ValueError, match="ACI_MYSQL_CLOCK"):
            clock_statement(bad)
