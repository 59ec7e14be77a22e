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
import re
from datetime import datetime, tzinfo
from typing import Final

from contracts.results import JsonScalar
from workers.sources.logs.records import Entry

__all__ = ["SlowLog", "sql_template"]

_PAIR: Final = re.compile(r"(\w+): +(\S+)")
_USER: Final = re.compile(r"# User@Host: (\S*?)\[[^\]]*\] @ (\S*) \[([^\]]*)\]")
_SET_TS: Final = re.compile(r"SET timestamp=(\d+);", re.I)
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
        self._reset()

    def _reset(self) -> None:
        self._fields: dict[str, JsonScalar] = {}
        self._time: int | None = None
        self._sql: list[str] = []
        self._size = 0
        self._open = False

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
                try:
                    self._fields[_MS_FIELDS[key]] = round(float(value) * 1000, 3)
                except ValueError:
                    continue
            elif key in _COUNT_FIELDS and value.isdigit():
                self._fields[_COUNT_FIELDS[key]] = int(value)
            elif key == "Schema":
                self._fields["schema"] = value
            elif key == "Thread_id":
                self._fields["thread_id"] = value

    def feed(self, line: str) -> list[Entry]:
        text = line.rstrip("\n")
        out: list[Entry] = []
        if text.startswith("# "):
            if self._sql:  # a header after a statement: the entry before it is complete
                out = self.flush()
            self._open = True
            self._header(text)
            return out
        if not self._open or text.startswith(_BANNER) or " Version: " in text:
            self.failed += bool(text.strip()) and not self._open and not text.startswith(_BANNER)
            return out
        if found := _SET_TS.match(text):
            self._time = int(found.group(1)) * 1000
        elif found := _USE.fullmatch(text.strip()):
            self._fields["schema"] = found.group(1)
        elif self._size < _MAX_SQL:
            self._sql.append(text)
            self._size += len(text) + 1
        return out

    def flush(self) -> list[Entry]:
        sql = "\n".join(self._sql).strip()
        when, fields = self._time, self._fields
        self._reset()
        if when is None or not sql:
            self.failed += bool(sql)
            return []
        template = sql_template(sql)
        fields["sql_template"] = template
        fields["sql_digest"] = hashlib.blake2b(template.encode(), digest_size=8).hexdigest()
        fields["db_instance"] = self.service
        tables = dict.fromkeys(m.group(2) or m.group(1) for m in _TABLE.finditer(template))
        if tables:
            fields["table"] = ",".join(list(tables)[:8])
        return [Entry(when, "WARN", self.service, sql, fields)]
