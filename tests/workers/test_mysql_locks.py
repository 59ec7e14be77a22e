"""`query_mysql` takes no row locks, whatever the server's default isolation level (real
MariaDB): under SERIALIZABLE, InnoDB turns every plain SELECT of a transaction into a locking
read, and the tool's reads made writers wait."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pymysql
import pytest

from contracts import QueryMysqlRequest
from contracts.status import ErrorCode
from tests.workers.mysql_shop import ROOT, shop_database
from workers.sources import SourceError
from workers.sources.mysql.source import ConnectParams, MysqlSource

pytestmark = pytest.mark.mariadb


@pytest.fixture(scope="module")
def db() -> Iterator[tuple[str, str, str]]:
    with shop_database("lk") as found:
        yield found


@pytest.fixture
async def source(db: tuple[str, str, str]) -> AsyncIterator[MysqlSource]:
    name, user, password = db
    params = ConnectParams(host="127.0.0.1", user=user, password=password, database=name)
    src = MysqlSource({"shop": params}, statement_timeout_ms=2000, pool_size=1)
    yield src
    await src.aclose()


def _update(database: str) -> tuple[str, float]:
    """A writer of the row the read visits, waiting at most 1 s for a lock (rolled back)."""
    conn = pymysql.connect(**ROOT, database=database, autocommit=False)
    start = time.monotonic()
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION innodb_lock_wait_timeout = 1")
            cur.execute("UPDATE orders SET status = status WHERE id = 100001")
        outcome = "updated"
    except pymysql.MySQLError as exc:
        outcome = f"error {exc.args[0]}"
    finally:
        conn.rollback()
        conn.close()
    return outcome, time.monotonic() - start


async def test_a_long_read_never_makes_a_writer_wait(
    source: MysqlSource, db: tuple[str, str, str]
) -> None:
    # The server's default as an operator may set it (`transaction_isolation = SERIALIZABLE`
    # in its configuration): set on the call's session before its transaction, where the
    # global value would be. The tool's own setting must win.
    pool: Any = source._pools["shop"]
    pool.clock_sql = "SET SESSION tx_isolation = 'SERIALIZABLE'"
    read = QueryMysqlRequest(
        data_source="shop",
        sql="SELECT COUNT(*) FROM orders o, order_items a, order_items b, order_items c "
        "WHERE o.id = 100001",
    )
    outcome: list[ErrorCode] = []

    async def long_read() -> None:
        with pytest.raises(SourceError) as info:
            await source.fetch(read)
        outcome.append(info.value.code)

    async with anyio.create_task_group() as tg:
        tg.start_soon(long_read)
        await anyio.sleep(0.5)  # the read holds row 100001 by now, if it locks
        written, waited = await anyio.to_thread.run_sync(_update, db[0])
    assert outcome == [ErrorCode.TIMEOUT]  # it ran until its time limit
    assert written == "updated" and waited < 0.5, (written, waited)
