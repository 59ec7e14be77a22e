"""The `query_mysql` source: guarded SQL on a pooled, reset, read-only PyMySQL session.

Layers (docs/mysql.md): `sqlguard` refuses what is not one plain SELECT; the server
enforces the rest: each call resets the session (COM_RESET_CONNECTION, default schema,
charset, sql_mode), runs inside `START TRANSACTION READ ONLY` ... `ROLLBACK`, under a
tool-owned `SET STATEMENT max_statement_time=N, sql_select_limit=max_rows+1 FOR` prefix
(MariaDB), and a watchdog KILLs the server session if the call outlives the limit. PyMySQL never
sets CLIENT_MULTI_STATEMENTS, so the server refuses stacked statements. Rows are read unbuffered,
at most `max_rows + 1`, with cells and total bytes bounded.

Errors are `SourceError`: EXECUTION (server rejected the SQL; a fixed text per errno, never the
server's own text, which names schemas, accounts and values), TIMEOUT,
UNAVAILABLE (retryable), AUTHORIZATION (unknown data source or denied object).
"""

from __future__ import annotations

import json
import re
import threading
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar
from urllib.parse import unquote, urlsplit

import anyio
import anyio.to_thread
import msgspec
import pymysql
import pymysql.cursors
from pymysql.constants import FIELD_TYPE

from contracts.bounds import DEFAULT_BOUNDS, Bounds
from contracts.mysql import MysqlUpstream, to_json_cell
from contracts.requests import QueryMysqlRequest
from contracts.status import ErrorCode
from pipeline.settings import Settings
from workers.sources.base import SourceError
from workers.sources.mysql.sqlguard import Param, guard_sql

__all__ = ["ConnectParams", "MysqlSource", "parse_url"]

_ENV_URL: Final = re.compile(r"^ACI_MYSQL_([A-Z][A-Z0-9_]*)_URL$")
_TIMEOUT_CODES: Final = frozenset({1969, 3024, 1317, 1028, 1205})
_UNAVAILABLE_CODES: Final = frozenset(
    {1040, 1042, 1043, 1045, 1049, 1053, 1077, 1152, 1158, 1159, 1160, 1161, 1927, 2002, 2003,
     2005, 2006, 2013, 2014, 2026, 2055, 4031}
)  # fmt: skip
_DENIED_CODES: Final = frozenset({1142, 1143, 1044, 1227, 1370, 1356})
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


class ConnectParams(msgspec.Struct, frozen=True, kw_only=True):
    """Where one data source lives (operator configuration; never shown to the agent)."""

    host: str
    port: int = 3306
    user: str
    password: str = ""
    database: str = ""


def parse_url(url: str) -> ConnectParams:
    """Parse `mysql://user:pass@host:port/db`; raises ValueError without echoing the URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("mysql", "mariadb") or not parts.hostname or not parts.username:
        raise ValueError("a MySQL URL must look like mysql://user:pass@host:port/db")
    return ConnectParams(
        host=parts.hostname,
        port=parts.port or 3306,
        user=unquote(parts.username),
        password=unquote(parts.password or ""),
        database=unquote(parts.path.lstrip("/")),
    )


class _Pool:
    """A few idle connections of one data source; used only from the event loop."""

    def __init__(self, params: ConnectParams, size: int) -> None:
        self.params = params
        self.idle: list[pymysql.Connection[Any]] = []
        self.slots = anyio.Semaphore(size)
        self.json_columns: dict[str, frozenset[str]] = {}

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
            _close_quietly(self.idle.pop())


def _close_quietly(conn: pymysql.Connection[Any]) -> None:
    try:
        conn.close()
    except Exception:
        conn._force_close()


# Server error texts name the physical schema (`FUNCTION db.fn does not exist`), the account,
# the host or stored values: none of it is forwarded. Each errno gets a fixed message; a name is
# echoed only when the caller's own statement contains it (see _echo).
_FUNCTION_CODES: Final = frozenset({1305, 1630, 1318, 1128, 1122, 1123, 1548})
_FIXED_MESSAGES: Final = {
    1052: "a column name is ambiguous; qualify it with its table",
    1055: "a selected column is neither grouped nor aggregated",
    1060: "a column name is used twice",
    1066: "a table or alias is used twice",
    1111: "an aggregate function is used where it is not allowed",
    1139: "a regular expression is invalid or too complex",
    1140: "mixing grouped and non-grouped columns needs GROUP BY",
    1222: "the SELECTs of a UNION have different numbers of columns",
    1235: "this server does not support that construct",
    1241: "an operand has the wrong number of columns",
    1242: "a subquery returned more than one row",
    1248: "every derived table needs an alias",
    1264: "a value is out of range",
    1265: "a value was truncated",
    1292: "a value was truncated or has the wrong type",
    1301: "a result was larger than max_allowed_packet and became NULL",
    1365: "division by zero",
    1366: "a value has the wrong type",
    1582: "a function got the wrong number of arguments",
    1583: "a function got arguments of the wrong kind",
    1690: "a value is out of range",
    4036: "a JSON value is invalid",
    4037: "a JSON value is invalid",
    4038: "a JSON value is invalid",
    4042: "a JSON path is invalid",
}
_FUNCTION_MESSAGE: Final = (
    "unknown function or wrong number of arguments; only pure built-in functions may be called"
)


def _echo(name: str, sent: str) -> str | None:
    """`name` if the caller's statement contains it (so echoing it reveals nothing new)."""
    return name if name and len(name) <= 120 and name in sent else None


def map_error(errno: int, message: str, params: ConnectParams, *, sent: str = "") -> SourceError:
    """Turn a server or driver error into a safe `SourceError`: a fixed text per errno, plus a
    name only when it appears in `sent` (the statement as sent). Never the server's own text."""
    del params  # kept for callers; nothing of the connection is ever echoed
    if errno in _TIMEOUT_CODES:
        return SourceError(ErrorCode.TIMEOUT, "the query hit the time limit and was stopped")
    if errno in _UNAVAILABLE_CODES:
        return SourceError(
            ErrorCode.UNAVAILABLE, "the data source is unavailable; try again later",
            retryable=True,
        )  # fmt: skip
    if errno == 1792:
        return SourceError(ErrorCode.FORBIDDEN_QUERY, "the statement tried to write")
    if errno in _DENIED_CODES:
        return SourceError(ErrorCode.AUTHORIZATION, "permission denied for that object")
    if errno in _FUNCTION_CODES:
        return SourceError(ErrorCode.EXECUTION, _FUNCTION_MESSAGE)
    if errno == 1146:
        m = re.search(r"Table '(?:[^'.]*\.)?([^']*)' doesn't exist", message)
        name = _echo(m.group(1), sent) if m else None
        return SourceError(
            ErrorCode.EXECUTION, f"unknown table `{name}`" if name else "unknown table"
        )
    if errno == 1054:
        m = re.match(r"Unknown column '([^']*)' in '([a-z ]{1,30})'", message, re.I)
        name = _echo(m.group(1), sent) if m else None
        where = f" in '{m.group(2)}'" if m else ""
        return SourceError(
            ErrorCode.EXECUTION, f"unknown column `{name}`{where}" if name else "unknown column"
        )
    if errno == 1064:
        m = re.search(r"near '(.{0,120})' at line (\d+)", message, re.S)
        near = _echo(m.group(1), sent) if m else None
        return SourceError(
            ErrorCode.EXECUTION,
            f"syntax error near '{near}' at line {m[2]}" if near and m else "syntax error",
        )
    fixed = _FIXED_MESSAGES.get(errno, "the server refused the statement")
    return SourceError(ErrorCode.EXECUTION, f"{fixed} (error {errno})")


def _from_config(path: str) -> dict[str, str]:
    raw = Path(path).read_bytes()
    data = tomllib.loads(raw.decode()) if path.endswith(".toml") else json.loads(raw)
    table = data.get("mysql", data) if isinstance(data, dict) else {}
    return {str(k).lower(): str(v) for k, v in table.items() if isinstance(v, str)}


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
    ) -> None:
        self._pools = {name.lower(): _Pool(p, pool_size) for name, p in sources.items()}
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
        call deadline `ACI_DEADLINE_S`."""
        urls = _from_config(env["ACI_MYSQL_CONFIG"]) if env.get("ACI_MYSQL_CONFIG") else {}
        for key, value in env.items():
            if m := _ENV_URL.match(key):
                urls[m.group(1).lower()] = value
        sources = {name: parse_url(url) for name, url in urls.items()}
        timeout = int(env.get("ACI_MYSQL_STATEMENT_TIMEOUT_MS", "5000"))
        deadline = float(env.get("ACI_DEADLINE_S", "").strip() or Settings().deadline_s)
        return cls(sources, statement_timeout_ms=timeout, deadline_s=deadline)

    def _pool(self, data_source: str) -> _Pool:
        pool = self._pools.get(data_source.lower())
        if pool is None:
            names = ", ".join(self.data_sources) or "none configured"
            raise SourceError(ErrorCode.AUTHORIZATION, f"unknown data source; available: {names}")
        return pool

    async def fetch(self, request: QueryMysqlRequest) -> MysqlUpstream:
        """Guard, run and fetch one request; raise `SourceError` on any failure."""
        pool = self._pool(request.data_source)
        guarded = guard_sql(request.sql, list(request.params or []), schema=pool.params.database)
        return await self._run(pool, guarded.text, guarded.params, guarded.tables, True)

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
                    else await _abandonable(_Handoff(), pool.connect, read_timeout, connect_timeout)
                )
            except pymysql.MySQLError as exc:
                raise map_error(_errno(exc), "", pool.params) from None
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
                    outcome = await _abandonable(
                        _Handoff(conn), execute, conn, pool, text, params, tables, self._bounds,
                        self._limit_s if tool_limit else None,
                    )  # fmt: skip
                except Exception as exc:
                    outcome = exc
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
            _close_quietly(conn)
        if killed:
            raise SourceError(ErrorCode.TIMEOUT, "the query hit the time limit and was stopped")
        if isinstance(outcome, SourceError):
            raise outcome
        if isinstance(outcome, pymysql.MySQLError):
            raise map_error(_errno(outcome), _text(outcome), pool.params) from None
        if isinstance(outcome, OSError):
            raise SourceError(
                ErrorCode.UNAVAILABLE, "the data source is unavailable", retryable=True
            ) from None
        if isinstance(outcome, BaseException):
            raise SourceError(ErrorCode.EXECUTION, "the query failed in the driver") from None
        return MysqlUpstream(
            columns=outcome.columns,
            rows=outcome.rows,
            stopped_early=outcome.stopped_early,
        )

    async def aclose(self) -> None:
        """Close every pooled connection."""
        for pool in self._pools.values():
            pool.close()


def _prepare(conn: pymysql.Connection[Any], database: str) -> None:
    """Wipe session state left by the previous call and open a read-only transaction."""
    conn._execute_command(_COM_RESET_CONNECTION, b"")
    conn._read_ok_packet()
    if database:
        conn.select_db(database)
    with conn.cursor() as cur:
        cur.execute(f"SET NAMES utf8mb4, SESSION sql_mode = '{_SQL_MODE}'")
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


def _cell(value: Any, is_json: bool, chars: int) -> Any:
    """A fetched value cut just past the projector's cell bound (so it still sees the cut)."""
    if isinstance(value, bytes | bytearray) and not is_json:
        return value[: (chars * 3) // 4 + 3]
    if isinstance(value, bytes | bytearray):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        if is_json and len(value) <= chars:
            try:
                return msgspec.json.decode(value)
            except msgspec.DecodeError:
                return value
        return value[: chars + 1]
    return value


def _bounded_rows(cur: Any, flags: list[bool], bounds: Bounds) -> tuple[list[list[Any]], bool]:
    """At most max_rows + 1 rows; stop once the projector would certainly be out of bytes."""
    ncols = min(len(flags), bounds.mysql_max_columns)
    encoder = msgspec.json.Encoder()
    rows: list[list[Any]] = []
    used = 0
    while len(rows) <= bounds.mysql_max_rows:
        raw = cur.fetchone()
        if raw is None:
            return rows, False
        row = [to_json_cell(_cell(raw[i], flags[i], bounds.mysql_cell_chars)) for i in range(ncols)]
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
    _prepare(conn, pool.params.database)
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
        raise map_error(_errno(exc), _text(exc), pool.params, sent=sent) from None
    result = cur._result
    fields = list(getattr(result, "fields", None) or ())
    flags = [_is_json(f, pool) for f in fields]
    rows, stopped = _bounded_rows(cur, flags, bounds)
    columns = [str(f.name) for f in fields]
    if result is not None and result.unbuffered_active:
        # More rows remain (an explicit LIMIT above the cap): drop the session, do not drain.
        return Outcome(columns=columns, rows=rows, stopped_early=stopped, reusable=False)
    if result is not None and result.warning_count:
        _raise_warning(conn, pool.params)
    conn.rollback()
    return Outcome(columns=columns, rows=rows, stopped_early=stopped, reusable=True)


def _raise_warning(conn: pymysql.Connection[Any], params: ConnectParams) -> None:
    # A warning means a possibly wrong answer (truncated value, regex limit, NULL from
    # max_allowed_packet): report it rather than return it as evidence.
    with conn.cursor() as cur:
        cur.execute("SHOW WARNINGS")
        for level, code, _message in cur.fetchall():
            if level in ("Warning", "Error"):
                conn.rollback()
                fixed = _FIXED_MESSAGES.get(code, "its answer may be wrong")
                raise SourceError(ErrorCode.EXECUTION, f"the query raised warning {code}: {fixed}")


def kill(pool: _Pool, thread_id: int, connect_timeout: float = 5.0) -> None:
    """Blocking: KILL a session from a fresh connection of the same account."""
    try:
        conn = pool.connect(5.0, connect_timeout)
    except pymysql.MySQLError:
        return
    try:
        with conn.cursor() as cur:
            cur.execute(f"KILL CONNECTION {int(thread_id)}")
    except pymysql.MySQLError:
        pass
    finally:
        _close_quietly(conn)


_T = TypeVar("_T")


class _Handoff:
    """Who closes the connection of a driver call the event loop stopped waiting for: the
    thread when it ends after the loop left, or the loop when the thread had already ended."""

    def __init__(self, conn: pymysql.Connection[Any] | None = None) -> None:
        self.conn = conn
        self._lock = threading.Lock()
        self._done = self._abandoned = False

    def finished(self, result: object) -> None:
        """In the thread, as the driver call ends."""
        with self._lock:
            self._done = True
            if isinstance(result, pymysql.Connection):
                self.conn = result
            if not self._abandoned:
                return
        if self.conn is not None:
            _close_quietly(self.conn)

    def abandon(self) -> None:
        """In the loop, as it stops waiting."""
        with self._lock:
            self._abandoned = True
            if not self._done:
                return
        if self.conn is not None:
            _close_quietly(self.conn)


async def _abandonable(handoff: _Handoff, fn: Callable[..., _T], *args: Any) -> _T:
    # A blocking driver call in a thread that a cancel (the deadline) stops waiting for.
    def work() -> _T:
        result: object = None
        try:
            result = fn(*args)
            return result
        finally:
            handoff.finished(result)

    try:
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        handoff.abandon()
        raise


def _errno(exc: BaseException) -> int:
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else 0


def _text(exc: BaseException) -> str:
    args: tuple[Any, ...] = tuple(getattr(exc, "args", ()))
    return str(args[1]) if len(args) > 1 else ""
