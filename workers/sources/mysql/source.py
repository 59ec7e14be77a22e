"""The `query_mysql` source: guarded SQL on a pooled, reset, read-only PyMySQL session.

Layers (docs/mysql.md): `sqlguard` refuses what is not one plain SELECT; the server
enforces the rest: each call resets the session (COM_RESET_CONNECTION, default schema,
charset, sql_mode), runs inside `START TRANSACTION READ ONLY` ... `ROLLBACK`, under a
tool-owned `SET STATEMENT max_statement_time=N, sql_select_limit=max_rows+1, ...` prefix
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

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import msgspec
import pymysql
import pymysql.cursors
from msgspec import UNSET

from contracts.bounds import DEFAULT_BOUNDS, Bounds
from contracts.mysql import MysqlUpstream
from contracts.requests import QueryMysqlRequest
from contracts.status import ErrorCode
from pipeline.settings import Settings, SettingsError
from workers.sources.base import SourceError
from workers.sources.mysql.clock import clock_statement
from workers.sources.mysql.config import (
    ENV_URL,
    ConfigFile,
    ConnectParams,
    data_source_names,
    diagnostic_names,
    parse_url,
    read_config_file,
)
from workers.sources.mysql.diagnostics import clean_cell
from workers.sources.mysql.errors import Unavailable, error_number, error_text, map_error
from workers.sources.mysql.handoff import Handoff, abandonable, close_quietly
from workers.sources.mysql.leftovers import hide_database
from workers.sources.mysql.reachability import Reachability
from workers.sources.mysql.secret_columns import NO_MASKS, OutputMasks
from workers.sources.mysql.session import Outcome, Pool, execute, kill, lost, stop_query

if TYPE_CHECKING:
    from workers.sources.mysql.sqlguard import Param

__all__ = ["ConnectParams", "MysqlSource", "data_source_names", "parse_url"]

log = logging.getLogger("aci.sources.mysql")


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
        diagnostics: frozenset[str] = frozenset(),
    ) -> None:
        self._pools = {name.lower(): Pool(p, pool_size) for name, p in sources.items()}
        # Data sources whose operator opened the server diagnostic views (off by default).
        self._diagnostics = frozenset(n.lower() for n in diagnostics) & set(self._pools)
        self.diagnostic_sources: tuple[str, ...] = tuple(sorted(self._diagnostics))
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
        self._file: ConfigFile | None = None  # ACI_MYSQL_CONFIG, read again on change
        self._fixed: frozenset[str] = frozenset()  # names an ACI_MYSQL_<NAME>_URL sets (win)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> MysqlSource:
        """Data sources from `ACI_MYSQL_<NAME>_URL` (and the file `ACI_MYSQL_CONFIG`, a TOML or
        JSON mapping name -> URL); timeout from `ACI_MYSQL_STATEMENT_TIMEOUT_MS`, bounded by the
        call deadline `ACI_DEADLINE_S`; the sessions' clock from `ACI_MYSQL_CLOCK`; the data
        sources open to the diagnostic views from `diagnostic_names` (fixed at start)."""
        urls = read_config_file(env["ACI_MYSQL_CONFIG"]) if env.get("ACI_MYSQL_CONFIG") else {}
        for key, value in env.items():
            if m := ENV_URL.match(key):
                urls[m.group(1).lower()] = value
        sources = {name: parse_url(url) for name, url in urls.items()}
        timeout = int(env.get("ACI_MYSQL_STATEMENT_TIMEOUT_MS", "5000"))
        deadline = float(env.get("ACI_DEADLINE_S", "").strip() or Settings().deadline_s)
        clock = env.get("ACI_MYSQL_CLOCK", "").strip() or None
        diagnostics = diagnostic_names(env)
        unknown = sorted(diagnostics - set(sources))
        if unknown:
            raise SettingsError(
                f"diagnostics are turned on for {unknown[0][:64]}, which has no URL"
            )
        # The views are scoped by DATABASE(): with no database in the URL it is NULL and every
        # view would answer "nothing" (NO_EVIDENCE) during an incident.
        unscoped = sorted(n for n in diagnostics if not sources[n].database)
        if unscoped:
            raise SettingsError(
                f"diagnostics are turned on for {unscoped[0][:64]}, whose URL names no database"
            )
        source = cls(
            sources,
            statement_timeout_ms=timeout,
            deadline_s=deadline,
            clock=clock,
            diagnostics=diagnostics,
        )
        if env.get("ACI_MYSQL_CONFIG"):
            source._file = ConfigFile(env["ACI_MYSQL_CONFIG"])
            source._fixed = frozenset(m.group(1).lower() for k in env if (m := ENV_URL.match(k)))
        return source

    def _reread(self) -> None:
        """Apply a changed ACI_MYSQL_CONFIG: a data source whose URL changed (a rotated
        password) connects with the new one from its next call, its idle connections closed.
        Names added or removed take a restart (the tool's data sources are fixed at start)."""
        if self._file is None:
            return
        try:
            table = self._file.changed()
        except (OSError, ValueError) as exc:  # its position only: the text holds passwords
            log.warning(
                "query_mysql: ACI_MYSQL_CONFIG changed but cannot be read (%s); the data "
                "sources keep the URLs read before",
                str(exc).removeprefix("ACI_MYSQL_CONFIG: ") if isinstance(exc, ValueError)
                else type(exc).__name__,
            )  # fmt: skip
            return
        if table is None:
            return
        for name, pool in self._pools.items():
            if name in self._fixed or name not in table:
                continue
            try:
                params = parse_url(table[name])
            except ValueError:
                log.warning("query_mysql: data source %s: its new URL in ACI_MYSQL_CONFIG is "
                            "not a MySQL URL; it keeps the one read before", name)  # fmt: skip
                continue
            if params != pool.params:
                pool.params = params
                pool.close()
                pool.json_columns.clear()
                pool.sees_all_sessions = False
                log.warning("query_mysql: data source %s: its URL in ACI_MYSQL_CONFIG changed; "
                            "its next calls connect with the new one", name)  # fmt: skip
        moved = sorted((set(table) ^ set(self._pools)) - self._fixed)
        if moved:
            log.warning("query_mysql: data sources added to or removed from ACI_MYSQL_CONFIG "
                        "(%s) take a restart of the worker", ", ".join(moved))  # fmt: skip

    def _pool(self, data_source: str) -> Pool:
        pool = self._pools.get(data_source.lower())
        if pool is None:
            names = ", ".join(self.data_sources) or "none configured"
            raise SourceError(ErrorCode.AUTHORIZATION, f"unknown data source; available: {names}")
        return pool

    async def fetch(self, request: QueryMysqlRequest) -> MysqlUpstream:
        """Guard, run and fetch one request; raise `SourceError` on any failure."""
        self._reread()
        pool = self._pool(request.data_source)
        # No schema qualifier is accepted, not even the physical name of this data source's own
        # database: the agent never learns it, and accepting it would confirm a guess of it.
        # On the event loop: sqlglot's compiled parser holds the GIL, so a thread would not
        # free the loop (a crafted 8,000-character statement costs ~40 ms either way; see
        # docs/reliability.md, residual risks). Imported here, not at every worker's start.
        from workers.sources.mysql.sqlguard import guard_sql

        name = request.data_source.lower()
        guarded = guard_sql(
            request.sql,
            list(request.params or []),
            schema=None,
            diagnostics=name in self._diagnostics,
        )
        try:
            upstream = await self._run(
                pool, guarded.text, guarded.params, guarded.tables, True, guarded.masks
            )
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
        if guarded.cleaned:
            upstream = self._cleaned(upstream, guarded.cleaned, pool.params.database)
        return upstream

    def _cleaned(
        self, upstream: MysqlUpstream, cleaned: tuple[tuple[int, str], ...], database: str
    ) -> MysqlUpstream:
        """A diagnostic view's statements and lock tables as `clean_cell` serves them. A text
        cut at the cell bound before its cleaning (which may shorten it below the bound) still
        makes the result `truncated`."""
        cut = False
        rows = []
        for row in upstream.rows:
            row = list(row)
            for index, kind in cleaned:
                if index < len(row):
                    value = row[index]
                    cut = cut or (
                        isinstance(value, str) and len(value) > self._bounds.mysql_cell_chars
                    )
                    row[index] = clean_cell(kind, value, database)
            rows.append(row)
        return msgspec.structs.replace(
            upstream, rows=rows, stopped_early=upstream.stopped_early or cut
        )

    async def _execute_raw(
        self, data_source: str, text: str, *, tool_limit: bool = True
    ) -> MysqlUpstream:
        # Test hook: runs driver text WITHOUT the guard, to prove the server-side layers.
        return await self._run(self._pool(data_source), text, (), (), tool_limit)

    async def _run(
        self,
        pool: Pool,
        text: str,
        params: tuple[Param, ...],
        tables: tuple[str, ...],
        tool_limit: bool,
        masks: OutputMasks = NO_MASKS,
    ) -> MysqlUpstream:
        # A silent server must not hold the call past its deadline: the blocking driver call
        # is abandoned (its thread closes the connection when its socket timeout ends it).
        try:
            with anyio.fail_after(self._deadline_s):
                return await self._run_in_time(pool, text, params, tables, tool_limit, masks)
        except TimeoutError:
            raise SourceError(
                ErrorCode.TIMEOUT, "the query did not finish within its time limit"
            ) from None

    async def _run_in_time(
        self,
        pool: Pool,
        text: str,
        params: tuple[Param, ...],
        tables: tuple[str, ...],
        tool_limit: bool,
        masks: OutputMasks = NO_MASKS,
    ) -> MysqlUpstream:
        read_timeout = self._limit_s + self._grace_s + 1
        connect_timeout = min(5.0, self._deadline_s)
        async with pool.slots:
            reused = bool(pool.idle)
            conn = await self._connection(pool, read_timeout, connect_timeout)
            outcome, killed = await self._attempt(
                pool, conn, text, params, tables, tool_limit, connect_timeout, masks
            )
            if reused and not killed and lost(outcome):
                # The server closed the pooled connection while it was idle (a KILL, its
                # wait_timeout over a quiet night, a failover): the statement never ran. The
                # other idle ones are likely gone too; one fresh connection runs it (a SELECT,
                # so once more is safe), and a server that is really away says so there.
                close_quietly(conn)
                pool.close()
                conn = await self._connection(pool, read_timeout, connect_timeout)
                outcome, killed = await self._attempt(
                    pool, conn, text, params, tables, tool_limit, connect_timeout, masks
                )
            return self._finish(pool, conn, outcome, killed)

    async def _connection(
        self, pool: Pool, read_timeout: float, connect_timeout: float
    ) -> pymysql.Connection[Any]:
        """An idle connection of the pool, else a new one (its failure a `SourceError`)."""
        if pool.idle:
            return pool.idle.pop()
        try:
            return await abandonable(Handoff(), pool.connect, read_timeout, connect_timeout)
        except pymysql.MySQLError as exc:
            raise map_error(error_number(exc), "", pool.params) from None

    async def _attempt(
        self,
        pool: Pool,
        conn: pymysql.Connection[Any],
        text: str,
        params: tuple[Param, ...],
        tables: tuple[str, ...],
        tool_limit: bool,
        connect_timeout: float,
        masks: OutputMasks = NO_MASKS,
    ) -> tuple[Outcome | BaseException, bool]:
        """One run of the statement on `conn` under the watchdog: its outcome (an exception
        as a value) and whether the watchdog killed it."""
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
                    self._limit_s if tool_limit else None, masks,
                )  # fmt: skip
            except Exception as exc:
                outcome = exc
            except anyio.get_cancelled_exc_class():
                await stop_query(pool, conn, connect_timeout)
                raise
            tg.cancel_scope.cancel()
        return outcome, killed

    def _finish(
        self,
        pool: Pool,
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
