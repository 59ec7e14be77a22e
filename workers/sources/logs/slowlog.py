"""The MySQL / MariaDB slow query log → one `Entry` per statement.

An entry is a run of `# ` header lines (`# Time:`, `# User@Host:`, MariaDB's `# Thread_id:`
and `# Rows_affected:`, `# Query_time: … Lock_time: … Rows_sent: … Rows_examined: …`),
optional `use db;`, `SET timestamp=<epoch>;` and the statement up to the next header. The
epoch of `SET timestamp` is the time (it has no zone to get wrong); `# Time:` (MySQL's ISO
form or MariaDB's `YYMMDD HH:MM:SS`, read in the topic's zone) is the fallback. The server's
start-up banner (version, port, socket) is skipped, never a record.

Fields as the MOCK slow-query topic has them: `duration_ms`, `lock_time_ms`, `rows_sent`,
`rows_examined` (and `rows_affected` when logged), `db_user`, `client_host`, `schema`, `table` (the
tables the statement names),
`sql_template` (literals → `?`, lists → `(?+)`, spaces collapsed) and `sql_digest` (its
hash); the message is the statement. Level is `WARN`, as for the MOCK topic.
"""

from __future__ import annotations

import hashlib
import math
import re
from datetime import datetime, tzinfo
from typing import Final

from contracts.results import JsonScalar
from workers.sources.logs.records import Entry

__all__ = ["SlowLog", "sql_template"]

_PAIR: Final = re.compile(r"(\w+): +(?!\w+: )(\S+)")  # `Schema:   Last_errno: 0`: no schema
_USER: Final = re.compile(r"# User@Host: (\S*?)\[[^\]]*\] @ (\S*) \[([^\]]*)\]")
# Bounded: int() of 5,000 digits raises; a longer number is no timestamp
_SET_TS: Final = re.compile(r"SET timestamp=(\d{1,12});", re.I)
_USE: Final = re.compile(r"use `?([^`;\s]+)`?;", re.I)
_BANNER: Final = ("Tcp port:", "Time     ", "Time\t", "Time Id Command")
_MAX_SQL: Final = 64 * 1024
_TEMPLATE: Final = (
    # An unclosed literal runs to the end: a closing quote required would re-scan the rest
    # from every quote, quadratic on a hostile statement (64 kB of \\' took seconds).
    (re.compile(r"'(?:[^'\\]|\\.|'')*+(?:'|\Z)"), "?"),
    (re.compile(r'"(?:[^"\\]|\\.)*+(?:"|\Z)'), "?"),
    (re.compile(r"\b0x[0-9a-f]+\b", re.I), "?"),
    (re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?\b", re.I), "?"),
    (re.compile(r"\(\s*\?(?:\s*,\s*\?)*\s*\)"), "(?+)"),
    (re.compile(r"\s+"), " "),
)
_TABLE: Final = re.compile(r"\b(?:FROM|JOIN|UPDATE|INTO|TABLE)\s+`?(\w+)`?(?:\.`?(\w+)`?)?", re.I)
_MS_FIELDS: Final = {"Query_time": "duration_ms", "Lock_time": "lock_time_ms"}
_COUNT_FIELDS: Final = {
    "Rows_sent": "rows_sent", "Rows_examined": "rows_examined", "Rows_affected": "rows_affected",
}  # fmt: skip


_QUOTE_OR_ESCAPE: Final = re.compile(r"""\\.|['"`]""", re.S)
_MAX_DIGITS: Final = 18  # a count fits an int64; longer is a hostile or broken header
_MAX_NUMBER_CHARS: Final = 32


def _open_quote(text: str, quote: str) -> str:
    """The quote left open after `text`, starting inside `quote` ("" for none): linear, so a
    `# ` line inside a multi-line literal is known as SQL, not a header of a new entry."""
    for found in _QUOTE_OR_ESCAPE.finditer(text):
        token = found.group()
        if token[0] == "\\":
            continue  # an escaped character (a quote inside a literal)
        if not quote:
            quote = token
        elif token == quote:
            quote = ""  # closed ('' inside a literal closes and reopens: still open after)
    return quote


def _bounded_number(text: str) -> float | None:
    """A header's number, finite and of reasonable length, else None (never an exception)."""
    if len(text) > _MAX_NUMBER_CHARS:
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def sql_template(sql: str) -> str:
    """The statement with its literals masked: one template per query shape."""
    text = sql.strip().rstrip(";")
    for pattern, replacement in _TEMPLATE:
        text = pattern.sub(replacement, text)
    return text.strip()


class SlowLog:
    """A multi-line parser: an entry is complete when the next one's header starts."""

    def __init__(self, zone: tzinfo, service: str) -> None:
        self.zone, self.service, self.failed = zone, service or "mysql", 0
        # The server writes `use db;` only when the database differs from the last one it
        # logged (MySQL's and MariaDB's slow log writer): the statements after it are in it.
        self._use = ""
        self._reset()

    def _reset(self) -> None:
        self._fields: dict[str, JsonScalar] = {}
        self._time: int | None = None
        self._sql: list[str] = []
        self._size = 0
        self._open = False
        self._quote = ""  # the quote of a string literal left open at the end of a line

    def _header_time(self, text: str) -> int | None:
        text = text.strip()
        for fmt in ("%y%m%d %H:%M:%S", "%y%m%d  %H:%M:%S"):
            try:
                moment = datetime.strptime(text, fmt).replace(tzinfo=self.zone)
                return int(moment.timestamp() * 1000)
            except ValueError:
                continue
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=self.zone)
        return int(moment.timestamp() * 1000)

    def _header(self, line: str) -> None:
        if line.startswith("# Time:"):
            self._time = self._header_time(line[7:])
            return
        if user := _USER.match(line):
            self._fields["db_user"] = user.group(1)
            self._fields["client_host"] = user.group(3) or user.group(2)
            return
        for key, value in _PAIR.findall(line):
            if key in _MS_FIELDS:
                seconds = _bounded_number(value)
                if seconds is not None:
                    self._fields[_MS_FIELDS[key]] = round(seconds * 1000, 3)
            elif key in _COUNT_FIELDS and value.isdigit() and len(value) <= _MAX_DIGITS:
                self._fields[_COUNT_FIELDS[key]] = int(value)
            elif key == "Schema":
                self._fields["schema"] = value
            elif key == "Thread_id":
                self._fields["thread_id"] = value

    def feed(self, line: str) -> list[Entry]:
        text = line.rstrip("\r\n")
        out: list[Entry] = []
        if self._quote:  # inside a string literal of the statement: `# Time:` there is SQL
            self._add_sql(text)
            return out
        if text.startswith("# ") or text.rstrip() == "#":  # MariaDB's EXPLAIN between `#`
            if self._sql:  # a header after a statement: the entry before it is complete
                out = self.flush()
            self._open = True
            self._header(text)
            return out
        banner = text.startswith(_BANNER) or (" Version: " in text and "started with:" in text)
        if not self._open or banner or " Version: " in text:
            self.failed += bool(text.strip()) and not self._open and not banner
            return out
        if found := _SET_TS.match(text):
            self._time = int(found.group(1)) * 1000
        elif found := _USE.fullmatch(text.strip()):
            self._use = self._fields["schema"] = found.group(1)
        else:
            self._add_sql(text)
        return out

    def _add_sql(self, text: str) -> None:
        self._quote = _open_quote(text, self._quote)
        if self._size < _MAX_SQL:
            self._sql.append(text)
            self._size += len(text) + 1

    def flush(self) -> list[Entry]:
        sql = "\n".join(self._sql).strip()
        when, fields = self._time, self._fields
        self._reset()
        if when is None or not sql:
            self.failed += bool(sql)
            return []
        if self._use:
            fields.setdefault("schema", self._use)  # its own `# Schema:` header wins
        template = sql_template(sql)
        fields["sql_template"] = template
        fields["sql_digest"] = hashlib.blake2b(template.encode(), digest_size=8).hexdigest()
        fields["db_instance"] = self.service
        tables = dict.fromkeys(m.group(2) or m.group(1) for m in _TABLE.finditer(template))
        if tables:
            fields["table"] = ",".join(list(tables)[:8])
        return [Entry(when, "WARN", self.service, sql, fields)]
