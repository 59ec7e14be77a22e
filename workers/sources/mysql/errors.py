"""Server and driver errors of `query_mysql` as safe `SourceError`s.

Server error texts name the physical schema (`FUNCTION db.fn does not exist`), the account,
the host or stored values: none of it is forwarded. Each errno gets a fixed message; a name is
echoed only when the caller's own statement contains it (see `_echo`). TIMEOUT and UNAVAILABLE
(retryable) are told apart from EXECUTION, a write attempt is FORBIDDEN_QUERY, a denied object
AUTHORIZATION.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

from contracts.status import ErrorCode
from workers.sources.base import SourceError

if TYPE_CHECKING:
    from workers.sources.mysql.source import ConnectParams

__all__ = [
    "Unavailable",
    "error_number",
    "error_text",
    "map_error",
    "value_changing",
    "warning_error",
    "warning_text",
]

_TIMEOUT_CODES: Final = frozenset({1969, 3024, 1317, 1028, 1205})
_UNAVAILABLE_CODES: Final = frozenset(
    {1040, 1042, 1043, 1044, 1045, 1049, 1053, 1077, 1152, 1158, 1159, 1160, 1161, 1927, 2002, 2003,
     2005, 2006, 2013, 2014, 2026, 2055, 4031}
)  # fmt: skip
# Of those, the ones a retry cannot cure: the account refused (1045), no such database (1049),
# a database the account may not use (1044: MariaDB's answer to a typo in the URL's database
# name when the account cannot see it; a statement never meets it: the guard allows no `USE`
# and no other schema, so only the connection's own database can be refused).
_CONFIGURATION_CODES: Final = frozenset({1044, 1045, 1049})
_DATABASE_CODES: Final = frozenset({1044, 1049})
_DENIED_CODES: Final = frozenset({1142, 1143, 1227, 1370, 1356})
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
# What an operator reads in the worker's log for a data source that stops answering (the
# agent's message stays the errno alone): the errno's cause, and where to look.
_UNAVAILABLE_CAUSES: Final = {
    1040: "the server has too many connections",
    1044: "its URL names a database the account may not use: check the database name in the"
    " URL, or the GRANT",
    1045: "the user or password in its URL is wrong",
    1049: "its URL names a database the server does not have: check the database name in the URL",
    2002: "no server answers at the socket of its URL",
    2003: "no server answers at the host and port of its URL",
    2005: "the host name of its URL does not resolve",
    2006: "the server closed the connection",
    2013: "the server closed the connection",
}
_FUNCTION_MESSAGE: Final = (
    "unknown function or wrong number of arguments; only pure built-in functions may be called"
)


class Unavailable(SourceError):
    """UNAVAILABLE (retryable), keeping the server's or driver's error number for the log
    (0: a socket error without one)."""

    def __init__(self, errno: int) -> None:
        if errno in _CONFIGURATION_CODES:  # the server answered: its settings are wrong
            super().__init__(
                ErrorCode.UNAVAILABLE,
                f"the data source is unavailable (error {errno}): it refuses this worker's "
                "settings; retrying will not help until an operator fixes them",
                retryable=False,
            )
        else:
            said = f" (error {errno}); try again later" if errno else ""
            super().__init__(
                ErrorCode.UNAVAILABLE, f"the data source is unavailable{said}", retryable=True
            )
        self.errno = errno

    @property
    def account_refused(self) -> bool:
        """The server answered, and refused the account: the URL is wrong, not the server."""
        return self.errno == 1045

    @property
    def state(self) -> str:
        """What the worker's log says of the data source: it refuses the account, or the
        database its URL names, or it is unreachable."""
        if self.account_refused:
            return "refuses the worker's account"
        if self.errno in _DATABASE_CODES:
            return "refuses the database its URL names"
        return "is unreachable"

    @property
    def cause(self) -> str:
        """The operator's reading of the errno, e.g. `error 2003: no server answers at ...`."""
        if not self.errno:
            return "a network error"
        known = _UNAVAILABLE_CAUSES.get(self.errno)
        return f"error {self.errno}: {known}" if known else f"error {self.errno}"


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
        # The errno tells the operator why (1045: the account was refused, 2003: no server).
        return Unavailable(errno)
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


def error_number(exc: BaseException) -> int:
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else 0


def error_text(exc: BaseException) -> str:
    args: tuple[Any, ...] = tuple(getattr(exc, "args", ()))
    return str(args[1]) if len(args) > 1 else ""


# Warnings that change no returned value: the rows come back with them said beside (Control
# View and, briefly, the model). Every other warning may mean a cut or wrong value (1260 a
# GROUP_CONCAT cut, 1292 a truncated or wrong-typed value, 1931 a cut result set, 1139 a
# regex limit, 1301 NULL from max_allowed_packet, or one not listed here): the call fails.
_HARMLESS_WARNINGS: Final = {
    1052: "a column name is ambiguous (e.g. a ROLLUP alias); the server chose one",
    1287: "deprecated syntax",
    1365: "division by zero; the server answered NULL",
    1681: "deprecated syntax (integer display width)",
}


def value_changing(code: int) -> bool:
    """Whether a warning may mean a cut or wrong value (then the call is an error)."""
    return code not in _HARMLESS_WARNINGS


def warning_text(code: int) -> str:
    """`warning 1365: division by zero; the server answered NULL` (a fixed text per code)."""
    return f"warning {code}: {_HARMLESS_WARNINGS.get(code, 'see the server manual')}"


def warning_error(code: int) -> SourceError:
    """A server warning on a query: its answer may be wrong, so it is an EXECUTION error with
    a fixed text, never evidence."""
    fixed = _FIXED_MESSAGES.get(code, "its answer may be wrong")
    return SourceError(ErrorCode.EXECUTION, f"the query raised warning {code}: {fixed}")
