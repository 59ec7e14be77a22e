"""What runs on one connection of a `query_mysql` data source, in a driver thread: the
session reset, the time-limited read-only statement, the bounded fetch, `KILL`.

`Pool` holds a data source's idle connections (used from the event loop only); `execute`
runs one call on one of them; `lost` tells a connection the server closed while it was idle
from a refusal; `kill` and `stop_query` end a session or its statement from another
connection. The source around them (`source.MysqlSource`) owns deadlines and retries.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.to_thread
import msgspec
import pymysql
import pymysql.cursors
from pymysql.constants import FIELD_TYPE

from contracts.bounds import Bounds
from contracts.mysql import to_json_cell
from contracts.status import ErrorCode
from workers.masking import MASK
from workers.sources.base import SourceError
from workers.sources.logs.masking import log_secret_name, without_log_secrets
from workers.sources.mysql.config import ConnectParams
from workers.sources.mysql.errors import error_number, error_text, map_error
from workers.sources.mysql.handoff import close_quietly
from workers.sources.mysql.leftovers import (
    MAX_WARNINGS,
    STOPPED_CODES,
    drained,
    server_warnings,
)
from workers.sources.mysql.secret_columns import NO_MASKS, OutputMasks
from workers.sources.mysql.wire import BoundedConnection

if TYPE_CHECKING:
    from workers.sources.mysql.sqlguard import Param

__all__ = ["Outcome", "Pool", "execute", "kill", "lost", "stop_query"]

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


class Pool:
    """A few idle connections of one data source; used only from the event loop."""

    def __init__(self, params: ConnectParams, size: int) -> None:
        self.params = params
        self.idle: list[pymysql.Connection[Any]] = []
        self.slots = anyio.Semaphore(size)
        self.json_columns: dict[str, frozenset[str]] = {}
        self.clock_sql = ""  # `clock_statement`, run at the start of every call
        self.sees_all_sessions = False  # its account has PROCESS (checked until it has)

    def connect(self, read_timeout: float, connect_timeout: float = 5.0) -> pymysql.Connection[Any]:
        p = self.params
        return BoundedConnection(
            host=p.host, port=p.port, user=p.user, password=p.password,
            database=p.database or None, charset="utf8mb4", autocommit=True,
            connect_timeout=connect_timeout, read_timeout=read_timeout,
            write_timeout=read_timeout, local_infile=False, client_flag=0,
        )  # fmt: skip

    def close(self) -> None:
        while self.idle:
            close_quietly(self.idle.pop())


# The driver's "the connection is gone" (server gone away, lost during a query) and a socket
# error without a number: what an idle connection the server closed answers its first command.
_LOST_CODES: Final = frozenset({0, 2006, 2013})


def lost(outcome: object) -> bool:
    """Whether `outcome` says the connection was gone before it answered (not a refusal)."""
    if isinstance(outcome, pymysql.err.InterfaceError | OSError):
        return True
    return isinstance(outcome, pymysql.MySQLError) and error_number(outcome) in _LOST_CODES


def _prepare(conn: pymysql.Connection[Any], database: str, clock_sql: str = "") -> None:
    """Wipe session state left by the previous call, pin the clock (`clock_statement`), the
    escaping rules and the isolation level, and open a read-only transaction."""
    conn._execute_command(_COM_RESET_CONNECTION, b"")
    conn._read_ok_packet()
    if database:
        conn.select_db(database)
    with conn.cursor() as cur:
        if clock_sql:
            cur.execute(clock_sql)
        # REPEATABLE READ whatever the server's default: under SERIALIZABLE every plain SELECT
        # of a transaction takes shared locks, and a writer waited for the call's reads (its
        # UPDATE timed out, 1205, while the call ran).
        cur.execute(
            f"SET NAMES utf8mb4, SESSION sql_mode = '{_SQL_MODE}', "
            "SESSION tx_isolation = 'REPEATABLE-READ'"
        )
        cur.execute("START TRANSACTION READ ONLY")


def _load_json_columns(conn: pymysql.Connection[Any], pool: Pool, tables: tuple[str, ...]) -> None:
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


def _check_process(conn: pymysql.Connection[Any], pool: Pool, tables: tuple[str, ...]) -> None:
    """A process list read without PROCESS shows the account's own sessions only, silently
    (during a pool exhaustion: "one session"): a failure, not evidence. The server says
    whether the account has it by refusing INNODB_TRX (1227)."""
    if pool.sees_all_sessions or "information_schema.processlist" not in tables:
        return
    with conn.cursor() as cur:
        try:
            # Not `LIMIT 0` or `WHERE 0`: the server skips the privilege check for those.
            cur.execute("SELECT COUNT(*) FROM information_schema.INNODB_TRX")
            cur.fetchall()
        except pymysql.MySQLError as exc:
            if error_number(exc) != 1227:
                raise
            raise SourceError(
                ErrorCode.AUTHORIZATION,
                "this data source's account may not see other sessions (no PROCESS "
                "privilege), so its process list would show only its own",
            ) from None
    pool.sees_all_sessions = True


def _is_json(field: Any, pool: Pool) -> bool:
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


def _cell(value: Any, is_json: bool, chars: int, secret: int = 0) -> Any:
    """A fetched value cut just past the projector's cell bound (so it still sees the cut), a
    text masked (`***`) whole under a secret column's name (`secret` 1), any value but NULL
    of an expression over one (2, `secret_columns`), a statement the source cleans kept raw
    (3), else by `without_log_secrets`."""
    if secret == 3 and isinstance(value, str):
        # A statement read raw: masking by shape first can take quotes out of it (`password="`
        # to the next `"`) and turn the literals after into code; `clean_cell` masks after.
        return value[: chars + 1]
    if secret == 2 and value is not None:
        return MASK if not isinstance(value, str | bytes | bytearray) or len(value) else value
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
    cur: Any, flags: list[bool], bounds: Bounds, secrets: list[int]
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
    pool: Pool,
    text: str,
    params: tuple[Param, ...],
    tables: tuple[str, ...],
    bounds: Bounds,
    limit_s: float | None,
    masks: OutputMasks = NO_MASKS,
) -> Outcome:
    """Blocking: one reset, read-only, time-limited call on `conn` (runs in a worker thread).
    `masks`: the output columns the guard found reading a secret under another name."""
    # A value of a row over 16 MiB is read up to what `_cell` can use (`wire`), in bytes.
    conn.value_bytes = (bounds.mysql_cell_chars + _MASKED_PAST) * 4 + 4
    _prepare(conn, pool.params.database, pool.clock_sql)
    _load_json_columns(conn, pool, tables)
    _check_process(conn, pool, tables)
    if limit_s is not None:
        text = (
            f"SET STATEMENT max_statement_time={limit_s:.3f}, "
            f"sql_select_limit={bounds.mysql_max_rows + 1}, "
            f"max_error_count={MAX_WARNINGS} FOR {text}"
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
    columns = [str(f.name) for f in fields]
    modes = masks.modes(columns)
    secrets = [
        m if m == 3 else max(m, int(_secret_column(f))) for m, f in zip(modes, fields, strict=True)
    ]
    rows, stopped = _bounded_rows(cur, flags, bounds, secrets)
    warnings: list[str] = []
    if result is not None and result.unbuffered_active and not drained(cur):
        # Much more remains (an explicit LIMIT far above the cap, large rows): the statement is
        # stopped, so its warnings about the rows shown can be read. Before, the session was
        # closed unread: `CAST('zz' AS SIGNED)` in a shown row came back as 0, no warning.
        if not _stopped(pool, conn, cur):
            result.unbuffered_active = False
            conn._force_close()  # PyMySQL's cursor, once dropped, would read all of the rest
            raise SourceError(
                ErrorCode.EXECUTION,
                "the rest of the result could not be stopped to read the query's warnings, "
                "so a value may be wrong; add a LIMIT",
            )
        warnings = server_warnings(conn, None)
    elif result is not None and result.warning_count:
        warnings = server_warnings(conn, result.warning_count)
    conn.rollback()
    return Outcome(
        columns=columns, rows=rows, stopped_early=stopped, reusable=True, warnings=warnings
    )


# What a stopped statement may still send (the socket buffers, a large row) before it ends.
_STOP_BYTES: Final = 64 << 20


def _stopped(pool: Pool, conn: pymysql.Connection[Any], cur: Any) -> bool:
    """`KILL QUERY` the statement whose result is being read from another connection, and read
    and drop what the server had sent before it stopped: whether it ended (with the kill's
    1317, its time limit's 1969, or its last row), the connection then in step for SHOW
    WARNINGS."""
    if not kill(pool, conn.thread_id(), 5.0, "QUERY"):
        return False  # (no connection to spare: the account's limit) rather than read it all
    start = conn.received
    try:
        # Packets, not rows: what was sent before the kill (~4 MB, the server's socket buffer:
        # measured 450,000 small rows, 0.5 s; through the cursor, 0.9 s).
        while not conn._read_packet().is_eof_packet():
            if conn.received - start > _STOP_BYTES:
                return False
    except pymysql.MySQLError as exc:
        if error_number(exc) not in STOPPED_CODES:
            raise
    cur._result.unbuffered_active = False
    return True


async def stop_query(pool: Pool, conn: pymysql.Connection[Any], connect_timeout: float) -> None:
    # The call was cancelled (its caller cancelled it, or its deadline passed) while the server
    # ran its statement: `KILL QUERY` from another connection frees the server thread at once
    # (the abandoned driver thread then sees the error and closes its connection). Shielded and
    # bounded, so a cancel never waits on a server that does not answer.
    with anyio.CancelScope(shield=True), anyio.move_on_after(connect_timeout):
        await anyio.to_thread.run_sync(
            kill, pool, conn.thread_id(), connect_timeout, "QUERY", abandon_on_cancel=True
        )


def kill(
    pool: Pool, thread_id: int, connect_timeout: float = 5.0, what: str = "CONNECTION"
) -> bool:
    """Blocking: KILL a session (`what`: CONNECTION) or its statement (QUERY) from a fresh
    connection of the same account; whether the server took the KILL."""
    try:
        conn = pool.connect(5.0, connect_timeout)
    except (pymysql.MySQLError, OSError):
        return False
    try:
        with conn.cursor() as cur:
            cur.execute(f"KILL {'QUERY' if what == 'QUERY' else 'CONNECTION'} {int(thread_id)}")
        return True
    except pymysql.MySQLError:
        return False
    finally:
        close_quietly(conn)
