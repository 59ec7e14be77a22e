"""The `query_mysql` source: guarded SQL on a pooled, reset, read-only PyMySQL session.

Layers (docs/mysql.md): `sqlguard` refuses what is not one plain SELECT; the server
enforces the rest: each call resets the session (COM_RESET_CONNECTION, default schema,
charset, sql_mode), runs inside `START TRANSACTION READ ONLY` ... `ROLLBACK`, under a
tool-owned `SET STATEMENT max_statement_time=N, sql_select_limit=max_rows+1 FOR` prefix
(MariaDB), and a watchdog KILLs the server session if the call outlives the limit. PyMySQL never
sets CLIENT_MULTI_STATEMENTS, so the server refuses stacked statements. Rows are read unbuffered,
at most `max_rows + 1`, with cells and total bytes bounded.

Errors are `SourceError`: EXECUTION (server rejected the SQL; a fixed text per errno, never the
server's own text, which names schemas, accounts and values: `errors.py`), TIMEOUT,
UNAVAILABLE (retryable), AUTHORIZATION (unknown data source or denied object). A driver call
runs in a thread the deadline can abandon; `handoff.py` decides who closes its connection.

`ACI_MYSQL_CLOCK` pins every session's `NOW()` (`clock.py`). Unset: the server's clock.
A data source that stops answering is logged per change of state, not per call (`reachability`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.to_thread
import msgspec
import pymysql
import pymysql.cursors
from msgspec import UNSET
from pymysql.constants import FIELD_TYPE

from contracts.bounds import DEFAULT_BOUNDS, Bounds
from contracts.mysql import MysqlUpstream, to_json_cell
from contracts.requests import QueryMysqlRequest
from contracts.status import ErrorCode
from pipeline.settings import Settings
from workers.masking import MASK
from workers.sources.base import SourceError
from workers.sources.logs.masking import log_secret_name, without_log_secrets
from workers.sources.mysql.clock import clock_statement
from workers.sources.mysql.config import (
    ENV_URL,
    ConnectParams,
    data_source_names,
    parse_url,
    read_config_file,
)
from workers.sources.mysql.errors import Unavailable, error_number, error_text, map_error
from workers.sources.mysql.handoff import Handoff, abandonable, close_quietly
from workers.sources.mysql.leftovers import drained, hide_database, server_warnings
from workers.sources.mysql.reachability import Reachability

if TYPE_CHECKING:
    from workers.sources.mysql.sqlguard import Param

__all__ = ["ConnectParams", "MysqlSource", "data_source_names", "parse_url"]

_COM_RESET_CONNECTION: Final = 0x1F
_SQL_MODE: Final = "STRICT_ALL_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"
_CELL_SLACK: Final = 8  # bytes a fetched cell may exceed its projected form (see _bounded_rows)
_JSON_CHECK: Final = re.compile(r"json_valid\(`?([^`)]+)`?\)", re.I)


class Outcome(msgspec.Struct, kw_only=True):
    """What one call fetched, and whether its connection is clean enough to reuse."""

    columns: list[str]
    rows: list[list[Any]]
    stopped_early: bool
    reusable: bool
    warnings: list[str] = msgspec.field(default_factory=list)


class _Pool:
    """A few idle connections of one data source; used only from the event loop."""

    def __init__(self, params: ConnectParams, size: int) -> None:
        self.params = params
        self.idle: list[pymysql.Connection[Any]] = []
        self.slots = anyio.Semaphore(size)
        self.json_columns: dict[str, frozenset[str]] = {}
        self.clock_sql = ""  # `clock_statement`, run at the start of every call

    def connect(self, read_timeout: float, connect_timeout: float = 5.0) -> pymysql.Connection[Any]:
        p = self.params
        return pymysql.connect(
            host=p.host, port=p.port, user=p.user, password=p.password,
            database=p.database or None, charset="utf8mb4", autocommit=True,
            connect_timeout=connect_timeout, read_timeout=read_timeout,
            write_timeout=read_timeout, local_infile=False, client_flag=0,
        )  # fmt: skip

    def close(self) -> None:
        while self.idle:
            close_quietly(self.idle.pop())


class MysqlSource:
    """Runs `query_mysql` requests against the configured data sources."""

    def __init__(
        self,
        sources: Mapping[str, ConnectParams],
        *,
        statement_timeout_ms: int = 5000,
        bounds: Bounds = DEFAULT_BOUNDS,
        pool_size: int = 4,
        kill_grace_s: float = 1.0,
        deadline_s: float = Settings().deadline_s,
        clock: str | None = None,
    ) -> None:
        self._pools = {name.lower(): _Pool(p, pool_size) for name, p in sources.items()}
        self._reach = Reachability()
        clock_sql = clock_statement(clock)
        for pool in self._pools.values():
            pool.clock_sql = clock_sql
        self.data_sources: tuple[str, ...] = tuple(sorted(self._pools))
        # Every wait is derived from the call's deadline: the statement limit, the driver's
        # socket timeouts, and the whole call (which stops waiting for the driver's thread).
        self._deadline_s = deadline_s
        self._limit_s = min(max(statement_timeout_ms, 1) / 1000, deadline_s)
        self._grace_s = kill_grace_s
        self._bounds = bounds

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> MysqlSource:
        """Data sources from `ACI_MYSQL_<NAME>_URL` (and the file `ACI_MYSQL_CONFIG`, a TOML or
        JSON mapping name -> URL); timeout from `ACI_MYSQL_STATEMENT_TIMEOUT_MS`, bounded by the
        call deadline `ACI_DEADLINE_S`; the sessions' clock from `ACI_MYSQL_CLOCK`."""
        urls = read_config_file(env["ACI_MYSQL_CONFIG"]) if env.get("ACI_MYSQL_CONFIG") else {}
        for key, value in env.items():
            if m := ENV_URL.match(key):
                urls[m.group(1).lower()] = value
        sources = {name: parse_url(url) for name, url in urls.items()}
        timeout = int(env.get("ACI_MYSQL_STATEMENT_TIMEOUT_MS", "5000"))
        deadline = float(env.get("ACI_DEADLINE_S", "").strip() or Settings().deadline_s)
        clock = env.get("ACI_MYSQL_CLOCK", "").strip() or None
        return cls(sources, statement_timeout_ms=timeout, deadline_s=deadline, clock=clock)

    def _pool(self, data_source: str) -> _Pool:
        pool = self._pools.get(data_source.lower())
        if pool is None:
            names = ", ".join(self.data_sources) or "none configured"
            raise SourceError(ErrorCode.AUTHORIZATION, f"unknown data source; available: {names}")
        return pool

    async def fetch(self, request: QueryMysqlRequest) -> MysqlUpstream:
        """Guard, run and fetch one request; raise `SourceError` on any failure."""
        pool = self._pool(request.data_source)
        # No schema qualifier is accepted, not even the physical name of this data source's own
        # database: the agent never learns it, and accepting it would confirm a guess of it.
        # On the event loop: sqlglot's compiled parser holds the GIL, so a thread would not
        # free the loop (a crafted 8,000-character statement costs ~40 ms either way; see
        # docs/reliability.md, residual risks). Imported here, not at every worker's start.
        from workers.sources.mysql.sqlguard import guard_sql

        guarded = guard_sql(request.sql, list(request.params or []), schema=None)
        name = request.data_source.lower()
        try:
            upstream = await self._run(pool, guarded.text, guarded.params, guarded.tables, True)
        except Unavailable as error:
            self._reach.down(name, error)
            raise
        except SourceError as error:
            if error.code is not ErrorCode.TIMEOUT:  # it answered (a refusal is an answer)
                self._reach.up(name)
            raise
        self._reach.up(name)
        if guarded.kind == "explain":
            upstream = hide_database(upstream, pool.params.database)
        return upstream

    async def _execute_raw(
        self, data_source: str, text: str, *, tool_limit: bool = True
    ) -> MysqlUpstream:
        # Test hook: runs driver text WITHOUT the guard, to prove the server-side layers.
        return await self._run(self._pool(data_source), text, (), (), tool_limit)

    async def _run(
        self,
        pool: _Pool,
        text: str,
        params: tuple[Param, ...],
        tables: tuple[str, ...],
        tool_limit: bool,
    ) -> MysqlUpstream:
        # A silent server must not hold the call past its deadline: the blocking driver call
        # is abandoned (its thread closes the connection when its socket timeout ends it).
        try:
            with anyio.fail_after(self._deadline_s):
                return await self._run_in_time(pool, text, params, tables, tool_limit)
        except TimeoutError:
            raise SourceError(
                ErrorCode.TIMEOUT, "the query did not finish within its time limit"
            ) from None

    async def _run_in_time(
        self,
        pool: _Pool,
        text: str,
        params: tuple[Param, ...],
        tables: tuple[str, ...],
        tool_limit: bool,
    ) -> MysqlUpstream:
        read_timeout = self._limit_s + self._grace_s + 1
        connect_timeout = min(5.0, self._deadline_s)
        async with pool.slots:
            try:
                conn = (
                    pool.idle.pop()
                    if pool.idle
                    else await abandonable(Handoff(), pool.connect, read_timeout, connect_timeout)
                )
            except pymysql.MySQLError as exc:
                raise map_error(error_number(exc), "", pool.params) from None
            killed = False

            async def watchdog() -> None:
                nonlocal killed
                await anyio.sleep(self._limit_s + self._grace_s)
                killed = True
                await anyio.to_thread.run_sync(
                    kill, pool, conn.thread_id(), connect_timeout, abandon_on_cancel=True
                )

            outcome: Outcome | BaseException
            async with anyio.create_task_group() as tg:
                tg.start_soon(watchdog)
                try:
                    outcome = await abandonable(
                        Handoff(conn), execute, conn, pool, text, params, tables, self._bounds,
                        self._limit_s if tool_limit else None,
                    )  # fmt: skip
                except Exception as exc:
                    outcome = exc
                except anyio.get_cancelled_exc_class():
                    await _stop_query(pool, conn, connect_timeout)
                    raise
                tg.cancel_scope.cancel()
            return self._finish(pool, conn, outcome, killed)

    def _finish(
        self,
        pool: _Pool,
        conn: pymysql.Connection[Any],
        outcome: Outcome | BaseException,
        killed: bool,
    ) -> MysqlUpstream:
        if isinstance(outcome, Outcome) and outcome.reusable and not killed:
            pool.idle.append(conn)
        else:
            close_quietly(conn)
        if killed:
            raise SourceError(ErrorCode.TIMEOUT, "the query hit the time limit and was stopped")
        if isinstance(outcome, SourceError):
            raise outcome
        if isinstance(outcome, pymysql.MySQLError):
            raise map_error(error_number(outcome), error_text(outcome), pool.params) from None
        if isinstance(outcome, OSError):
            raise Unavailable(0) from None
        if isinstance(outcome, BaseException):
            raise SourceError(ErrorCode.EXECUTION, "the query failed in the driver") from None
        return MysqlUpstream(
            columns=outcome.columns,
            rows=outcome.rows,
            stopped_early=outcome.stopped_early,
            warnings=outcome.warnings or UNSET,
        )

    async def aclose(self) -> None:
        """Close every pooled connection."""
        for pool in self._pools.values():
            pool.close()


def _prepare(conn: pymysql.Connection[Any], database: str, clock_sql: str = "") -> None:
    """Wipe session state left by the previous call, pin the clock (`clock_statement`) and
    open a read-only transaction."""
    conn._execute_command(_COM_RESET_CONNECTION, b"")
    conn._read_ok_packet()
    if database:
        conn.select_db(database)
    with conn.cursor() as cur:
        cur.execute(f"SET NAMES utf8mb4, SESSION sql_mode = '{_SQL_MODE}'")
        if clock_sql:
            cur.execute(clock_sql)
        cur.execute("START TRANSACTION READ ONLY")


def _load_json_columns(conn: pymysql.Connection[Any], pool: _Pool, tables: tuple[str, ...]) -> None:
    # MariaDB reports JSON columns as LONGTEXT; its json_valid() CHECK marks them.
    missing = [t for t in tables if t not in pool.json_columns and "." not in t]
    if not missing:
        return
    found: dict[str, set[str]] = {t: set() for t in missing}
    with conn.cursor() as cur:
        cur.execute(
            "SELECT LOWER(TABLE_NAME), CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS "
            "WHERE CONSTRAINT_SCHEMA = DATABASE() AND LOWER(TABLE_NAME) IN %s",
            (missing,),
        )
        for table, clause in cur.fetchall():
            found.setdefault(table, set()).update(_JSON_CHECK.findall(clause))
    for table, cols in found.items():
        pool.json_columns[table] = frozenset(cols)


def _is_json(field: Any, pool: _Pool) -> bool:
    if field.type_code == FIELD_TYPE.JSON:
        return True
    cols = pool.json_columns.get(str(field.org_table or "").lower())
    return cols is not None and field.org_name in cols


def _secret_column(field: Any) -> bool:
    """Whether a result column holds a secret, by the name of the column it reads (`SELECT
    password AS p`), or its label when it reads none (an expression: `... AS api_token`)."""
    return log_secret_name(str(field.org_name or "") or str(field.name))


# Text past the cell bound that masking still reads, so a secret cut by the bound is masked by
# its whole shape (a token, a URL's password) before the cut
_MASKED_PAST: Final = 4096


def _cell(value: Any, is_json: bool, chars: int, secret: bool = False) -> Any:
    """A fetched value cut just past the projector's cell bound (so it still sees the cut), a
    text masked (`***`) whole under a secret column's name, else by `without_log_secrets`."""
    if secret and isinstance(value, str | bytes | bytearray):
        return MASK if len(value) else value
    if isinstance(value, bytes | bytearray) and not is_json:
        return value[: (chars * 3) // 4 + 3]
    if isinstance(value, bytes | bytearray):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        value = without_log_secrets(value[: chars + _MASKED_PAST])
        if is_json and len(value) <= chars:
            try:
                return msgspec.json.decode(value)
            except msgspec.DecodeError:
                return value
        return value[: chars + 1]
    return value


def _bounded_rows(
    cur: Any, flags: list[bool], bounds: Bounds, secrets: list[bool]
) -> tuple[list[list[Any]], bool]:
    """At most max_rows + 1 rows; stop once the projector would certainly be out of bytes."""
    ncols = min(len(flags), bounds.mysql_max_columns)
    encoder = msgspec.json.Encoder()
    rows: list[list[Any]] = []
    used = 0
    while len(rows) <= bounds.mysql_max_rows:
        raw = cur.fetchone()
        if raw is None:
            return rows, False
        row = [
            to_json_cell(_cell(raw[i], flags[i], bounds.mysql_cell_chars, secrets[i]))
            for i in range(ncols)
        ]
        rows.append(row)
        used += len(encoder.encode(row)) + 1 - _CELL_SLACK * ncols
        if used > bounds.mysql_max_bytes:
            return rows, True
    return rows, False


def execute(
    conn: pymysql.Connection[Any],
    pool: _Pool,
    text: str,
    params: tuple[Param, ...],
    tables: tuple[str, ...],
    bounds: Bounds,
    limit_s: float | None,
) -> Outcome:
    """Blocking: one reset, read-only, time-limited call on `conn` (runs in a worker thread)."""
    _prepare(conn, pool.params.database, pool.clock_sql)
    _load_json_columns(conn, pool, tables)
    if limit_s is not None:
        text = (
            f"SET STATEMENT max_statement_time={limit_s:.3f}, "
            f"sql_select_limit={bounds.mysql_max_rows + 1} FOR {text}"
        )
    cur = conn.cursor(pymysql.cursors.SSCursor)
    try:
        cur.execute(text, params)
    except pymysql.MySQLError as exc:
        sent = str(getattr(cur, "_executed", None) or text)
        raise map_error(error_number(exc), error_text(exc), pool.params, sent=sent) from None
    result = cur._result
    fields = list(getattr(result, "fields", None) or ())
    flags = [_is_json(f, pool) for f in fields]
    rows, stopped = _bounded_rows(cur, flags, bounds, [_secret_column(f) for f in fields])
    columns = [str(f.name) for f in fields]
    if result is not None and result.unbuffered_active and not drained(cur):
        # Many more rows remain (an explicit LIMIT far above the cap): drop the session rather
        # than read them all; a few are read and dropped, so the connection is kept.
        return Outcome(columns=columns, rows=rows, stopped_early=stopped, reusable=False)
    warnings: list[str] = []
    if result is not None and result.warning_count:
        warnings = server_warnings(conn)
    conn.rollback()
    return Outcome(
        columns=columns, rows=rows, stopped_early=stopped, reusable=True, warnings=warnings
    )


async def _stop_query(pool: _Pool, conn: pymysql.Connection[Any], connect_timeout: float) -> None:
    # The call was cancelled (its caller cancelled it, or its deadline passed) while the server
    # ran its statement: `KILL QUERY` from another connection frees the server thread at once
    # (the abandoned driver thread then sees the error and closes its connection). Shielded and
    # bounded, so a cancel never waits on a server that does not answer.
    with anyio.CancelScope(shield=True), anyio.move_on_after(connect_timeout):
        await anyio.to_thread.run_sync(
            kill, pool, conn.thread_id(), connect_timeout, "QUERY", abandon_on_cancel=True
        )


def kill(
    pool: _Pool, thread_id: int, connect_timeout: float = 5.0, what: str = "CONNECTION"
) -> None:
    """Blocking: KILL a session (`what`: CONNECTION) or its statement (QUERY) from a fresh
    connection of the same account."""
    try:
        conn = pool.connect(5.0, connect_timeout)
    except pymysql.MySQLError:
        return
    try:
        with conn.cursor() as cur:
            cur.execute(f"KILL {'QUERY' if what == 'QUERY' else 'CONNECTION'} {int(thread_id)}")
    except pymysql.MySQLError:
        pass
    finally:
        close_quietly(conn)
