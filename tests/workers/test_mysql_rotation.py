"""Day two of a data source: its connections cut and its password rotated under a running
worker (a private account in the shared MariaDB's `test` database, dropped after).

Found by the day-two drill: after the server closed the worker's pooled connections (a
`KILL`, `wait_timeout` over a quiet night, a failover), the next call on each of them
answered ERROR/UNAVAILABLE (error 2013) although the server answered; and after the account's
password was rotated (`ALTER USER`) and the new URL written to `ACI_MYSQL_CONFIG`, every call
went on answering 1045 "retrying will not help" until the worker was restarted.
"""

from __future__ import annotations

import logging
import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from contracts import QueryMysqlRequest
from workers.sources import SourceError
from workers.sources.mysql.source import MysqlSource

pytestmark = pytest.mark.mariadb
SQL = QueryMysqlRequest(data_source="testdb", sql="SELECT ? AS v", params=[7])


def _root() -> pymysql.Connection:  # type: ignore[type-arg]
    return pymysql.connect(host="127.0.0.1", port=3306, user="root", autocommit=True)


@pytest.fixture
def account() -> Iterator[tuple[str, str]]:
    user, password = f"rot_{uuid.uuid4().hex[:10]}", secrets.token_hex(12)
    with _root() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'")
        cur.execute(f"GRANT SELECT ON test.* TO '{user}'@'%'")
    try:
        yield user, password
    finally:
        with _root() as conn, conn.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")


def _kill_sessions(user: str) -> int:
    with _root() as conn, conn.cursor() as cur:
        cur.execute("SELECT id FROM information_schema.processlist WHERE user = %s", (user,))
        ids = [row[0] for row in cur.fetchall()]
        for session in ids:
            cur.execute(f"KILL {int(session)}")
    return len(ids)


def _config(path: Path, user: str, password: str) -> None:
    path.write_text(f'[mysql]\ntestdb = "mysql://{user}:{password}@127.0.0.1:3306/test"\n')


async def test_a_pooled_connection_the_server_closed_is_replaced_not_an_error(
    account: tuple[str, str], tmp_path: Path
) -> None:
    user, password = account
    _config(tmp_path / "mysql.toml", user, password)
    src = MysqlSource.from_env({"ACI_MYSQL_CONFIG": str(tmp_path / "mysql.toml")})
    try:
        assert (await src.fetch(SQL)).rows == [[7]]
        assert _kill_sessions(user) == 1  # the pooled connection, idle
        assert (await src.fetch(SQL)).rows == [[7]]
    finally:
        await src.aclose()


async def test_a_password_rotated_in_the_config_file_is_used_without_a_restart(
    account: tuple[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    user, old = account
    new = secrets.token_hex(12)
    config = tmp_path / "mysql.toml"
    _config(config, user, old)
    src = MysqlSource.from_env({"ACI_MYSQL_CONFIG": str(config)})
    caplog.set_level(logging.INFO, logger="aci.sources")
    try:
        assert (await src.fetch(SQL)).rows == [[7]]
        with _root() as conn, conn.cursor() as cur:
            cur.execute(f"ALTER USER '{user}'@'%' IDENTIFIED BY '{new}'")
        _kill_sessions(user)
        with pytest.raises(SourceError) as caught:
            await src.fetch(SQL)
        assert caught.value.code.value == "UNAVAILABLE" and "1045" in caught.value.message
        _config(config, user, new)  # the operator writes the new secret
        assert (await src.fetch(SQL)).rows == [[7]]
    finally:
        await src.aclose()
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "ACI_MYSQL_CONFIG" in said and "testdb" in said, said
    assert old not in said and new not in said


async def test_a_data_source_named_in_the_environment_keeps_its_url(
    account: tuple[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # ACI_MYSQL_<NAME>_URL wins over the file (docs/mysql.md), also when the file changes.
    user, password = account
    config = tmp_path / "mysql.toml"
    _config(config, user, "wrong-" + password)
    url = f"mysql://{user}:{password}@127.0.0.1:3306/test"
    src = MysqlSource.from_env({"ACI_MYSQL_CONFIG": str(config), "ACI_MYSQL_TESTDB_URL": url})
    caplog.set_level(logging.INFO, logger="aci.sources")
    try:
        assert (await src.fetch(SQL)).rows == [[7]]
        _config(config, user, "other-" + password)
        assert (await src.fetch(SQL)).rows == [[7]]
    finally:
        await src.aclose()
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "changed" not in said and "added" not in said, said


async def test_a_config_file_caught_half_written_keeps_the_urls_read_before(
    account: tuple[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    user, password = account
    config = tmp_path / "mysql.toml"
    _config(config, user, password)
    src = MysqlSource.from_env({"ACI_MYSQL_CONFIG": str(config)})
    caplog.set_level(logging.INFO, logger="aci.sources")
    try:
        assert (await src.fetch(SQL)).rows == [[7]]
        config.write_text(f'[mysql]\ntestdb = "mysql://{user}:{password}@127.0.0.1')  # cut
        assert (await src.fetch(SQL)).rows == [[7]]
        assert (await src.fetch(SQL)).rows == [[7]]
    finally:
        await src.aclose()
    said = [r.getMessage() for r in caplog.records if "cannot be read" in r.getMessage()]
    assert len(said) == 1 and "keep the URLs read before" in said[0], said
    assert password not in " ".join(r.getMessage() for r in caplog.records)
