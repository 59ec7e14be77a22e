"""The `syslog` format: RFC 5424, RFC 3164 (year and zone supplied) and rsyslog's RFC 3339
file lines; the level from PRI (severity = PRI mod 8), fields `host`, `app`, `pid`, `facility`
and RFC 5424's `structured_data` (docs/logs.md, "syslog")."""

from __future__ import annotations

import re
from datetime import datetime, tzinfo
from typing import Final

from contracts.results import JsonScalar
from workers.sources.logs.formats import parse_time
from workers.sources.logs.levels import SYSLOG_NAMES, keep_level_name
from workers.sources.logs.records import Entry

__all__ = ["Syslog"]

_SYSLOG_LEVELS: Final = ("FATAL", "FATAL", "FATAL", "ERROR", "WARN", "INFO", "INFO", "DEBUG")
_PRI: Final = re.compile(r"<(\d{1,3})>")
_RFC5424: Final = re.compile(r"1 (\S+) (\S+) (\S+) (\S+) (\S+) (-|\[.*?\](?:\[.*?\])*) ?(.*)", re.S)
# The same without `<PRI>1 ` (tried after an ISO time, no tag), as VMware (ESXi, NSX) writes
_RFC5424_BARE: Final = re.compile(_RFC5424.pattern.removeprefix("1 "), re.S)
# The tag (`app[pid]:`) is optional: a line without one (`syslogd 1.4.1: restart.`,
# `-- root[2421]: ROOT LOGIN ON tty2`, `-- MARK --`) is a record whose message is the rest.
_TAG: Final = r" +(?:([^:\[\s]+(?: \d[\d.]*)?)(?:\[(\d+)\])?: ?)?(.*)"
_RFC3164: Final = re.compile(r"([A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d) (\S+)" + _TAG, re.S)
_ISO_SYSLOG: Final = re.compile(r"(\d{4}-\d\d-\d\dT\S+) (\S+)" + _TAG, re.S)


class Syslog:
    """RFC 5424, RFC 3164 (year and zone supplied), and rsyslog's RFC 3339 file format."""

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
        fields["host"] = host
        if app is not None:
            fields["app"] = app
        if proc and proc != "-":
            fields["pid"] = proc
        if structured != "-":  # RFC 5424's structured data, kept as written (searchable)
            fields["structured_data"] = structured
        service = self.service or (app if app and app != "-" else "")
        return [Entry(epoch, level, service, message.removeprefix("\ufeff"), fields)]

    def flush(self) -> list[Entry]:
        return []
