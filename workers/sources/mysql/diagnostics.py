"""The server diagnostic views `query_mysql` reads for a data source whose operator opted in
(`diagnostics = true`, docs/mysql.md "Diagnostic views"): who holds connections and locks.

Pure policy, used by `sqlguard` (which views, how each is scoped, which columns are never read)
and by `source` (what a SQL text or lock-table cell is served as):

- `information_schema.PROCESSLIST` is scoped like the schema views: a top-level
  `[alias.]DB = DATABASE()` term in its SELECT's WHERE.
- `INNODB_TRX`, `INNODB_LOCK_WAITS` and `INNODB_LOCKS` are server-wide tables with no schema
  column, so each must be inner-joined, by a top-level WHERE equality, to a source of the same
  SELECT that is itself scoped: a transaction to a PROCESSLIST row (`trx_mysql_thread_id =
  ID`), a wait or a lock to a transaction (`requesting_trx_id`/`blocking_trx_id`/`lock_trx_id
  = trx_id`). Every row that reaches the select list then belongs to a session whose default
  schema is this data source's.
- Columns naming accounts, hosts or the physical schema (`USER`, `HOST`, `DB`), raw bytes of
  a statement (`INFO_BINARY`), locked key values (`lock_data`) and a foreign-key error text
  (values and schema names) are never read. The statements (`INFO`, `trx_query`) and
  `lock_table` are read only as plain select-list columns of the top SELECT, and served
  cleaned: literals as `?` (the slow log's `sql_template`), secrets masked as in logs, this
  data source's schema name taken out.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "ANCHORED_VIEWS",
    "CLEANED_COLUMNS",
    "HIDDEN_COLUMNS",
    "NOT_SHOWN",
    "OTHER_SCHEMA",
    "SCOPED_VIEWS",
    "THIS_SCHEMA",
    "clean_cell",
    "show_hint",
]

# View -> the column that must be `= DATABASE()` (a top-level WHERE term).
SCOPED_VIEWS: Final = {"PROCESSLIST": "DB"}
# View -> (its columns that may carry the join, the view it must join, that view's column).
ANCHORED_VIEWS: Final = {
    "INNODB_TRX": (("TRX_MYSQL_THREAD_ID",), "PROCESSLIST", "ID"),
    "INNODB_LOCK_WAITS": (("REQUESTING_TRX_ID", "BLOCKING_TRX_ID"), "INNODB_TRX", "TRX_ID"),
    "INNODB_LOCKS": (("LOCK_TRX_ID",), "INNODB_TRX", "TRX_ID"),
}
# Never read (DB only in its filter). tests/workers/test_mysql_diagnostics.py lists every
# column of each view as shown, cleaned or hidden, so a new server column fails the build.
HIDDEN_COLUMNS: Final = frozenset(
    "USER HOST DB INFO_BINARY TRX_LAST_FOREIGN_KEY_ERROR LOCK_DATA".split()
)
# Read only as a plain column of the top SELECT's list; served through `clean_cell`.
CLEANED_COLUMNS: Final = {"INFO": "sql", "TRX_QUERY": "sql", "LOCK_TABLE": "table"}

_LOCK_TABLE: Final = re.compile(r"`((?:[^`]|``)*)`\.(.*)", re.S)
_TOOL_SCOPE: Final = re.compile(r"\bBINARY (?=DATABASE\(\)|SCHEMA\(\))", re.I)
# Number literals `sql_template` leaves (`.75`, `0b101`, the rest of `1.e5` and `.5E-3`), not a
# name's digits (`t1`, `1abc`)
_NUMBER: Final = re.compile(r"(?<![\w$.`])(?:0[bB][01]+|\d*\.\d+(?:[eE][-+]?(?:\d+|\?))?)(?![\w$])")
_NUMBER_REST: Final = re.compile(r"(?<=\?)\.(?:[eE][-+]?(?:\d+|\?))?(?![\w$])")
OTHER_SCHEMA: Final = "(a table of another schema)"
THIS_SCHEMA: Final = "(this database)"
_SHOW: Final = re.compile(r"\s*SHOW\b", re.I)
NOT_SHOWN: Final = "(a statement that is not text; not shown)"
# The prefix the tool puts before every statement (session.execute), as `sql_template` leaves
# it: the agent's own statement is shown as it sent it, not with the tool's time and row limits.
_TOOL_PREFIX: Final = re.compile(
    r"\ASET STATEMENT max_statement_time=\?, sql_select_limit=\?, max_error_count=\? FOR ", re.I
)


def _skip_quoted(text: str, i: int, escapes: bool = True) -> int:
    """Index just past the literal or identifier opening at `i` (backslash escapes in
    literals when `escapes`, a doubled quote inside), or the end of a text cut inside it."""
    quote, n, j = text[i], len(text), i + 1
    while j < n:
        ch = text[j]
        if ch == "\\" and escapes and quote != "`":
            j += 2
        elif ch == quote and j + 1 < n and text[j + 1] == quote:
            j += 2
        elif ch == quote:
            return j + 1
        else:
            j += 1
    return n


def _line_comment(text: str, i: int) -> bool:
    # `--` then the end, a space or any control character opens a comment to the server
    # (measured on MariaDB 10.11: `--\x0b`, `--\x01`, `--\x7f` too), `#` always.
    if text[i] == "#":
        return True
    after = text[i + 2 : i + 3]
    return text.startswith("--", i) and (not after or after <= " " or after == "\x7f")


def _spans(text: str, escapes: bool) -> list[tuple[int, int, str]]:
    """(start, end, kind) of every literal ("?"), identifier ("`") and comment ("/* ? */"),
    read in one pass as the server reads them (a `'` inside a comment, a `/*` inside a
    literal): stripping one kind of span before the other can make a quote open where none
    did and show a literal after it."""
    spans: list[tuple[int, int, str]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "'\"`":
            end = _skip_quoted(text, i, escapes)
            spans.append((i, end, "`" if ch == "`" else "?"))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            spans.append((i, end, "/* ? */"))
            i = end
        elif _line_comment(text, i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            spans.append((i, end, "/* ? */"))
            i = end
        else:
            i += 1
    return spans


def _without_literals(text: str) -> str:
    """Literals as `?`, comments as `/* ? */`. Whether a backslash escapes a quote is the
    session's setting (NO_BACKSLASH_ESCAPES, which apps ported from other databases set), not
    ours: `'C:\\', b = 'pw'` is two literals to such a session and one literal, then `pw` as
    code, to a reading with escapes. So the text is read both ways and, where they differ,
    every character either reading takes for a literal or comment is hidden."""
    with_escapes, without = _spans(text, True), _spans(text, False)
    out: list[str] = []
    if with_escapes == without:
        pos = 0
        for start, end, kind in with_escapes:
            out.append(text[pos:start])
            out.append(text[start:end] if kind == "`" else kind)
            pos = end
        out.append(text[pos:])
        return "".join(out)
    hidden = bytearray(len(text))
    for start, end, kind in with_escapes + without:
        if kind != "`":
            hidden[start:end] = b"\x01" * (end - start)
    for i, ch in enumerate(text):
        if not hidden[i]:
            out.append(ch)
        elif i == 0 or not hidden[i - 1]:
            out.append("?")
    return "".join(out)


def _without_database(text: str, database: str) -> str:
    if not database:
        return text
    quoted = re.escape(database)
    text = re.sub(rf"(?<![\w$`])(?:`{quoted}`|{quoted})\s*\.\s*", "", text)
    # Named alone: `USE shop`, `CREATE DATABASE shop`, `SHOW TABLES FROM shop` (FROM/IN only
    # in a SHOW, where they name a schema; elsewhere a table may be called like it).
    words = "USE|DATABASE|SCHEMA|EXISTS" + ("|FROM|IN" if _SHOW.match(text) else "")
    return re.sub(
        rf"(?i)\b({words})(\s+)(?:`{quoted}`|{quoted})(?![\w$.`])", r"\1\2" + THIS_SCHEMA, text
    )


def clean_cell(kind: str, value: object, database: str) -> object:
    """A SQL text with its literals as `?`, secrets masked and this data source's schema name
    taken out (`kind` "sql"), or a lock's `` `db`.`table` `` as `table` ("table"; another
    schema's table as a fixed text). A statement that is not text (bytes, served as base64)
    is not shown; NULL stays NULL."""
    if value is None:
        return None
    if kind == "sql" and (not isinstance(value, str) or value.startswith("base64:")):
        return NOT_SHOWN  # bytes (served as base64 text) would carry its literals unread
    if not isinstance(value, str):
        return value
    if kind == "table":
        found = _LOCK_TABLE.fullmatch(value)
        if found is None:
            return value
        if found.group(1).replace("``", "`") != database:
            return OTHER_SCHEMA
        return found.group(2)
    # Imported here: the logs package is loaded only by a worker that shows a statement.
    from workers.sources.logs.masking import without_log_secrets
    from workers.sources.logs.slowlog import sql_template

    code = _NUMBER_REST.sub("", _NUMBER.sub("?", sql_template(_without_literals(value))))
    text, ours = _TOOL_PREFIX.subn("", code, count=1)
    if ours:  # the tool's own edit of the agent's scope term (sqlguard), taken off as well
        text = _TOOL_SCOPE.sub("", text)
    return without_log_secrets(_without_database(text, database))


_SHOW_HINTS: Final = (
    (
        re.compile(r"\s*SHOW\s+(?:FULL\s+)?PROCESSLIST\b", re.I),
        "SELECT ID, COMMAND, TIME, STATE, INFO FROM information_schema.PROCESSLIST "
        "WHERE DB = DATABASE()",
    ),
    (
        re.compile(r"\s*SHOW\s+ENGINE\s+INNODB\s+STATUS\b", re.I),
        "SELECT t.trx_id, t.trx_state, t.trx_started, t.trx_rows_locked, t.trx_query, p.ID, "
        "p.TIME FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p "
        "WHERE p.DB = DATABASE() AND t.trx_mysql_thread_id = p.ID",
    ),
)


def show_hint(sql: str) -> str | None:
    """For SHOW PROCESSLIST / SHOW ENGINE INNODB STATUS: the SELECT that reads the same."""
    for pattern, select in _SHOW_HINTS:
        if pattern.match(sql):
            return select
    return None
