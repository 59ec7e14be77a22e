"""The `syslog` format: RFC 5424, RFC 3164 (year and zone supplied) and rsyslog's RFC 3339
file lines; the level from PRI (severity = PRI mod 8), fields `host`, `app`, `pid`, `facility`
and RFC 5424's `structured_data` (docs/logs.md, "syslog").

A line that starts with a space or a tab directly after a syslog record is that record's
(Filebeat's syslog input joins `^\\s`): macOS's syslog writes an object's description over
tab-indented lines, a Java stack trace's `\tat` frames come so. So is a Python traceback the
record holds: its `Traceback (most recent call last):` (the record's message, or the line
after it: `logger.exception` through `SysLogHandler`), its indented frames, the unindented
line naming the exception that ends it, the exception's message over lines of their own
(`raise ValueError("bad config:\\nkey 'region' missing")`: every line after it that is no
syslog line's start, until one is), and a chained one's sentence and traceback. They are
joined to its message with `\\n`, up to `multiline.MAX_JOINED_LINES` lines and
`MAX_JOINED_CHARS` characters; a record with a traceback and no level of its own (no PRI) is
ERROR, and `exception` names the class a traceback raised last (else the first a joined line
names, as the other multi-line formats do). Any other line that is no syslog line (an
indented one before any record or after such a line, one past the bound) is a line not in
the format, as before: counted, and matched as text by the FILE source.

The FILE source's prefilter runs on a record's raw lines joined before it is parsed (`keep`),
so a term only a continuation line holds still finds the record. Lines not in the format are
counted as they were when the prefilter ran per line: only a line that passes it, its
secrets masked (a line that cannot match is skipped unparsed and uncounted, whatever it is).
A line skipped so that opens or closes a private key goes, in order, to `skip` (the source
follows keys through them); `probe` keeps the first line that may be a record's head.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, tzinfo
from typing import Final

from contracts.results import JsonScalar
from workers.sources.logs.daemonlogs import read_postfix
from workers.sources.logs.formats import parse_time
from workers.sources.logs.haproxy import read_haproxy
from workers.sources.logs.heroku import read_heroku
from workers.sources.logs.levels import SYSLOG_NAMES, keep_level_name
from workers.sources.logs.masking import without_log_secrets
from workers.sources.logs.multiline import MAX_JOINED_CHARS, MAX_JOINED_LINES, python_raised
from workers.sources.logs.records import Entry

__all__ = ["Syslog", "SyslogRecords"]

_SYSLOG_LEVELS: Final = ("FATAL", "FATAL", "FATAL", "ERROR", "WARN", "INFO", "INFO", "DEBUG")
_PRI: Final = re.compile(r"<(\d{1,3})>")
_RFC5424: Final = re.compile(r"1 (\S+) (\S+) (\S+) (\S+) (\S+) (-|\[.*?\](?:\[.*?\])*) ?(.*)", re.S)
# The same without `<PRI>1 ` (tried after an ISO time, no tag), as VMware (ESXi, NSX) writes
_RFC5424_BARE: Final = re.compile(_RFC5424.pattern.removeprefix("1 "), re.S)
# The tag (`app[pid]:`) is optional: a line without one (`syslogd 1.4.1: restart.`,
# `-- root[2421]: ROOT LOGIN ON tty2`, `-- MARK --`) is a record whose message is the rest.
# Its pid is a number, or (a host-less line's) a word: Heroku's `heroku[router]`, `app[web.1]`.
_TAG: Final = r" +(?:([^:\[\s]+(?: \d[\d.]*)?)(?:\[(\d+|[\w.-]{1,64})\])?: ?)?(.*)"
_RFC3164: Final = re.compile(r"([A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d) (\S+)" + _TAG, re.S)
# rsyslog's RFC 3339 file line; a first word ending in `:` is a tag, not a host (a template
# without `%HOSTNAME%`, Heroku's `heroku logs`: before, `heroku[router]:` was read as the host)
_ISO_SYSLOG: Final = re.compile(r"(\d{4}-\d\d-\d\dT\S+)(?: (?!\S*:(?:\s|$))(\S+))?" + _TAG, re.S)


class Syslog:
    """One line, one record: RFC 5424, RFC 3164 (year and zone supplied), rsyslog's RFC 3339
    file format (`SyslogRecords` joins the lines that continue one)."""

    def __init__(self, zone: tzinfo, service: str, now_ms: int) -> None:
        self.zone, self.service, self.failed = zone, service, 0
        self.now = datetime.fromtimestamp(now_ms / 1000, zone)

    def _yearless(self, text: str) -> int | None:
        for year in (self.now.year, self.now.year - 1):  # Feb 29 read in a common year
            try:
                moment = datetime.strptime(f"{year} {text}", "%Y %b %d %H:%M:%S")
                break
            except ValueError:
                continue
        else:
            return None
        moment = moment.replace(tzinfo=self.zone)
        if (moment - self.now).days >= 1:  # December's lines read in January
            try:
                moment = moment.replace(year=moment.year - 1)
            except ValueError:  # a future Feb 29: no earlier year has it
                return None
        return int(moment.timestamp() * 1000)

    def feed(self, line: str) -> list[Entry]:
        text = line.rstrip("\r\n")
        level, fields = "", dict[str, JsonScalar]()
        pri = _PRI.match(text)
        if pri:
            value = int(pri.group(1))
            level, fields = _SYSLOG_LEVELS[value % 8], {"facility": value // 8}
            keep_level_name(fields, SYSLOG_NAMES[value % 8], level)
            text = text[pri.end() :]
        structured = "-"
        iso = _ISO_SYSLOG.fullmatch(text)
        if found := _RFC5424.fullmatch(text) or (
            iso is not None and iso.group(3) is None and _RFC5424_BARE.fullmatch(text)
        ):  # without `<PRI>1 `: only a line with no `app[pid]:` tag
            epoch = parse_time(found.group(1), self.zone)
            host, app, proc, structured, message = (found.group(i) for i in (2, 3, 4, 6, 7))
            if found.group(5) != "-":  # RFC 5424's MSGID (before: dropped)
                fields["msgid"] = found.group(5)
        elif found := _RFC3164.fullmatch(text) or iso:
            when = found.group(1)
            epoch = parse_time(when, self.zone) if when[0].isdigit() else self._yearless(when)
            host, app, proc, message = (found.group(i) for i in (2, 3, 4, 5))
        else:
            self.failed += bool(text.strip())
            return []
        if epoch is None:
            self.failed += 1
            return []
        if host is not None:
            fields["host"] = host
        if app is not None:
            fields["app"] = app
        if proc and proc != "-":
            fields["pid"] = proc
        if structured != "-":  # RFC 5424's structured data, kept as written (searchable)
            fields["structured_data"] = structured
        service = self.service or (app if app and app != "-" else "")
        entry = Entry(epoch, level, service, message.removeprefix("\ufeff"), fields)
        if app == "haproxy":
            read_haproxy(entry)
        elif app is not None and app.startswith("postfix"):  # `postfix/smtp`, `postfix-out/...`
            read_postfix(entry)
        elif host is None and app in ("heroku", "app"):  # `heroku logs`: no host
            read_heroku(entry)
        return [entry]

    def flush(self) -> list[Entry]:
        return []


_TRACEBACK: Final = "Traceback (most recent call last):"
_CHAINED: Final = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
_EXCEPTION: Final = re.compile(
    r"\s*(?:Caused by: )?([\w$]+(?:\.[\w$]+)*(?:Exception|Error|Throwable|Exit|Interrupt))\b"
)
# How every syslog line starts (a PRI, RFC 3164's date, an ISO date, RFC 5424's version and
# a time without a PRI: a date, epoch seconds): a line after an exception that does not is
# the rest of the exception's message. Each shape `Syslog` reads as a record is here: one
# missing was taken into a message (a user's `Traceback ...` then `ValueError: x` took up to
# 1,000 real records into one).
_HEAD_START: Final = re.compile(
    r"<\d{1,3}>|[A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d |\d{4}-\d\d-\d\dT|1 \d"
)


class SyslogRecords:
    """Syslog's lines to records, each with the lines that continue it (module docstring). A
    record is parsed when the line after it comes (or at `flush`)."""

    def __init__(self, line: Syslog) -> None:
        self.line, self.failed = line, 0
        self.keep: Callable[[str], bool] | None = None  # the prefilter, over a record's lines
        # Each line the prefilter skipped that opens or closes a private key (`masking.KeyLines`
        # changes on no other line): the source follows keys through them.
        self.skip: Callable[[str], None] | None = None
        self.probe: str | None = None  # the first head it skipped, unparsed
        self.rejected: list[tuple[int | None, str]] = []  # lines not in the format, timed
        self._head: str | None = None  # the open record's first line as read, not parsed yet
        self._more: list[str] = []
        self._size = 0
        self._traceback = False  # inside a traceback of the open record: until its exception
        self._seen = False  # the open record holds a traceback
        self._message = False  # after its exception: the message's lines, until a syslog line
        self._raised: str | None = None  # the exception the open record's traceback raised last
        self._last_ms: int | None = None  # the time of the last record parsed
        self._skipped_head: str | None = None  # a head the prefilter skipped after it

    def feed(self, line: str) -> list[Entry]:
        # The common line is a head after a head: a few checks, no copy (its cost beside the
        # per-line prefilter it replaces: docs/logs.md, "Benchmark").
        if not line or line.isspace():
            return []
        head = self._head
        if head is not None and (line[0] in " \t" or self._seen or line.startswith(_TRACEBACK)):
            return self._continued(line.rstrip("\r\n"))
        more, raised = self._more, self._raised
        self._head = line
        self._traceback = self._seen = _TRACEBACK in line and line.rstrip().endswith(_TRACEBACK)
        self._message, self._raised = False, None
        if head is None:
            return []
        if more:
            self._more, self._size = [], 0
            return self._record(head, more, raised)
        if self.keep is not None and not self.keep(head):
            if self.probe is None:  # (`_skipped`, inlined: the line most often taken)
                self.probe = head
            if self.skip is not None and ("PRIVATE KEY" in head or "-----END " in head):
                self.skip(head)
            self._skipped_head = head
            return []
        return self._record(head, more, kept=True)

    def flush(self) -> list[Entry]:
        """The last record, at the end of the file."""
        head, more, raised = self._head, self._more, self._raised
        self._head, self._more, self._size = None, [], 0
        self._traceback = self._seen = self._message = False
        self._raised = None
        return [] if head is None else self._record(head, more, raised)

    def _continued(self, text: str) -> list[Entry]:
        """A line after a head: the record's, or (no continuation) the next head."""
        if not self._continues(text):
            return self.flush() + self.feed(text)
        if len(self._more) < MAX_JOINED_LINES and self._size < MAX_JOINED_CHARS:
            self._more.append(text)
            self._size += len(text) + 1
            return []
        out = self.flush()  # past the bound: no record's, as a line after no record
        self._reject([text])
        return out

    def _continues(self, text: str) -> bool:
        if text[0] in " \t":
            return True
        if text == _TRACEBACK:
            self._traceback = self._seen = True
            self._message = False
            return True
        if self._seen and text in _CHAINED:
            self._message = False
            return True
        if self._traceback and (raised := python_raised(text)):
            # the exception ends the traceback (its message or a chained one may follow)
            self._traceback, self._message, self._raised = False, True, raised
            return True
        return self._message and _HEAD_START.match(text) is None

    def _skipped(self, text: str) -> None:
        """A line the prefilter skipped, unparsed and uncounted, as it would alone."""
        if self.probe is None:
            self.probe = text
        if self.skip is not None and ("PRIVATE KEY" in text or "-----END " in text):
            self.skip(text)

    def _record(
        self, head: str, more: list[str], raised: str | None = None, kept: bool = False
    ) -> list[Entry]:
        """The record of a head and its lines, unless the prefilter says none can match
        (`kept`: it was asked)."""
        joined = "\n".join([head.rstrip("\r\n"), *more]) if more else head
        if not kept and self.keep is not None and not self.keep(joined):
            for text in (head, *more):
                self._skipped(text)  # no line of it can match: each would be skipped alone
            self._skipped_head = head
            return []
        found = self.line.feed(head)
        if not found:  # no syslog line: neither are the lines after it a record's
            self._reject([head, *more])
            return []
        entry = found[0]
        self._last_ms, self._skipped_head = entry.epoch_ms, None
        if more:
            entry.message = "\n".join([entry.message, *more])
            _fields_of(entry, head.rstrip(), more, raised)
        return [entry]

    def _reject(self, lines: list[str]) -> None:
        if (skipped := self._skipped_head) is not None:  # the record before them: its time
            self._skipped_head = None
            failed, found = self.line.failed, self.line.feed(skipped)  # (not matched)
            self.line.failed = failed
            self._last_ms = found[0].epoch_ms if found else self._last_ms
        for line in lines:
            text = line.rstrip("\r\n")
            if self.keep is None or (self.keep(text) and self.keep(without_log_secrets(text))):
                self.failed += 1
                self.rejected.append((self._last_ms, text))
            else:  # as the prefilter per line: skipped, uncounted
                self._skipped(text)


def _fields_of(entry: Entry, head: str, more: list[str], raised: str | None) -> None:
    """A joined record's level and `exception`: a traceback's is the class it raised last
    (`raised`, as its lines were read: never a word of an exception's message)."""
    traceback = head.endswith(_TRACEBACK) or _TRACEBACK in more
    if traceback and not entry.level:
        entry.level = "ERROR"
    exception = raised if traceback else None
    if exception is None:
        exception = next((e.group(1) for line in more if (e := _EXCEPTION.match(line))), None)
    if exception is not None:
        entry.fields["exception"] = exception
