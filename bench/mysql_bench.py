"""Benchmark of `query_mysql`: guard overhead and end-to-end latency against the local MariaDB.

Run: .venv/bin/python bench/mysql_bench.py   (loads the demo `shop` database if missing)
"""

from __future__ import annotations

import statistics
import time

import anyio

from contracts import QueryMysqlRequest
from workers.sources.mysql import sqlguard
from workers.sources.mysql.shop import ensure_demo_shop
from workers.sources.mysql.source import MysqlSource
from workers.sources.mysql.sqlguard import guard_sql

TYPICAL = """SELECT o.id, o.status, o.total_amount, c.email
FROM orders AS o JOIN customers AS c ON c.id = o.user_id
WHERE o.tenant_id = ? AND o.status IN ('REFUNDED', 'PAID')
  AND o.created_at >= ? AND c.email LIKE '%@example.com'
ORDER BY o.created_at DESC LIMIT 20"""


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def bench_guard(n: int = 2000) -> float:
    params: list[str | int | float | bool | None] = ["t-1042", "2026-03-10"]
    for _ in range(50):
        guard_sql(TYPICAL, params, schema="shop")
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        guard_sql(TYPICAL, params, schema="shop")
        samples.append(time.perf_counter() - start)
    return _median_ms(samples)


def bench_comments(counts: tuple[int, ...] = (2_000, 20_000, 200_000)) -> dict[int, float]:
    """Guard time for `SELECT 1;` + n `/**/` (issue 14: was quadratic, 0.47 s at 2,000). Only
    n <= 1,997 fits MAX_SQL_CHARS; larger n lift the cap to show the growth."""
    figures = {}
    cap = sqlguard.MAX_SQL_CHARS
    try:
        for n in counts:
            sql = "SELECT 1;" + "/**/" * n
            setattr(sqlguard, "MAX_SQL_CHARS", max(cap, len(sql)))  # noqa: B010
            start = time.perf_counter()
            sqlguard.guard_sql(sql, [])
            figures[n] = (time.perf_counter() - start) * 1000
    finally:
        setattr(sqlguard, "MAX_SQL_CHARS", cap)  # noqa: B010
    return figures


async def bench_end_to_end(n: int = 300) -> float:
    url = await ensure_demo_shop()
    source = MysqlSource.from_env({"ACI_MYSQL_SHOP_URL": url})
    request = QueryMysqlRequest(
        data_source="shop", sql="SELECT id, status, total_amount FROM orders WHERE id = ?",
        params=[100042],
    )  # fmt: skip
    samples = []
    for i in range(n + 20):
        start = time.perf_counter()
        await source.fetch(request)
        if i >= 20:
            samples.append(time.perf_counter() - start)
    await source.aclose()
    return _median_ms(samples)


def main() -> None:
    """Print the figures."""
    print(f"guard median (typical 5-line query): {bench_guard():.3f} ms")
    for n, ms in bench_comments().items():
        print(f"guard, SELECT 1; + {n:,} /**/ ({9 + 4 * n:,} chars): {ms:.1f} ms")
    print(
        f"end-to-end median (indexed SELECT by primary key): {anyio.run(bench_end_to_end):.3f} ms"
    )


if __name__ == "__main__":
    main()
