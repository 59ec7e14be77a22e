"""A data source that stops answering (or refuses the account) is said once per change of
state, by its logical name and what its error number means, and again when it answers.

Found by the on-call drill: a MySQL data source that went down after the worker started was
silent in the worker's log at the default level (WARNING) — its calls answered
ERROR/UNAVAILABLE, and only the INFO line per call said `finished ERROR/ERROR` — and a wrong
password was warned about at start as "unavailable (error 1045); try again later", which
sends an operator to wait rather than to fix the URL.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

import anyio
import msgspec
import pytest
from anyio.abc import SocketStream

from chaos.services import free_port
from contracts import QueryMysqlRequest
from contracts.status import ErrorCode
from workers.sources import SourceError, warm_up
from workers.sources.mysql.config import parse_url
from workers.sources.mysql.shop import ensure_demo_shop
from workers.sources.mysql.source import MysqlSource

pytestmark = pytest.mark.mariadb
LOGGER = "aci.sources"


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [f"{r.levelname} {r.getMessage()}" for r in caplog.records if r.name.startswith(LOGGER)]


async def _codes(src: MysqlSource, ds: str, times: int) -> list[str]:
    codes = []
    for _ in range(times):
        try:
            await src.fetch(QueryMysqlRequest(data_source=ds, sql="SELECT 1"))
            codes.append("answered")
        except SourceError as exc:
            codes.append(exc.code.value)
    return codes


@contextlib.asynccontextmanager
async def forwarder(port: int) -> AsyncIterator[None]:
    """127.0.0.1:`port` → the shared MariaDB, while open (a server that comes back)."""

    async def pipe(a: SocketStream, b: SocketStream) -> None:
        with contextlib.suppress(Exception):
            async for chunk in a:
                await b.send(chunk)
        with contextlib.suppress(Exception):
            await b.send_eof()

    async def serve(client: SocketStream) -> None:
        async with client, await anyio.connect_tcp("127.0.0.1", 3306) as server:
            async with anyio.create_task_group() as tg:
                tg.start_soon(pipe, client, server)
                tg.start_soon(pipe, server, client)

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        yield
        tg.cancel_scope.cancel()


async def test_a_server_that_goes_away_and_comes_back_is_said_once_each_way(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reader = parse_url(await ensure_demo_shop())
    port = free_port()
    src = MysqlSource({"shop": msgspec.structs.replace(reader, port=port)}, pool_size=1)
    caplog.set_level(logging.INFO, logger=LOGGER)
    try:
        async with forwarder(port):
            assert await _codes(src, "shop", 1) == ["answered"]  # a pooled connection now
        # Gone: the pooled connection is cut (2013) and replaced by a fresh one, to which
        # nothing answers (2003): said by that, the cause (test_mysql_rotation.py), once.
        assert await _codes(src, "shop", 3) == ["UNAVAILABLE"] * 3
        async with forwarder(port):
            assert await _codes(src, "shop", 2) == ["answered"] * 2
    finally:
        await src.aclose()
    lines = _lines(caplog)
    assert lines == [
        "WARNING query_mysql: data source shop is unreachable (error 2003: no server answers at"
        " the host and port of its URL); its calls answer ERROR/UNAVAILABLE until it answers",
        "WARNING query_mysql: data source shop answers again",  # seen wherever the first is
    ]
    assert reader.password not in "".join(lines) and str(port) not in "".join(lines)


async def test_a_wrong_password_is_said_once_as_the_account_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reader = parse_url(await ensure_demo_shop())
    wrong = msgspec.structs.replace(reader, password="not-the-password-Zq7")
    src = MysqlSource({"shop": reader, "billing": wrong}, pool_size=1)
    caplog.set_level(logging.INFO, logger=LOGGER)
    try:
        await warm_up({"query_mysql": src}, timeout_s=10)  # the first word is the warm-up's
        assert await _codes(src, "billing", 3) == [ErrorCode.UNAVAILABLE.value] * 3
        assert await _codes(src, "shop", 1) == ["answered"]
    finally:
        await src.aclose()
    lines = _lines(caplog)
    assert lines == [
        "WARNING query_mysql: data source billing refuses the worker's account (error 1045:"
        " the user or password in its URL is wrong); its calls answer ERROR/UNAVAILABLE"
        " until it answers",
    ]
    assert "not-the-password" not in lines[0] and reader.user not in lines[0]


async def test_a_typo_in_the_database_name_says_check_the_url_or_the_grant(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A SELECT-only account cannot see a database it has no grant on: MariaDB answers 1044
    # (access denied), not 1049 (unknown database). Issue 35, item 7.
    reader = parse_url(await ensure_demo_shop())
    typo = msgspec.structs.replace(reader, database="shpo")
    src = MysqlSource({"shop": typo}, pool_size=1)
    caplog.set_level(logging.INFO, logger=LOGGER)
    try:
        with pytest.raises(SourceError) as caught:
            await src.fetch(QueryMysqlRequest(data_source="shop", sql="SELECT 1"))
        assert await _codes(src, "shop", 2) == [ErrorCode.UNAVAILABLE.value] * 2
    finally:
        await src.aclose()
    assert caught.value.code is ErrorCode.UNAVAILABLE and caught.value.retryable is False
    assert "shpo" not in caught.value.message
    assert _lines(caplog) == [
        "WARNING query_mysql: data source shop refuses the database its URL names (error 1044:"
        " its URL names a database the account may not use: check the database name in the"
        " URL, or the GRANT); its calls answer ERROR/UNAVAILABLE until it answers",
    ]
