"""The database servers' own logs, as text formats (`textformats` names them all).

- `postgresql`: PostgreSQL's server log with a `log_line_prefix` holding `%m` or `%t` and
  `[%p]` (Debian's and the default `%m [%p] `; `%u@%d` or `user=%u,db=%d` read as fields);
  its `DETAIL:`, `HINT:`, `STATEMENT:`, `CONTEXT:`, `QUERY:` and `LOCATION:` lines join the
  report before them (`multiline.Continued`); the zone it writes (`UTC`, `+08`, an
  abbreviation of one offset: `PDT`, `CEST`, `JST`, `stamps.ZONE_ABBREVIATIONS`) is read,
  another abbreviation (`CST`, `IST`: several offsets) is the topic's `timezone`; a
  statement's time (`duration: 37.118 ms  statement: ...`) is the field `duration_ms`;
- `redis`: the Redis server's log (`pid:role dd Mon yyyy hh:mm:ss.mmm <level> message`; `.`
  debug, `-` verbose, `*` notice, `#` warning); before 4.0 without the year (supplied as
  syslog's), 2.x with `[pid]` first; the signal handler's `pid:signal-handler (epoch) ...`
  (why the server stops) at its `warning` level.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, tzinfo
from typing import Final

from contracts.results import JsonScalar
from workers.sources.logs.formats import text_entry
from workers.sources.logs.multiline import Continued, Pending
from workers.sources.logs.records import Entry
from workers.sources.logs.stamps import ZONE_ABBREVIATIONS, stamp_ms

__all__ = ["foreign_zone", "postgresql_head", "postgresql_ms", "redis_head", "statement_ms"]

Head = Callable[[str], Pending | Continued | None]

_POSTGRESQL: Final = re.compile(
    r"(?P<iso>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?)"
    r"(?: (?P<zone>[A-Za-z]{1,6}|[+-]\d\d(?::?\d\d)?))?"
    # `[%p]`, Debian's `[%p-%l]` before PostgreSQL 10, pgBadger's `[%p]: [%l-1]`
    r" \[(?P<pid>\d+)(?:-(?P<line>\d+))?\]:?(?: \[(?P<pgline>\d+)-\d+\])? ?(?P<pre>[^\n]{0,200}?)"
    r"(?P<level>DEBUG[1-5]|INFO|NOTICE|WARNING|ERROR|LOG|FATAL|PANIC"
    r"|(?P<more>DETAIL|HINT|QUERY|CONTEXT|STATEMENT|LOCATION)):  "
    r"(?:(?P<sqlstate>[0-9A-Z]{5}): )?(?P<message>.*)",  # the SQLSTATE: log_error_verbosity
    re.S,
)
# A csvlog record's first column (`postgresql_csv`): its time and zone
_CSV_HEAD: Final = re.compile(
    r"(?P<iso>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?)(?: (?P<zone>[A-Za-z]{1,6}))?,"
)
# `log_min_duration_statement` / `log_duration`: `duration: 37.118 ms  statement: ...`
_PG_DURATION: Final = re.compile(r"duration: (\d{1,12}(?:\.\d{1,6})?) ms\b")
_PG_USER_DB: Final = re.compile(
    r"(?:user=(?P<u1>[^,\s]*),\s*db=(?P<d1>[^,\s]*))|(?P<u2>[^@\s\[\]]*)@(?P<d2>[^\s\[\]]+)"
)
# pgBadger's `app=%a,client=%h` beside `user=%u,db=%d`: fields under csvlog's names
_PG_PAIRS: Final = re.compile(r"(?<![^\s,])(app|client)=([^,\s]+),?")
_PG_PAIR_FIELDS: Final = {"app": "application_name", "client": "connection_from"}
_REDIS: Final = re.compile(  # Redis 2.x `[pid]`; before 4.0 without the year
    r"(?:(?P<pid>\d+):(?P<role>[XCSM])|\[(?P<old>\d+)\]) (?P<day>\d\d) (?P<mon>[A-Z][a-z]{2})"
    r"(?: (?P<year>\d{4}))? (?P<clock>\d\d:\d\d:\d\d(?:\.\d{3})?)"
    r" (?P<level>[.*#-]) (?P<message>.*)",
    re.S,
)
# Why it stops, from its signal handler (Redis 3 to 7), logged at its `warning` level
_REDIS_SIGNAL: Final = re.compile(
    r"(?P<pid>\d+):signal-handler \((?P<epoch>\d{9,11})\) (?P<message>.*)", re.S
)
_REDIS_LEVEL: Final = {".": ("DEBUG", "debug"), "-": ("DEBUG", "verbose"),
                       "*": ("INFO", "notice"), "#": ("WARN", "warning")}  # fmt: skip
_REDIS_ROLE: Final = {"X": "sentinel", "C": "child", "S": "replica", "M": "master"}


def postgresql_ms(stamp: str, written: str, zone: tzinfo, now_ms: int) -> int | None:
    """The time of a PostgreSQL `%m`/`%t` stamp (`2026-12-04 11:33:20.123`) in the zone it
    is `written` with: an abbreviation of one offset or an offset as written, else `zone`."""
    if offset := ZONE_ABBREVIATIONS.get(written) or ZONE_ABBREVIATIONS.get(written.upper()):
        stamp += offset  # before, any but UTC/GMT was the topic's zone: PDT 7 h off
    elif written[:1] in "+-" and written:
        digits = written[1:].replace(":", "")
        stamp += written[0] + (digits + "00")[:4]
    return stamp_ms("iso", stamp, zone, now_ms)


def statement_ms(message: str) -> float | None:
    """A statement's time a message starts with (`duration: 37.118 ms  statement: ...`)."""
    took = _PG_DURATION.match(message)
    return float(took.group(1)) if took is not None else None


def postgresql_head(zone: tzinfo, now_ms: int) -> Head:
    """A `postgresql` line's head (module docstring). A report's part joins the report before
    it only when both are of one backend (`[%p]`): another backend's part, its lines
    interleaved, is a record of its own."""
    last_pid = [""]  # the backend of the last report read

    def head(text: str) -> Pending | Continued | None:
        found = _POSTGRESQL.match(text)
        if found is None:
            return None
        pid = found.group("pid")
        written = found.group("zone") or ""
        sqlstate = found.group("sqlstate")
        said = f"{sqlstate}: {found.group('message')}" if sqlstate else found.group("message")
        part = f"{found.group('more')}:  {said}"  # a report's part, as written

        def when() -> int | None:
            return postgresql_ms(found.group("iso"), written, zone, now_ms)

        def build(epoch: int) -> Entry:
            fields: dict[str, JsonScalar] = {"pid": found.group("pid")}
            if line := found.group("line") or found.group("pgline"):  # `%l` (before: dropped)
                fields["session_line_num"] = line
            pre = found.group("pre")
            if who := _PG_USER_DB.search(pre):
                user, database = who.group("u1", "d1") if who.group("d1") else who.group("u2", "d2")
                if user:
                    fields["user"] = user
                if database:
                    fields["database"] = database
            rest = pre[: who.start()] + pre[who.end() :] if who else pre
            for name, value in _PG_PAIRS.findall(rest):
                fields[_PG_PAIR_FIELDS[name]] = value
            if any(c.isalnum() for c in _PG_PAIRS.sub("", rest)):  # any other: kept as written
                fields["prefix"] = pre.strip()
            if (took := statement_ms(found.group("message"))) is not None:
                fields["duration_ms"] = took
            if sqlstate and not found.group("more"):
                fields["sql_state"] = sqlstate
            more = found.group("more")
            if more:  # a report's part with no report before it (the file was cut there)
                return text_entry(epoch, None, part, fields)
            return text_entry(epoch, found.group("level"), found.group("message"), fields)

        if found.group("more") and pid == last_pid[0]:  # part of the report before it
            return Continued(part, (when, build))
        last_pid[0] = pid  # a report, or a part alone that the next parts of it join
        return when, build

    return head


def foreign_zone(text: str, zone: tzinfo) -> str:
    """The zone abbreviation a `postgresql` (or `postgresql_csv`) line is written in when it
    names several offsets and is not what `zone` (the topic's) calls itself then: read in
    `zone`, wrongly; else ''."""
    found = _POSTGRESQL.match(text) or _CSV_HEAD.match(text)
    written = (found.group("zone") or "") if found is not None else ""
    one = ZONE_ABBREVIATIONS.get(written) or ZONE_ABBREVIATIONS.get(written.upper())
    if found is None or not written.isalpha() or one:
        return ""  # none, an offset (`+08`), or one of one offset: read as written
    moment = datetime.fromisoformat(found.group("iso")).replace(tzinfo=zone)
    return "" if moment.tzname() == written else written


def redis_head(zone: tzinfo, now_ms: int) -> Head:
    """A `redis` line's head (module docstring)."""

    def head(text: str) -> Pending | None:
        found = _REDIS.match(text)
        if found is None:
            return _redis_signal(text)
        day, month, year, clock = found.group("day", "mon", "year", "clock")

        def when() -> int | None:
            if year is None:  # `30 May 12:50:13.457`: the year supplied as syslog's
                return stamp_ms("bsd", f"{month} {day} {clock}", zone, now_ms)
            return stamp_ms("ctime", f"Mon {month} {day} {clock} {year}", zone, now_ms)

        def build(epoch: int) -> Entry:
            level, name = _REDIS_LEVEL[found.group("level")]
            fields: dict[str, JsonScalar] = {"pid": found.group("pid") or found.group("old")}
            if role := found.group("role"):
                fields["role"] = _REDIS_ROLE[role]
            fields["level_name"] = name
            return Entry(epoch, level, "", found.group("message"), fields)

        return when, build

    return head


def _redis_signal(text: str) -> Pending | None:
    found = _REDIS_SIGNAL.match(text)
    if found is None:
        return None

    def when() -> int | None:
        return int(found.group("epoch")) * 1000

    def build(epoch: int) -> Entry:
        fields: dict[str, JsonScalar] = {"pid": found.group("pid"), "level_name": "warning"}
        return Entry(epoch, "WARN", "", found.group("message"), fields)

    return when, build
