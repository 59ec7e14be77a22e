"""What is left around a query's rows, for `source.execute`: the physical database name taken
out of EXPLAIN's cells, the rest of a cut result drained (so its connection is kept), and the
server's warnings sorted into errors and notes.
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec
import pymysql

from contracts.mysql import MysqlUpstream
from contracts.status import ErrorCode
from workers.sources.base import SourceError
from workers.sources.mysql.errors import value_changing, warning_error, warning_text

__all__ = ["MAX_WARNINGS", "STOPPED_CODES", "drained", "hide_database", "server_warnings"]

_DRAIN_ROWS: Final = 5_000  # rows of a cut result read and dropped to keep its connection
_DRAIN_BYTES: Final = 4 << 20  # and bytes: past them a new connection is cheaper
# The warnings of one statement the server keeps for SHOW WARNINGS (its `max_error_count`,
# set per statement by the tool; the server's default is 64).
MAX_WARNINGS: Final = 10_000
# How a statement the tool stopped ends (its KILL QUERY, its time limit): not about a value.
STOPPED_CODES: Final = frozenset({1317, 1969})


def hide_database(upstream: MysqlUpstream, database: str) -> MysqlUpstream:
    """EXPLAIN's output with the physical database name taken out of its cells: MariaDB's
    `ref` column says `<db>.i.order_id` for a join, and the agent never learns that name."""
    if not database:
        return upstream
    qualified = re.compile(r"(?<![\w$])" + re.escape(database) + r"\.")
    rows = [
        [qualified.sub("", c) if isinstance(c, str) else c for c in row] for row in upstream.rows
    ]
    return msgspec.structs.replace(upstream, rows=rows)


def drained(cur: Any) -> bool:
    """Read and drop what is left of a cut result, up to `_DRAIN_ROWS` rows and `_DRAIN_BYTES`
    bytes: a truncated result keeps its connection (a new one costs a connect and a reset,
    ~40 ms) unless far more remains than was shown. Without the byte bound, 5,000 rows of
    1 MB (`SELECT body FROM documents LIMIT 10000`) were read until the statement's time
    limit, and the call answered TIMEOUT instead of the rows it had."""
    conn = cur.connection
    start = getattr(conn, "received", 0)
    for _ in range(_DRAIN_ROWS):
        if cur.fetchone() is None:
            return True
        if getattr(conn, "received", 0) - start > _DRAIN_BYTES:
            return False
    return False


def server_warnings(conn: pymysql.Connection[Any], count: int | None) -> list[str]:
    """The server's warnings on the query: one that cuts or corrupts a value (a truncated
    value, a regex limit, NULL from max_allowed_packet) is raised as an error rather than
    returned as evidence; the others (1365: a division by zero answered NULL, 1052: a
    ROLLUP alias clash) come back as `warning N: text`, for the Control View and the model.
    `count` is the statement's number of warnings: when the server lists fewer (it keeps at
    most `max_error_count`), the unlisted ones may cut a value, so the call fails. Before, 64
    divisions by zero (the server's default list) hid a 1292 after them, and a SUM that
    counted 'zz' as 0 came back as evidence with the note "division by zero". `count` None:
    a statement the tool stopped (`session._stopped`), whose count the server never sent; a
    full list then counts as more than it lists."""
    said: list[str] = []
    with conn.cursor() as cur:
        cur.execute("SHOW WARNINGS")
        listed = cur.fetchall()
    if len(listed) >= MAX_WARNINGS if count is None else len(listed) < count:
        conn.rollback()
        raised = f" ({count})" if count is not None else ""
        raise SourceError(
            ErrorCode.EXECUTION,
            f"the query raised more warnings{raised} than the server lists "
            f"({len(listed)}), so a value may be wrong; narrow the query",
        )
    for level, code, _message in listed:
        if level not in ("Warning", "Error") or (count is None and code in STOPPED_CODES):
            continue
        if value_changing(code):
            conn.rollback()
            raise warning_error(code)
        text = warning_text(code)
        if text not in said:
            said.append(text)
    return said
