"""The SQL guard runs off the worker's event loop: parsing a crafted 8,000-character statement
takes ~70 ms, which on the loop would stall every other call of the worker meanwhile."""

from __future__ import annotations

import threading
import time

import anyio
import pytest

import workers.sources.mysql.source as mysql_source
from contracts import QueryMysqlRequest
from contracts.status import ErrorCode
from workers.sources import SourceError
from workers.sources.mysql.source import ConnectParams, MysqlSource


async def test_the_guard_runs_in_a_thread_and_the_loop_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[threading.Thread] = []

    def slow_guard(sql: str, params: object, *, schema: str | None = None) -> object:
        seen.append(threading.current_thread())
        time.sleep(0.3)  # as long as a crafted statement's parse, without the GIL
        raise SourceError(ErrorCode.FORBIDDEN_QUERY, "refused")

    monkeypatch.setattr(mysql_source, "guard_sql", slow_guard)
    source = MysqlSource({"shop": ConnectParams(host="127.0.0.1", user="nobody", database="x")})
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(tick)
            with pytest.raises(SourceError):
                await source.fetch(QueryMysqlRequest(data_source="shop", sql="SELECT 1"))
            tg.cancel_scope.cancel()
    finally:
        await source.aclose()
    assert seen and seen[0] is not threading.main_thread()
    assert ticks >= 10  # the loop kept running while the guard worked
