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
   `DESCRIBE <table>`, with no INTO, locking clause, variables, named placeholders, unknown or
   stateful functions, or tables of other schemas.

The text that runs is always the original text (never regenerated SQL) with `?` turned into the
driver's `%s` and every other `%` doubled, so `LIKE 'err%'` stays a literal.
"""

from __future__ import annotations

import math
from typing import Final

import msgspec
from sqlglot import exp
from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.tokenizer_core import Token

from contracts.status import ErrorCode
from workers.source import SourceError

__all__ = ["MAX_SQL_CHARS", "GuardedQuery", "Param", "guard_sql"]

MAX_SQL_CHARS: Final = 8000
Param = str | int | float | bool | None

_DIALECT: Final = MySQL()
_SPACE: Final = frozenset(" \t\n\r")
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
# Known to sqlglot but revealing the account, host or physical names.
_FORBIDDEN_FUNCS: Final = tuple(
    getattr(exp, name)
    for name in ("CurrentUser", "SessionUser", "CurrentSchema", "CurrentVersion", "CurrentRole")
    if hasattr(exp, name)
)
# Builtins sqlglot does not model (they parse as Anonymous) and that only compute a value.
# Anything else parsed as Anonymous is refused: SLEEP, BENCHMARK, GET_LOCK and friends,
# LOAD_FILE, *_POS_WAIT, NEXTVAL/SETVAL, LAST_INSERT_ID(x), USER(), CONNECTION_ID(), UDFs.
_ALLOWED_ANONYMOUS: Final = frozenset(
    """
    NOW SYSDATE CURTIME LOCALTIME LOCALTIMESTAMP UTC_DATE UTC_TIME UTC_TIMESTAMP UNIX_TIMESTAMP
    ADDDATE SUBDATE ADDTIME SUBTIME TIMEDIFF SEC_TO_TIME TIME_TO_SEC CONVERT_TZ MAKEDATE MAKETIME
    DAYNAME MONTHNAME DAYOFMONTH DAYOFYEAR WEEKDAY WEEKOFYEAR YEARWEEK QUARTER MINUTE SECOND
    MICROSECOND PERIOD_ADD PERIOD_DIFF TO_DAYS FROM_DAYS TO_SECONDS TIMESTAMP
    FIND_IN_SET FIELD ELT QUOTE SOUNDEX BIN OCT CONV ORD ASCII MID STRCMP REVERSE LCASE UCASE
    LOCATE POSITION INSERT BIT_LENGTH OCTET_LENGTH CHARSET COERCIBILITY CRC32 SIGN LOG2 LOG10
    PI RADIANS DEGREES COT ISNULL INTERVAL NATURAL_SORT_KEY FORMAT_BYTES REGEXP_INSTR
    REGEXP_SUBSTR INET_NTOA INET_ATON INET6_NTOA INET6_ATON IS_IPV4 IS_IPV6 UNCOMPRESS
    UNCOMPRESSED_LENGTH AES_DECRYPT EXTRACTVALUE ST_ASTEXT ST_ASWKT ST_X ST_Y
    JSON_UNQUOTE JSON_LENGTH JSON_CONTAINS JSON_CONTAINS_PATH JSON_SEARCH JSON_TYPE JSON_VALID
    JSON_DEPTH JSON_QUERY JSON_DETAILED JSON_PRETTY JSON_COMPACT JSON_LOOSE JSON_EXISTS
    JSON_OVERLAPS JSON_MERGE JSON_MERGE_PATCH JSON_MERGE_PRESERVE JSON_QUOTE JSON_INSERT
    JSON_REPLACE JSON_SET JSON_REMOVE JSON_ARRAY_APPEND JSON_ARRAY_INSERT JSON_OBJECT JSON_ARRAY
    JSON_ARRAYAGG JSON_OBJECTAGG JSON_EQUALS JSON_NORMALIZE
    """.split()
)
_INFO_SCHEMA_TABLES: Final = frozenset(
    {"TABLES", "COLUMNS", "STATISTICS", "KEY_COLUMN_USAGE", "TABLE_CONSTRAINTS",
     "REFERENTIAL_CONSTRAINTS", "VIEWS", "PARTITIONS"}
)  # fmt: skip


class GuardedQuery(msgspec.Struct, frozen=True, kw_only=True):
    """SQL accepted by the guard: driver text (`%s` placeholders, `%` doubled) and its params."""

    text: str
    params: tuple[Param, ...]
    kind: str  # "select", "explain" or "describe"
    tables: tuple[str, ...]


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


def _statement_text(sql: str, scan: _Scan) -> str:
    """Driver text: the final `;` dropped, `?` as `%s`, every other `%` doubled."""
    if scan.semicolons:
        last = scan.semicolons[-1]
        tail_is_empty = all(
            ch in _SPACE or any(a <= k < b for a, b in scan.comments)
            for k, ch in enumerate(sql[last + 1 :], start=last + 1)
        )
        if len(scan.semicolons) > 1 or not tail_is_empty:
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
        statements = [s for s in _DIALECT.parser().parse(tokens, sql) if s is not None]
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


def _check_table(node: exp.Table | exp.Column, schema: str | None) -> str | None:
    if node.args.get("catalog"):
        raise _refuse("tables must be named as table or schema.table")
    db = node.text("db")
    if isinstance(node, exp.Table):
        name = node.name
        if db.lower() == "information_schema":
            if name.upper() not in _INFO_SCHEMA_TABLES:
                raise _refuse(f"information_schema.{name} is not allowed")
            return f"information_schema.{name.lower()}"
    if db and db != schema:
        raise _refuse(f"schema `{db}` is outside this data source")
    return node.name.lower() if isinstance(node, exp.Table) else None


def _check_tree(target: exp.Expr, schema: str | None) -> tuple[str, ...]:
    tables: set[str] = set()
    for node in target.walk():
        if isinstance(node, _FORBIDDEN_NODES):
            raise _refuse(f"{node.key.upper()} is not allowed in a read-only query")
        if isinstance(node, exp.Placeholder) and node.args.get("this"):
            raise _refuse("only ? placeholders are allowed")
        if isinstance(node, exp.Anonymous) and node.name.upper() not in _ALLOWED_ANONYMOUS:
            raise _refuse(f"function {node.name.upper()} is not allowed")
        if isinstance(node, _FORBIDDEN_FUNCS):
            raise _refuse(f"function {node.key.upper()} is not allowed")
        if isinstance(node, exp.Table | exp.Column):
            name = _check_table(node, schema)
            if name and isinstance(node.this, exp.Identifier):
                tables.add(name)
    return tuple(sorted(tables))


def guard_sql(sql: str, params: list[Param], *, schema: str | None = None) -> GuardedQuery:
    """Accept one read-only SELECT with `?` placeholders or raise `SourceError`
    (`FORBIDDEN_QUERY` for the text, `SCHEMA` for the params). `schema` is the data source's
    database: the only qualifier a table may carry (besides a few information_schema views)."""
    if not sql.strip():
        raise _refuse("the statement is empty")
    if len(sql) > MAX_SQL_CHARS:
        raise _refuse(f"the statement is longer than {MAX_SQL_CHARS} characters")
    scan = _scan(sql)
    tokens = _check_agreement(sql, scan)
    text = _statement_text(sql, scan)
    values = _check_params(params, len(scan.placeholders))
    kind, target = _root_kind(_parse(sql, tokens))
    tables = _check_tree(target, schema)
    return GuardedQuery(text=text, params=values, kind=kind, tables=tables)
