"""PostgreSQL's csvlog (`format = "postgresql_csv"`, `log_destination = 'csvlog'`).

One record per CSV row of PostgreSQL's documented columns: 22 (8.3, 8.4), 23 (9.0 to 12:
`application_name`), 24 (13: `backend_type`) or 26 (14 and later: `leader_pid`, `query_id`).
A quoted value may span lines (a statement written over several): lines are joined while a
quote is open, up to `multiline`'s caps (a quote open past them, or to the end of the file,
leaves its first line not in the format and the lines after it read again: `_cut`), and the
row is read by Python's `csv` module. A row of another number of columns, or whose first
column is no time, is not in the format: each of its lines counted and listed in `rejected`,
timed by the record before it, for the FILE source to match as text as the answer's note says
(not only the line that ended the row).

Read as the `postgresql` text format reads the same report (`dbformats`): `error_severity`
is the level (LOG is INFO, PANIC FATAL, ...), the time's zone as written (`UTC`, `CET`: an
abbreviation of one offset; another, `CST`, is the topic's zone), `duration: N ms` in the
message is `duration_ms`, and the message holds the report's parts as the text log writes
them (`DETAIL:  `, `HINT:  `, `QUERY:  `, `CONTEXT:  `, `LOCATION:  `, `STATEMENT:  `, each on
a line of its own). Fields: `user`, `database`, `pid`, `sql_state` (the text format's names)
and the other columns under their own names (`application_name`, `backend_type`, ...).
"""

from __future__ import annotations

import csv
import re
from datetime import tzinfo
from typing import Final

from contracts.results import JsonScalar
from workers.sources.logs.dbformats import postgresql_ms, statement_ms
from workers.sources.logs.formats import text_entry
from workers.sources.logs.multiline import MAX_JOINED_CHARS, MAX_JOINED_LINES
from workers.sources.logs.records import Entry

__all__ = ["CSVLOG_FIELDS", "CsvLog"]

_COLUMNS: Final = (
    "log_time", "user_name", "database_name", "process_id", "connection_from", "session_id",
    "session_line_num", "command_tag", "session_start_time", "virtual_transaction_id",
    "transaction_id", "error_severity", "sql_state_code", "message", "detail", "hint",
    "internal_query", "internal_query_pos", "context", "query", "query_pos", "location",
    "application_name", "backend_type", "leader_pid", "query_id",
)  # fmt: skip
# 8.3/8.4 have no application_name: their 22 columns are the first 22 of these
_COUNTS: Final = frozenset({22, 23, 24, 26})
# Columns whose field has the `postgresql` text format's name
_RENAMED: Final = {"user_name": "user", "database_name": "database", "process_id": "pid",
                   "sql_state_code": "sql_state"}  # fmt: skip
# A report's parts, joined to its message as the text log writes them (in its order)
_PARTS: Final = (
    ("detail", "DETAIL"), ("hint", "HINT"), ("internal_query", "QUERY"), ("context", "CONTEXT"),
    ("location", "LOCATION"), ("query", "STATEMENT"),
)  # fmt: skip
_NOT_FIELDS: Final = frozenset(
    {"log_time", "error_severity", "message", *(column for column, _ in _PARTS)}
)
CSVLOG_FIELDS: Final = (
    *(_RENAMED.get(c, c) for c in _COLUMNS if c not in _NOT_FIELDS), "duration_ms",
)  # fmt: skip
# `csv` refuses a value over 128 KiB (a process-wide limit): a long statement on one line is
# PostgreSQL's as written, read up to the scan's `max_line_bytes` (only ever raised here).
_LONGEST: Final = 1 << 30
if csv.field_size_limit() < _LONGEST:
    csv.field_size_limit(_LONGEST)
_HEAD: Final = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
_TIME: Final = re.compile(
    r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?)(?: ([A-Za-z]{1,6}|[+-]\d\d(?::?\d\d)?))?"
)


class CsvLog:
    """One file of csvlog rows (module docstring)."""

    def __init__(self, zone: tzinfo, service: str, now_ms: int) -> None:
        self.zone, self.service, self.now_ms, self.failed = zone, service, now_ms, 0
        self.rejected: list[tuple[int | None, str]] = []  # lines not in the format, timed
        self._last_ms: int | None = None  # the time of the last record read
        self._lines: list[str] = []  # the open row's lines (a quote still open)
        self._size = self._quotes = 0

    def feed(self, line: str) -> list[Entry]:
        text = line.rstrip("\r\n")
        if not self._lines:
            if not text.strip():
                return []
            if not _HEAD.match(text.lstrip("\ufeff")):
                self.failed += 1
                self.rejected.append((self._last_ms, text))
                return []
            text = text.lstrip("\ufeff")
        self._lines.append(text)
        self._size += len(text) + 1
        self._quotes += text.count('"')
        if self._quotes % 2 == 0:  # every quote closed: the row ends here
            return self._row()
        if len(self._lines) >= MAX_JOINED_LINES or self._size >= MAX_JOINED_CHARS:
            return self._cut()  # a quote never closed (counted, never joined forever)
        return []

    def flush(self) -> list[Entry]:
        """A row still open at the end of the file (its quote never closed) is no record."""
        return self._cut() if self._lines else []

    def _cut(self) -> list[Entry]:
        """A row whose quote never closed: its first line is not in the format, and the lines
        after it are read again, each a row's first line or not (a row cut short by a crash
        takes none of the rows written after the restart). Each of them holds an even number
        of quotes (an odd one would have closed the row), so none opens a row again: read
        once more at most."""
        first, *after = self._lines
        self._lines = [first]
        self._fail()
        return [entry for line in after for entry in self.feed(line)]

    def _fail(self) -> None:
        self.failed += len(self._lines)
        self.rejected.extend((self._last_ms, line) for line in self._lines)
        self._lines, self._size, self._quotes = [], 0, 0

    def _row(self) -> list[Entry]:
        joined = "\n".join(self._lines)
        try:
            rows = list(csv.reader([joined], strict=True))
        except csv.Error:
            rows = []
        found = self._entry(rows[0]) if len(rows) == 1 and len(rows[0]) in _COUNTS else None
        if found is None:
            self._fail()
            return []
        self._lines, self._size, self._quotes = [], 0, 0
        self._last_ms = found.epoch_ms
        return [found]

    def _entry(self, values: list[str]) -> Entry | None:
        row = dict(zip(_COLUMNS, values, strict=False))
        stamp = _TIME.fullmatch(row["log_time"])
        if stamp is None:
            return None
        epoch = postgresql_ms(stamp.group(1), stamp.group(2) or "", self.zone, self.now_ms)
        if epoch is None:
            return None
        fields: dict[str, JsonScalar] = {}
        for column, value in row.items():
            if value and column not in _NOT_FIELDS:
                fields[_RENAMED.get(column, column)] = value
        message = row["message"]
        if (took := statement_ms(message)) is not None:
            fields["duration_ms"] = took
        parts = [f"{name}:  {row[column]}" for column, name in _PARTS if row[column]]
        if parts:
            message = "\n".join([message, *parts])
        entry = text_entry(epoch, row["error_severity"] or None, message, fields)
        entry.service = self.service
        return entry
