"""The pure first layer of `query_mysql`: decide whether agent SQL may run at all.

`guard_sql` reads the text twice and accepts it only when both readings agree:

1. a small scanner that reads quotes, comments and placeholders the way the MySQL/MariaDB server
   does (`'..'`/`".."` with backslash escapes, backticks, `/* */`, `-- ` with a space). Text the
   server and sqlglot would read differently is refused up front: executable comments (`/*!`,
   `/*M!`), optimizer hints (`/*+`), nested comments, `#` comments, `--` not followed by
   whitespace (`1--1` is arithmetic to the server), backslashes, braces, control characters and
   non-ASCII outside literals;
2. sqlglot (MySQL dialect): its tokens must cover the same code and the same `?` positions, and
   its tree must be exactly one SELECT (WITH/UNION/subqueries/windows), `EXPLAIN <select>` or
   `DESCRIBE <table>`, with no INTO, locking clause, variables, named placeholders, or tables of
   other schemas (one message for all of them, existing or not). JSON_TABLE runs only as a
   FROM/JOIN source. Every function call is an unquoted, unqualified built-in of an explicit
   allowlist with `(` right after its name: anything else would make the server look for a
   stored function (which runs with its DEFINER's rights). information_schema is readable only
   for the data source's own schema (`<view>.TABLE_SCHEMA = DATABASE()` in the WHERE); with
   the operator's `diagnostics` opt-in, also the server views of `diagnostics.py` (who holds
   connections and locks), scoped to this data source's sessions, their statements only as
   plain top-level columns the source serves without literals.

The text that runs is always the original text (never regenerated SQL) with `?` turned into the
driver's `%s` and every other `%` doubled, so `LIKE 'err%'` stays a literal.

One module (about 800 lines) on purpose: it is a security boundary, reviewed and attacked as one
text (tests/workers/test_sqlguard.py, tests/workers/test_mysql_diagnostics.py and the bypass
corpus); the diagnostic views' lists live in `diagnostics.py`, their checks here. About 150
lines are the allow- and deny-lists, each with the reason it exists; the scanner and the tree
checks rely on each other's guarantees (the tree is only trusted where the scan agreed with
it), which a split would put in two places.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import math
import re
from typing import Final

import msgspec
from sqlglot import exp
from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.tokenizer_core import Token

from contracts.status import ErrorCode
from workers.sources.base import SourceError
from workers.sources.mysql.diagnostics import (
    ANCHORED_VIEWS,
    CLEANED_COLUMNS,
    HIDDEN_COLUMNS,
    SCOPED_VIEWS,
    show_hint,
)
from workers.sources.mysql.secret_columns import NO_MASKS, OutputMasks, secret_outputs

__all__ = ["MAX_SQL_CHARS", "GuardedQuery", "Param", "guard_sql"]

MAX_SQL_CHARS: Final = 8000
# sqlglot logs a statement it falls back on at WARNING, whole ("'ALTER USER u IDENTIFIED BY
# '<password>'' contains unsupported syntax"): the caller's text, refused or not, went to the
# worker's log, unmasked, up to 8,000 characters a call. Nothing sqlglot logs is for the
# operator (contracts/fingerprint.py does the same).
logging.getLogger("sqlglot").setLevel(logging.CRITICAL + 1)
Param = str | int | float | bool | None

_DIALECT: Final = MySQL()
_SPACE: Final = frozenset(" \t\n\r")
# Characters a `?` may not touch: the driver writes a param's value in its place (`12`, `1.5`,
# `'text'`), and glued to a name it becomes part of that name for the server while sqlglot
# still reads two tokens: `SELECT peek?(1)` with [2] called the stored function `peek2`.
_GLUE: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_$.@'\"`")
_FORBIDDEN_NODES: Final = tuple(
    getattr(exp, name)
    for name in (
        "Into",
        "Lock",
        "Command",
        "Parameter",
        "SessionParameter",
        "PropertyEQ",
        "Hint",
        "Insert",
        "Update",
        "Delete",
        "Merge",
        "Create",
        "Drop",
        "Alter",
        "Set",
        "SetItem",
        "Use",
        "Transaction",
        "Commit",
        "Rollback",
        "Kill",
        "Show",
        "LoadData",
        "Grant",
        "Pragma",
        "Describe",
        "Cache",
        "Uncache",
        "Copy",
        "Analyze",
        "TruncateTable",
    )
    if hasattr(exp, name)
)
# Known to sqlglot but revealing the account, host or physical names (DATABASE() is allowed only
# as the right side of an information_schema filter, see _info_schema_filters).
_FORBIDDEN_FUNCS: Final = tuple(
    getattr(exp, name)
    for name in ("CurrentUser", "SessionUser", "CurrentSchema", "CurrentVersion", "CurrentRole")
    if hasattr(exp, name)
)
# Every function call must be one of these server built-ins, written unquoted, unqualified and
# with `(` right after the name. Any other name, a quoted name (`count`(x)), a qualified one
# (db.fn(x)) or a space before `(` (count (x)) makes MariaDB call a *stored* function instead,
# which runs with its DEFINER's rights: a user-defined function is never allowed, even in the
# data source's own schema. Left out on purpose: SLEEP, BENCHMARK, *_LOCK, LOAD_FILE, *_POS_WAIT,
# *_GTID_*, NEXTVAL/LASTVAL/SETVAL, LAST_INSERT_ID, ROW_COUNT, FOUND_ROWS, USER and friends,
# DATABASE/SCHEMA, VERSION, CONNECTION_ID, UUID/UUID_SHORT/SYS_GUID (MAC address, server id),
# PASSWORD, ENCRYPT, DES_*, NAME_CONST, DEFAULT, VALUES, WSREP_*, and JSON_TABLE (outside FROM
# the server resolves it as a stored function; as a FROM/JOIN source it is the table function,
# see _TABLE_FUNCTION). tests/workers/test_mysql.py checks against the real server that every
# name here is a built-in.
_BUILTINS: Final = frozenset(
    """
    ABS ACOS ADDDATE ADDTIME ADD_MONTHS AES_DECRYPT AES_ENCRYPT ASCII ASIN ATAN ATAN2 AVG BIN
    BIT_AND BIT_COUNT BIT_LENGTH BIT_OR BIT_XOR CAST CEIL CEILING CHAR CHARACTER_LENGTH
    CHAR_LENGTH CHARSET CHR COALESCE COERCIBILITY COLLATION COLUMN_CHECK COLUMN_EXISTS
    COLUMN_GET COLUMN_JSON COLUMN_LIST COMPRESS CONCAT CONCAT_WS CONV CONVERT CONVERT_TZ COS COT
    COUNT CRC32 CRC32C CUME_DIST CURDATE CURRENT_DATE CURRENT_TIME CURRENT_TIMESTAMP CURTIME DATE
    DATEDIFF DATE_ADD DATE_FORMAT DATE_SUB DAY DAYNAME DAYOFMONTH DAYOFWEEK DAYOFYEAR DECODE
    DECODE_HISTOGRAM DEGREES DENSE_RANK ELT ENCODE EXP EXPORT_SET EXTRACT EXTRACTVALUE FIELD
    FIND_IN_SET FIRST_VALUE FLOOR FORMAT FROM_BASE64 FROM_DAYS FROM_UNIXTIME GET_FORMAT GREATEST
    GROUP_CONCAT HEX HOUR IF IFNULL INET6_ATON INET6_NTOA INET_ATON INET_NTOA INSERT INSTR
    INTERVAL ISNULL IS_IPV4 IS_IPV4_COMPAT IS_IPV4_MAPPED IS_IPV6 JSON_ARRAY JSON_ARRAYAGG
    JSON_ARRAY_APPEND JSON_ARRAY_INSERT JSON_COMPACT JSON_CONTAINS JSON_CONTAINS_PATH JSON_DEPTH
    JSON_DETAILED JSON_EQUALS JSON_EXISTS JSON_EXTRACT JSON_INSERT JSON_KEYS JSON_LENGTH
    JSON_LOOSE JSON_MERGE JSON_MERGE_PATCH JSON_MERGE_PRESERVE JSON_NORMALIZE JSON_OBJECT
    JSON_OBJECTAGG JSON_OVERLAPS JSON_PRETTY JSON_QUERY JSON_QUOTE JSON_REMOVE JSON_REPLACE
    JSON_SEARCH JSON_SET JSON_TYPE JSON_UNQUOTE JSON_VALID JSON_VALUE LAG LAST_DAY
    LAST_VALUE LCASE LEAD LEAST LEFT LENGTH LENGTHB LN LOCALTIME LOCALTIMESTAMP LOCATE LOG LOG10
    LOG2 LOWER LPAD LTRIM MAKEDATE MAKETIME MAKE_SET MATCH MAX MD5 MEDIAN MICROSECOND MID MIN
    MINUTE MOD MONTH MONTHNAME NATURAL_SORT_KEY NOW NTH_VALUE NTILE NULLIF NVL NVL2 OCT
    OCTET_LENGTH ORD PERCENTILE_CONT PERCENTILE_DISC PERCENT_RANK PERIOD_ADD PERIOD_DIFF PI
    POSITION POW POWER QUARTER QUOTE RADIANS RAND RANDOM_BYTES RANK REGEXP_INSTR REGEXP_REPLACE
    REGEXP_SUBSTR REPEAT REPLACE REVERSE RIGHT ROUND ROW_NUMBER RPAD RTRIM SECOND SEC_TO_TIME
    SFORMAT SHA SHA1 SHA2 SIGN SIN SOUNDEX SPACE SQRT STD STDDEV STDDEV_POP STDDEV_SAMP STRCMP
    ST_ASGEOJSON ST_ASTEXT ST_ASWKT ST_DISTANCE ST_GEOMFROMTEXT ST_X ST_Y
    STR_TO_DATE SUBDATE SUBSTR SUBSTRING SUBSTRING_INDEX SUBTIME SUM SYSDATE TAN TIME TIMEDIFF
    TIMESTAMP TIMESTAMPADD TIMESTAMPDIFF TIME_FORMAT TIME_TO_SEC TO_BASE64 TO_CHAR TO_DAYS
    TO_SECONDS TRIM TRUNCATE UCASE UNCOMPRESS UNCOMPRESSED_LENGTH UNHEX UNIX_TIMESTAMP UPDATEXML
    UPPER UTC_DATE UTC_TIME UTC_TIMESTAMP VARIANCE VAR_POP VAR_SAMP WEEK WEEKDAY WEEKOFYEAR
    WEIGHT_STRING YEAR YEARWEEK
    """.split()
)
# Keywords the server evaluates without parentheses: the time ones are fine, these name the
# account (sqlglot reads a bare CURRENT_ROLE as a column, so it is caught as a column name).
_NILADIC: Final = frozenset(
    "CURRENT_DATE CURRENT_TIME CURRENT_TIMESTAMP LOCALTIME LOCALTIMESTAMP UTC_DATE UTC_TIME "
    "UTC_TIMESTAMP".split()
)
_BARE_ACCOUNT_KEYWORDS: Final = frozenset({"CURRENT_USER", "CURRENT_ROLE"})
# Words that may stand right before `(` without being a function call: MariaDB never resolves
# them to a stored function (tests/workers/test_mysql.py checks it with stored functions of these
# names). LATERAL, ESCAPE, AGAINST, CURRENT, COLUMNS, PATH and NESTED are not among them.
_PAREN_KEYWORDS: Final = frozenset(
    """
    AND OR NOT XOR IN EXISTS ANY SOME ALL AS OVER FROM JOIN ON USING SELECT WHERE HAVING BY THEN
    WHEN ELSE CASE DISTINCT DISTINCTROW UNION INTERSECT EXCEPT INDEX KEY PARTITION LIKE RLIKE
    REGEXP BETWEEN IS BINARY DIV WITH RECURSIVE VALUES ROW GROUP ORDER DECIMAL DEC NUMERIC FIXED
    FLOAT DOUBLE REAL DATETIME VARCHAR VARBINARY NCHAR INT INTEGER SIGNED UNSIGNED LIMIT OFFSET
    WINDOW ROWS RANGE PRECEDING FOLLOWING UNBOUNDED FOR NULL TRUE FALSE STRAIGHT_JOIN CROSS INNER
    OUTER NATURAL
    """.split()
)
# JSON_TABLE is a table function only as a FROM/JOIN source (right after FROM, a JOIN keyword or a
# FROM list's comma, and so in the tree: a Table under From/Join); anywhere else MariaDB calls a
# stored function of that name. Inside it, `<path string> COLUMNS (` is its grammar, not a call.
_TABLE_FUNCTION: Final = "JSON_TABLE"
_TABLE_FUNCTION_AFTER: Final = frozenset({"FROM", "JOIN", "STRAIGHT_JOIN", ","})
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# One text for every other schema, whether or not a database of that name exists (and without
# echoing the name), so the guard is no oracle for physical database names.
_OUTSIDE_SCHEMA: Final = (
    "a schema outside this data source was named; name its tables without a schema"
)
# information_schema views readable for the data source's own schema, each with the column that
# must be filtered `= DATABASE()`. The server then scans only that schema ("Scanned 1 database"
# in EXPLAIN), so other schemas' rows are never even produced.
_INFO_SCHEMA_VIEWS: Final = {
    "TABLES": "TABLE_SCHEMA",
    "COLUMNS": "TABLE_SCHEMA",
    "STATISTICS": "TABLE_SCHEMA",
    "KEY_COLUMN_USAGE": "TABLE_SCHEMA",
    "TABLE_CONSTRAINTS": "TABLE_SCHEMA",
    "REFERENTIAL_CONSTRAINTS": "CONSTRAINT_SCHEMA",
    "PARTITIONS": "TABLE_SCHEMA",
}
# Columns of those views that name the physical schema, an account or grants: never read (the
# schema column only in its filter). tests/workers/test_mysql.py checks the split per view.
_INFO_SCHEMA_HIDDEN: Final = frozenset(
    """
    TABLE_CATALOG TABLE_SCHEMA CONSTRAINT_CATALOG CONSTRAINT_SCHEMA INDEX_SCHEMA
    REFERENCED_TABLE_SCHEMA UNIQUE_CONSTRAINT_CATALOG UNIQUE_CONSTRAINT_SCHEMA PRIVILEGES
    """.split()
)


class GuardedQuery(msgspec.Struct, frozen=True, kw_only=True):
    """SQL accepted by the guard: driver text (`%s` placeholders, `%` doubled) and its params."""

    text: str
    params: tuple[Param, ...]
    kind: str  # "select", "explain" or "describe"
    tables: tuple[str, ...]
    # (result column index, "sql" or "table"): cells the source serves through `clean_cell`.
    cleaned: tuple[tuple[int, str], ...] = ()
    # Output columns reading a secret under another name (`secret_columns`): by position and,
    # for a `*`, by name; True when any value but NULL is masked, not only text.
    masks: OutputMasks = NO_MASKS


class _Scan(msgspec.Struct, kw_only=True):
    placeholders: list[int]
    comments: list[tuple[int, int]]  # [start, end) spans
    semicolons: list[int]


def _refuse(message: str) -> SourceError:
    return SourceError(ErrorCode.FORBIDDEN_QUERY, message)


def _skip_quoted(sql: str, i: int, quote: str) -> int:
    """Index just past the literal or identifier opening at `i`."""
    n = len(sql)
    j = i + 1
    while j < n:
        ch = sql[j]
        if ch == "\x00":
            raise _refuse("the statement contains a NUL character")
        if ch == "\\" and quote != "`":
            j += 2
            continue
        if ch == quote:
            if j + 1 < n and sql[j + 1] == quote:
                j += 2
                continue
            return j + 1
        j += 1
    raise _refuse("the statement has an unterminated quoted string or identifier")


def _skip_block_comment(sql: str, i: int) -> int:
    head = sql[i + 2 : i + 4]
    if head.startswith(("!", "+")) or head.upper() == "M!":
        raise _refuse(
            "executable comments and optimizer hints (/*! */, /*M! */, /*+ */) are refused"
        )
    end = sql.find("*/", i + 2)
    if end < 0:
        raise _refuse("the statement has an unterminated comment")
    if "/*" in sql[i + 2 : end]:
        raise _refuse("nested comments are refused")
    return end + 2


def _scan(sql: str) -> _Scan:
    """Read the text as the server does; refuse what the server and sqlglot read differently."""
    scan = _Scan(placeholders=[], comments=[], semicolons=[])
    n, i = len(sql), 0
    while i < n:
        ch = sql[i]
        if ch in "'\"`":
            i = _skip_quoted(sql, i, ch)
            continue
        if ch == "/" and sql.startswith("/*", i):
            end = _skip_block_comment(sql, i)
            scan.comments.append((i, end))
            i = end
            continue
        if ch == "-" and sql.startswith("--", i):
            if i + 2 >= n or sql[i + 2] not in " \t\n":
                raise _refuse("'--' must be followed by a space to start a comment")
            end = sql.find("\n", i)
            end = n if end < 0 else end
            scan.comments.append((i, end))
            i = end
            continue
        if ch == "#":
            raise _refuse("'#' comments are refused; use -- or /* */")
        if ch == "?":
            if (i and sql[i - 1] in _GLUE) or sql[i + 1 : i + 2] in _GLUE:
                raise _refuse(
                    "a ? placeholder must not touch a name, number or quote; put a space "
                    "between them"
                )
            scan.placeholders.append(i)
        elif ch == ";":
            scan.semicolons.append(i)
        elif ch in "\\{}":
            raise _refuse(f"the character {ch!r} is refused outside string literals")
        elif not (" " <= ch <= "~" or ch in _SPACE):
            raise _refuse("control or non-ASCII characters are refused outside string literals")
        i += 1
    return scan


def _check_agreement(sql: str, scan: _Scan) -> list[Token]:
    """sqlglot's tokens must read the same code, comments and placeholders as the scanner."""
    try:
        tokens = _DIALECT.tokenize(sql)
    except (SqlglotError, ValueError, RecursionError) as exc:
        raise _refuse("the statement could not be tokenized") from exc
    covered = bytearray(len(sql))
    marks: list[int] = []
    for token in tokens:
        covered[token.start : token.end + 1] = b"\x01" * (token.end + 1 - token.start)
        if token.token_type.name == "PLACEHOLDER" and token.text == "?":
            marks.append(token.start)
    in_comment = bytearray(len(sql))
    for start, end in scan.comments:
        if 1 in covered[start:end]:
            raise _refuse("the statement's comments are ambiguous")
        in_comment[start:end] = b"\x01" * (end - start)
    for index, ch in enumerate(sql):
        if not covered[index] and not in_comment[index] and ch not in _SPACE:
            raise _refuse("the statement is ambiguous to parse")
    if marks != scan.placeholders:
        raise _refuse("the statement's ? placeholders are ambiguous")
    return tokens


def _only_space_and_comments(sql: str, start: int, comments: list[tuple[int, int]]) -> bool:
    """Whether `sql[start:]` holds only whitespace and comments; linear (comments are sorted
    and disjoint, so each one is visited once)."""
    pos = start
    for a, b in comments[bisect.bisect_left(comments, (start, start)) :]:
        if sql[pos:a].strip(" \t\n\r"):
            return False
        pos = b
    return not sql[pos:].strip(" \t\n\r")


def _statement_text(sql: str, scan: _Scan) -> str:
    """Driver text: the final `;` dropped, `?` as `%s`, every other `%` doubled."""
    if scan.semicolons:
        last = scan.semicolons[-1]
        if len(scan.semicolons) > 1 or not _only_space_and_comments(sql, last + 1, scan.comments):
            raise _refuse("exactly one statement is allowed")
        sql = sql[:last] + " " + sql[last + 1 :]
    parts: list[str] = []
    prev = 0
    for pos in scan.placeholders:
        parts.append(sql[prev:pos].replace("%", "%%"))
        parts.append("%s")
        prev = pos + 1
    parts.append(sql[prev:].replace("%", "%%"))
    return "".join(parts)


def _check_params(params: list[Param], expected: int) -> tuple[Param, ...]:
    if len(params) != expected:
        raise SourceError(
            ErrorCode.SCHEMA,
            f"the statement has {expected} ? placeholder(s) but {len(params)} param(s) were given",
        )
    for index, value in enumerate(params):
        if isinstance(value, float) and not math.isfinite(value):
            raise SourceError(ErrorCode.SCHEMA, f"$.params[{index}] must be a finite number")
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**64:
            raise SourceError(ErrorCode.SCHEMA, f"$.params[{index}] is out of range")
        if value is not None and not isinstance(value, str | int | float):
            raise SourceError(ErrorCode.SCHEMA, f"$.params[{index}] must be a JSON scalar")
    return tuple(params)


def _parse(sql: str, tokens: list[Token]) -> exp.Expr:
    try:
        # A comment after the final `;` parses as an empty `Semicolon` statement.
        statements = [
            s
            for s in _DIALECT.parser().parse(tokens, sql)
            if s is not None and not isinstance(s, exp.Semicolon)
        ]
    except ParseError as exc:
        detail = exc.errors[0] if exc.errors else {}
        where = f" (line {detail.get('line')}, column {detail.get('col')})" if detail else ""
        raise _refuse(f"the statement could not be parsed as one SELECT{where}") from exc
    except (SqlglotError, RecursionError, ValueError, TypeError, AttributeError) as exc:
        raise _refuse("the statement could not be parsed as one SELECT") from exc
    if len(statements) != 1:
        raise _refuse("exactly one statement is allowed")
    return statements[0]


def _root_kind(root: exp.Expr) -> tuple[str, exp.Expr]:
    queries = (exp.Select, exp.SetOperation, exp.Subquery)
    if isinstance(root, queries):
        return "select", root
    if isinstance(root, exp.Describe):
        extras = [k for k, v in root.args.items() if k != "this" and v not in (None, False, [])]
        target = root.this
        if not extras and isinstance(target, queries):
            return "explain", target
        if not extras and isinstance(target, exp.Table):
            return "describe", target
        raise _refuse("only plain EXPLAIN <select> and DESCRIBE <table> are allowed")
    raise _refuse(f"only SELECT is allowed, not {root.key.upper()}")


def _readable_views(diagnostics: bool) -> set[str]:
    views = set(_INFO_SCHEMA_VIEWS)
    return views | set(SCOPED_VIEWS) | set(ANCHORED_VIEWS) if diagnostics else views


def _check_table(
    node: exp.Table | exp.Column, schema: str | None, diagnostics: bool = False
) -> str | None:
    if node.args.get("catalog"):
        raise _refuse("tables must be named as table or schema.table")
    db = node.text("db")
    if isinstance(node, exp.Table):
        name = node.name
        if db.lower() == "information_schema":
            if name.upper() not in _readable_views(diagnostics):
                raise _refuse(f"information_schema.{name} is not allowed")
            return f"information_schema.{name.lower()}"
    if db and db != schema:
        raise _refuse(_OUTSIDE_SCHEMA)
    return node.name.lower() if isinstance(node, exp.Table) else None


def _is_info_schema(node: exp.Expr) -> bool:
    return isinstance(node, exp.Table) and node.text("db").lower() == "information_schema"


def _conjuncts(where: exp.Expr | None) -> list[exp.Expr]:
    if where is None:
        return []
    node = where.this if isinstance(where, exp.Where) else where
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return _conjuncts(node.left) + _conjuncts(node.right)
    return [node]


def _schema_filter(conjunct: exp.Expr) -> tuple[exp.Column, exp.Expr] | None:
    """`col = DATABASE()` (either side) -> (col, the DATABASE() node)."""
    if not isinstance(conjunct, exp.EQ):
        return None
    left, right = conjunct.left, conjunct.right
    if isinstance(right, exp.Column) and isinstance(left, exp.CurrentSchema):
        left, right = right, left
    if isinstance(left, exp.Column) and isinstance(right, exp.CurrentSchema):
        return left, right
    return None


def _anchored(
    table: exp.Table, select: exp.Select, sources: list[exp.Expr], conjuncts: list[exp.Expr]
) -> None:
    """A server-wide diagnostic view must be joined, by a top-level WHERE equality between
    qualified columns, to a source of the same SELECT that is scoped itself (see
    `diagnostics.ANCHORED_VIEWS`): its rows then all belong to this data source's sessions."""
    view = table.name.upper()
    columns, anchor_view, anchor_column = ANCHORED_VIEWS[view]
    ref = table.alias_or_name
    anchors = {
        s.alias_or_name
        for s in sources
        if isinstance(s, exp.Table)
        and s is not table
        and _is_info_schema(s)
        and s.name.upper() == anchor_view
    }
    for conjunct in conjuncts:
        if not (
            isinstance(conjunct, exp.EQ)
            and isinstance(conjunct.left, exp.Column)
            and isinstance(conjunct.right, exp.Column)
        ):
            continue
        for mine, other in ((conjunct.left, conjunct.right), (conjunct.right, conjunct.left)):
            if (
                mine.table == ref
                and mine.name.upper() in columns
                and other.table in anchors
                and other.table != ref
                and other.name.upper() == anchor_column
            ):
                return
    raise _refuse(
        f"information_schema.{table.name} must be joined to this data source's "
        f"{anchor_view} rows: add information_schema.{anchor_view} to the FROM, filtered as "
        f"required, and `{ref}.{columns[0].lower()} = <alias>.{anchor_column}` "
        "to the WHERE clause (both columns qualified)"
    )


def _info_schema_filters(
    root: exp.Expr, diagnostics: bool = False, exact: list[int] | None = None
) -> set[int]:
    """Every information_schema view must be a FROM/JOIN source of a SELECT whose WHERE has a
    top-level `[alias.]<schema column> = DATABASE()` for it (a server-wide diagnostic view:
    a join to one that has, see `_anchored`); returns the ids of those filter nodes (the only
    place a schema column or DATABASE() may appear)."""
    approved: set[int] = set()
    scoped = {**_INFO_SCHEMA_VIEWS, **SCOPED_VIEWS} if diagnostics else _INFO_SCHEMA_VIEWS
    for table in root.find_all(exp.Table):
        if not _is_info_schema(table) or isinstance(table.parent, exp.Describe):
            continue
        view = table.name.upper()
        column = scoped.get(view)
        if column is None and not (diagnostics and view in ANCHORED_VIEWS):
            raise _refuse(f"information_schema.{table.name} is not allowed")
        select = table.parent.parent if isinstance(table.parent, exp.From | exp.Join) else None
        if not isinstance(select, exp.Select):
            raise _refuse("information_schema views may only be read in FROM or JOIN")
        if any(
            isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
            for e in select.expressions
        ):
            raise _refuse("name the columns you need from information_schema (no *)")
        # Every FROM/JOIN source (derived tables too): an unqualified filter needs exactly one.
        sources = [j.this for j in select.args.get("joins") or []] + [
            f.this for f in [select.args.get("from_")] if f is not None
        ]
        if column is None:
            _anchored(table, select, sources, _conjuncts(select.args.get("where")))
            continue
        ref = table.alias_or_name
        found = None
        for conjunct in _conjuncts(select.args.get("where")):
            match = _schema_filter(conjunct)
            if match is None or match[0].name.upper() != column:
                continue
            qualifier = match[0].table
            if qualifier == ref or (not qualifier and len(sources) == 1):
                found = match
                break
        if found is None:
            raise _refuse(
                f"information_schema.{table.name} must be filtered with "
                f"{ref + '.' if len(sources) > 1 else ''}{column} = DATABASE() in the WHERE clause"
            )
        approved.update((id(found[0]), id(found[1])))
        if view in SCOPED_VIEWS and exact is not None:
            # PROCESSLIST.DB is utf8mb3_general_ci: `DB = DATABASE()` also held for a schema
            # named alike up to case (lower_case_table_names=0) or accents (`shöp`), and
            # PROCESS shows every session. The tool runs it as `DB = BINARY DATABASE()`.
            start = found[1].meta.get("start")
            if start is None:
                raise _refuse("the statement is ambiguous to parse")
            exact.append(start)
    return approved


def _not_allowed(name: str) -> str:
    if name == "ROWNUM":  # MariaDB >= 10.6 only; left out on purpose (docs/mysql.md)
        return (
            "function ROWNUM is not allowed; write ROW_NUMBER() OVER (), which every server "
            "this tool reads runs"
        )
    return f"function {name} is not allowed; only pure built-in functions may be called"


def _check_call(node: exp.Func, sql: str) -> None:
    """A function call must be an unquoted, unqualified built-in with `(` right after its name."""
    if isinstance(node.parent, exp.Dot) and node.parent.expression is node:
        raise _refuse("schema-qualified function calls are refused; only built-in functions run")
    start, end = node.meta.get("start"), node.meta.get("end")
    if start is None or end is None:
        if isinstance(node, exp.Anonymous):
            raise _refuse(f"function {node.name.upper()} is not allowed")
        return  # operator or special syntax (CASE, CAST, a -> '$'), checked on tokens
    written = sql[start : end + 1]
    if not _NAME.fullmatch(written):
        raise _refuse("function names must not be quoted; only built-in functions run")
    name = written.upper()
    if name not in _BUILTINS:
        raise _refuse(_not_allowed(name))
    if sql[end + 1 : end + 2] != "(" and name not in _NILADIC:
        raise _refuse(f"write {name}( with no space or comment before the parenthesis")


def _paren_pairs(tokens: list[Token]) -> dict[int, int]:
    """Index of each `(` token -> index of its `)` (and back)."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for index, token in enumerate(tokens):
        if token.token_type.name == "L_PAREN":
            stack.append(index)
        elif token.token_type.name == "R_PAREN" and stack:
            opener = stack.pop()
            pairs[opener], pairs[index] = index, opener
    return pairs


def _allowed_before_paren(tokens: list[Token], i: int, pairs: dict[int, int]) -> bool:
    """Whether the word `tokens[i]`, followed by `(`, cannot make the server call a stored
    function: a reserved word, `MATCH (..) AGAINST (`, or a CTE column list `x (..) AS (`."""
    name = tokens[i].text.upper()
    if name in _PAREN_KEYWORDS:
        return True
    before = tokens[i - 1] if i else None
    if name == "AGAINST" and before is not None and before.token_type.name == "R_PAREN":
        opener = pairs.get(i - 1, 0)
        return opener > 0 and tokens[opener - 1].text.upper() == "MATCH"
    close = pairs.get(i + 1)
    return (
        before is not None
        and before.text.upper() in ("WITH", "RECURSIVE", ",")
        and close is not None
        and close + 2 < len(tokens)
        and tokens[close + 1].text.upper() == "AS"
        and tokens[close + 2].token_type.name == "L_PAREN"
    )


def _enclosing(tokens: list[Token]) -> list[int]:
    """Index of the innermost open `(` around each token (-1 at the top level)."""
    out: list[int] = []
    stack: list[int] = []
    for index, token in enumerate(tokens):
        out.append(stack[-1] if stack else -1)
        if token.token_type.name == "L_PAREN":
            stack.append(index)
        elif token.token_type.name == "R_PAREN" and stack:
            stack.pop()
    return out


def _check_call_tokens(tokens: list[Token]) -> int:
    """Every word right before `(` must be a built-in written `NAME(` or a word that cannot be a
    function call. sqlglot misreads some calls (`FILE(a)` as an alias list, `GLOB(1, 2)` as an
    operator) that the server runs as stored functions, so this reads the tokens, not the tree.
    Returns how many JSON_TABLE( sources there are (the tree must agree, see _check_tree)."""
    pairs = _paren_pairs(tokens)
    enclosing = _enclosing(tokens)
    grammar_parens: set[int] = set()  # a JSON_TABLE's own `(` and its COLUMNS lists' `(`
    table_functions = 0
    for i, (token, after) in enumerate(itertools.pairwise(tokens)):
        if after.token_type.name != "L_PAREN":
            continue
        kind = token.token_type.name
        if kind == "IDENTIFIER" or "STRING" in kind:
            raise _refuse("a quoted name before ( is refused; only built-in functions run")
        if not any(ch.isalnum() or ch in "_$" for ch in token.text):
            continue  # punctuation or an operator
        name = token.text.upper()
        before = tokens[i - 1].text.upper() if i else ""
        # DATABASE()/SCHEMA(): built-ins the tree check allows only as information_schema filter.
        if name in _BUILTINS or name in ("DATABASE", "SCHEMA") or name == _TABLE_FUNCTION:
            if token.end + 1 != after.start:
                raise _refuse(f"write {name}( with no space or comment before the parenthesis")
            if name == _TABLE_FUNCTION:
                if before not in _TABLE_FUNCTION_AFTER:
                    raise _refuse("JSON_TABLE is allowed only as a table in FROM or JOIN")
                grammar_parens.add(i + 1)
                table_functions += 1
        elif (
            name == "COLUMNS"
            and enclosing[i] in grammar_parens
            and "STRING" in tokens[i - 1].token_type.name
        ):
            grammar_parens.add(i + 1)  # JSON_TABLE(doc, '$..' COLUMNS (..), NESTED PATH ..
        elif not _allowed_before_paren(tokens, i, pairs):
            raise _refuse(_not_allowed(name))
    return table_functions


def _check_table_function(node: exp.Expr) -> int:
    """1 for a JSON_TABLE that is a FROM/JOIN source, 0 for any other node; refuses one that
    is not."""
    if not isinstance(node, exp.JSONTable):
        return 0
    holder = node.parent
    if not (isinstance(holder, exp.Table) and isinstance(holder.parent, exp.From | exp.Join)):
        raise _refuse("JSON_TABLE is allowed only as a table in FROM or JOIN")
    return 1


def _reads_diagnostics(target: exp.Expr, diagnostics: bool) -> bool:
    views = set(SCOPED_VIEWS) | set(ANCHORED_VIEWS)
    return diagnostics and any(
        _is_info_schema(t) and t.name.upper() in views for t in target.find_all(exp.Table)
    )


def _cleaned_column(node: exp.Column, target: exp.Expr) -> tuple[int, str]:
    """A statement or lock-table column of a diagnostic view may only be a plain column of the
    top SELECT's list, not aliased: anywhere else (a function, WHERE, ORDER BY, a subquery, a
    UNION, an alias HAVING or ORDER BY could name) its raw text could be tested or turned so
    that its cleaning misses it."""
    if isinstance(target, exp.Select) and node.parent is target and node.arg_key == "expressions":
        if target.args.get("distinct"):  # it compares the raw texts (a row count tells)
            raise _refuse("with a statement column selected, DISTINCT is refused")
        for clause in ("order", "group"):
            items = target.args.get(clause)
            for item in items.expressions if items is not None else []:
                # A position may be written `2`, `(2)` or `?` (bound as 2 by the driver): an
                # item must name a column to be read as anything but a position.
                if item.find(exp.Column) is None:
                    raise _refuse(
                        "with a statement column selected, ORDER BY and GROUP BY name "
                        "columns, not positions"
                    )
        # By identity: `list.index` compares sqlglot nodes by value, so a column selected
        # twice (`SELECT INFO, ID, INFO`) would mark its first place twice, its second never.
        position = next(i for i, e in enumerate(target.expressions) if e is node)
        return position, CLEANED_COLUMNS[node.name.upper()]
    raise _refuse(
        f"information_schema column {node.name.upper()} may only be selected as a plain, "
        "unaliased column of the outer SELECT (not in a condition, function, ORDER BY or "
        "subquery)"
    )


def _check_diagnostic_node(node: exp.Expr) -> None:
    """Names of hidden or cleaned columns appear only as columns (checked on their own), never
    as an alias, a derived table's column list or a USING list; NATURAL joins (implicit
    equalities on same-named columns) are refused."""
    if isinstance(node, exp.Join) and (
        node.args.get("using") or str(node.args.get("method") or "").upper() == "NATURAL"
    ):
        raise _refuse("NATURAL JOIN and USING are refused with diagnostic views; write ON/WHERE")
    if isinstance(node, exp.Identifier) and not isinstance(node.parent, exp.Column | exp.Table):
        upper = node.name.upper()
        if upper in HIDDEN_COLUMNS or upper in CLEANED_COLUMNS:
            raise _refuse(f"the name {upper} is reserved for a diagnostic view's column")


def _check_tree(
    target: exp.Expr,
    schema: str | None,
    sql: str,
    table_functions: int,
    diagnostics: bool = False,
) -> tuple[tuple[str, ...], tuple[tuple[int, str], ...], tuple[int, ...]]:
    tables: set[str] = set()
    found_table_functions = 0
    exact: list[int] = []
    approved = _info_schema_filters(target, diagnostics, exact)
    reads_info_schema = any(_is_info_schema(t) for t in target.find_all(exp.Table))
    diagnostic = _reads_diagnostics(target, diagnostics)
    hidden = _INFO_SCHEMA_HIDDEN | HIDDEN_COLUMNS if diagnostic else _INFO_SCHEMA_HIDDEN
    cleaned: list[tuple[int, str]] = []
    for node in target.walk():
        if id(node) in approved:
            continue
        if diagnostic:
            _check_diagnostic_node(node)
            if isinstance(node, exp.Column) and node.name.upper() in CLEANED_COLUMNS:
                cleaned.append(_cleaned_column(node, target))
        if isinstance(node, _FORBIDDEN_NODES):
            raise _refuse(f"{node.key.upper()} is not allowed in a read-only query")
        if isinstance(node, exp.Placeholder) and node.args.get("this"):
            raise _refuse("only ? placeholders are allowed")
        if isinstance(node, _FORBIDDEN_FUNCS):
            raise _refuse(f"function {node.key.upper()} is not allowed")
        found_table_functions += _check_table_function(node)
        if isinstance(node, exp.Func):
            _check_call(node, sql)
        if isinstance(node, exp.Column) and isinstance(node.this, exp.Identifier):
            upper = node.name.upper()
            if not node.table and not node.this.quoted and upper in _BARE_ACCOUNT_KEYWORDS:
                raise _refuse(f"{upper} is not allowed")
            if reads_info_schema and upper in hidden:
                raise _refuse(f"information_schema column {upper} is not readable")
        if reads_info_schema and isinstance(node, exp.Alias | exp.TableAlias):
            if node.alias.upper() in hidden:
                raise _refuse(f"the alias {node.alias} is not allowed")
        if isinstance(node, exp.Table | exp.Column):
            table = _check_table(node, schema, diagnostics)
            if table and isinstance(node.this, exp.Identifier):
                tables.add(table)
    if found_table_functions != table_functions:
        raise _refuse("the statement is ambiguous to parse")
    return tuple(sorted(tables)), tuple(sorted(cleaned)), tuple(sorted(set(exact)))


# The words a statement the guard may accept starts with (SHOW goes on to its own message).
_FIRST_WORDS: Final = frozenset({"SELECT", "WITH", "EXPLAIN", "DESCRIBE", "DESC", "(", "SHOW"})


def _check_first_word(sql: str, scan: _Scan) -> None:
    """Any other statement is refused by its own first word (after spaces and comments).
    Before, the refusal was whatever sqlglot made of it: `CREATE TABLE t (a INT)` said
    "function T is not allowed", `FLUSH PRIVILEGES` "not ALIAS", `CALL p()` "ambiguous to
    parse"; and `TABLE orders` (sqlglot's `SELECT * FROM orders`, a syntax error to MariaDB)
    was accepted."""
    pos = 0
    for start, end in scan.comments:
        if sql[pos:start].strip(" \t\n\r"):
            break
        pos = end
    pos += len(sql[pos:]) - len(sql[pos:].lstrip(" \t\n\r"))
    word = _NAME.match(sql, pos)
    first = word.group().upper() if word is not None else sql[pos : pos + 1]
    if first not in _FIRST_WORDS:
        said = f", not {first}" if word is not None and len(first) <= 30 else ""
        raise _refuse(f"only SELECT is allowed{said}")


# `DESCRIBE t col` / `DESCRIBE t 'pat%'`: sqlglot does not parse the column part, so the table
# part alone goes through the guard, and the statement runs as written.
_DESCRIBE_COLUMN: Final = re.compile(
    r"\s*(?:DESCRIBE|DESC|EXPLAIN)\s+(`?[A-Za-z_][A-Za-z0-9_$]{0,63}`?)"
    r"\s+(?:`?[A-Za-z_][A-Za-z0-9_$]{0,63}`?|'[^'\\]{0,64}')\s*;?\s*",
    re.IGNORECASE,
)


def guard_sql(
    sql: str, params: list[Param], *, schema: str | None = None, diagnostics: bool = False
) -> GuardedQuery:
    """Accept one read-only SELECT with `?` placeholders or raise `SourceError`
    (`FORBIDDEN_QUERY` for the text, `SCHEMA` for the params). `schema` is the data source's
    database: the only qualifier a table may carry (besides a few information_schema views,
    read only for that schema). `diagnostics` (the operator's opt-in per data source) adds the
    server diagnostic views of `diagnostics.py`, scoped to this data source's sessions."""
    column = _DESCRIBE_COLUMN.fullmatch(sql)
    if column is not None:  # DESCRIBE t col: the table checked as `DESCRIBE t`, run as written
        table_only = guard_sql(
            f"DESCRIBE {column.group(1)}", params, schema=schema, diagnostics=diagnostics
        )
        text = sql.strip().rstrip(";").rstrip().replace("%", "%%")  # driver text (no `?`)
        return GuardedQuery(
            text=text, params=table_only.params, kind="describe", tables=table_only.tables
        )
    if not sql.strip():
        raise _refuse("the statement is empty")
    if len(sql) > MAX_SQL_CHARS:
        raise _refuse(f"the statement is longer than {MAX_SQL_CHARS} characters")
    scan = _scan(sql)
    _check_first_word(sql, scan)
    tokens = _check_agreement(sql, scan)
    text = _statement_text(sql, scan)
    values = _check_params(params, len(scan.placeholders))
    table_functions = _check_call_tokens(tokens)
    root = _parse(sql, tokens)
    hint = show_hint(sql) if diagnostics and isinstance(root, exp.Show) else None
    if hint is not None:
        raise _refuse(f"only SELECT is allowed, not SHOW; this reads the same: {hint}")
    kind, target = _root_kind(root)
    tables, cleaned, exact = _check_tree(target, schema, sql, table_functions, diagnostics)
    for start in reversed(exact):  # `?` became `%s` and every `%` was doubled before it
        at = start + sum(1 for p in scan.placeholders if p < start) + sql.count("%", 0, start)
        text = f"{text[:at]}BINARY {text[at:]}"
    return GuardedQuery(
        text=text,
        params=values,
        kind=kind,
        tables=tables,
        cleaned=cleaned if kind == "select" else (),
        masks=msgspec.structs.replace(
            secret_outputs(target), raw=tuple(position for position, _ in cleaned)
        )
        if kind == "select"
        else NO_MASKS,
    )
