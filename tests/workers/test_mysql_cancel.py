"""A cancelled `query_mysql` call frees its MariaDB thread (issue 32): through the whole
pipeline (client → request stream → admission → the worker's poll of the cancel mark → the
source's `KILL QUERY` on a separate connection), on the real Redis and the real MariaDB."""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import pytest

from pipeline.client import EvidenceClient, ToolCall
from pipeline.settings import Settings
from tests.pipeline.helpers import assert_exactly_once, books, loads, running_worker
from tests.workers.mysql_shop import running
from tests.workers.test_mysql import _params, db  # noqa: F401  (db: a fixture)
from workers.sources.mysql.source import MysqlSource

pytestmark = [pytest.mark.mariadb, pytest.mark.redis]

# A statement the guard allows that runs for many seconds: a large cross join.
SLOW_SQL = (
    "SELECT COUNT(*) AS aci_cancel_me FROM order_items a, order_items b, order_items c, "
    "order_items d"
)


@pytest.mark.serial
async def test_a_cancelled_query_frees_its_mariadb_thread_within_a_second(
    redis: Any,
    prefix: str,
    db: tuple[str, str, str],  # noqa: F811
) -> None:
    settings = Settings(prefix=prefix, deadline_s=20.0, visibility_timeout_s=25.0)
    source = MysqlSource({"shop": _params(db)}, statement_timeout_ms=20000, pool_size=2)
    call = ToolCall(
        tool="query_mysql",
        tool_call_id="call_sql_1",
        arguments=json.dumps({"data_source": "shop", "sql": SLOW_SQL}),
    )
    try:
        async with (
            EvidenceClient(redis, settings) as client,
            running_worker(redis, settings, {"query_mysql": source}),
        ):
            await client.submit_many("s-sql", [call])
            for _ in range(200):  # the server runs it (within 10 s)
                if running("aci_cancel_me"):
                    break
                await anyio.sleep(0.05)
            await anyio.sleep(0.5)
            assert running("aci_cancel_me") == 1
            started = time.monotonic()
            assert await client.cancel("s-sql", "call_sql_1")
            freed = None
            while time.monotonic() - started < 3:
                if running("aci_cancel_me") == 0:
                    freed = time.monotonic() - started
                    break
                await anyio.sleep(0.02)
            final = await client.wait("s-sql", ["call_sql_1"], timeout=5)
    finally:
        await source.aclose()
    print(f"\nMariaDB thread freed {freed} s after the cancel was sent")
    assert freed is not None and freed < 1.0
    model = loads(final["call_sql_1"].model)
    assert model["error"]["code"] == "CANCELLED"
    assert_exactly_once(await books(redis, prefix, "s-sql"), ["call_sql_1"])
