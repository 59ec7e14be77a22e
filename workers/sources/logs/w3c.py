"""The W3C extended log format (`format = "w3c"`): IIS, CloudFront and other servers.

Directive lines (`#Software:`, `#Version:`, `#Date:`, `#Fields:`, `#Remark:` ...) are neither
records nor lines not in the format. `#Fields:` names the columns of the data lines after it
and may change mid-file (IIS writes a new header when it restarts); a data line of another
number of columns is not in the format. Values are separated by spaces (IIS, which writes a
space inside a value as `+`) or by tabs (CloudFront); `-` is empty. Times are UTC by the spec
(`date` and `time`, or `time` and the `#Date:` directive's day): the topic's zone is not used.
Without a `date` column, a time more than 12 hours before the line before it (the first
line: the `#Date:` directive's time) is on the next day (a file that goes on past midnight
without a new header, a header written just before it), unless that would be after the file's
last write (a line out of order); a new `#Date:` is the day again.

Columns become fields: those of an access log under the access formats' names (`c-ip` is
`client`, `sc-status` `http_status`, `cs-uri-stem` `uri`, `time-taken` `duration_ms`, ...,
`_NAMES`), every other one lowercased, each run of other characters `_` (`x-edge-location`
is `x_edge_location`, `cs(X-Request-Id)` `cs_x_request_id`); the topic's `fields` map names
a column otherwise (our name = the column as `#Fields:` writes it). `time-taken` is
milliseconds when `#Software:` names Microsoft (IIS, Exchange), else the spec's seconds
(CloudFront's `0.082`), shown in ms. The message is the request as the access formats write
it (`GET /orders?q=1 HTTP/1.1 200 1234`), or with no request column (a firewall's) the values
as written less the time, one under a secret's name masked as its field is (the message names
no column); level from the status (`accesslog.status_level`).

A data line before any `#Fields:` (a file cut at rotation, or the tail a file's time is peeked
from), or of another number of columns than its `#Fields:` says (files concatenated), is read
with IIS's own columns when it has their number (`_IIS_DEFAULTS`: the default 15 since IIS 8.5,
14 before; all 22; each with a custom `X-Forwarded-For` last, an address) and its date, time,
status and time taken read as such: the layouts Filebeat's IIS module reads without a header.
Any other such line is not in the format; before any `#Fields:` it is counted in `headless`
(the call's notes say why).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Final

from contracts.results import JsonScalar
from workers.sources.logs.accesslog import status_level
from workers.sources.logs.masking import log_secret_name, mask_fields
from workers.sources.logs.records import Entry
from workers.sources.logs.stamps import MAX_EPOCH_MS, MIN_EPOCH_MS

__all__ = ["W3C_FIELDS", "W3c"]

# A column (lowercased) -> its field, the access formats' names where they have one.
_NAMES: Final = {
    "c-ip": "client", "cs-username": "user", "cs-method": "method", "cs-uri-stem": "uri",
    "cs-uri": "uri", "cs-uri-query": "uri_query", "cs-version": "protocol",
    "cs-protocol-version": "protocol", "sc-status": "http_status", "sc-bytes": "bytes",
    "cs-bytes": "bytes_received", "time-taken": "duration_ms", "cs(user-agent)": "user_agent",
    "cs(referer)": "referer", "cs(cookie)": "cookie", "cs-host": "host", "cs(host)": "host",
    "s-ip": "server_ip", "s-port": "server_port", "s-sitename": "site",
    "s-computername": "server", "sc-substatus": "substatus", "sc-win32-status": "win32_status",
    "c-port": "client_port", "cs-protocol": "scheme", "x-forwarded-for": "forwarded_for",
}  # fmt: skip
_INTEGERS: Final = frozenset({"http_status", "bytes", "bytes_received"})
# Fields a query may name: the mapped ones and CloudFront's standard columns.
W3C_FIELDS: Final = (
    *dict.fromkeys(_NAMES.values()), "x_edge_location", "x_edge_result_type",
    "x_edge_request_id", "x_host_header", "x_edge_response_result_type",
    "x_edge_detailed_result_type", "ssl_protocol", "ssl_cipher", "time_to_first_byte",
    "sc_content_type", "sc_content_len", "sc_range_start", "sc_range_end", "fle_status",
    "fle_encrypted_fields", "c_country", "fields_dropped",
)  # fmt: skip
# IIS's default columns (IIS Manager's "W3C" default): 8.5 and later, and 7.0 to 8.0.
_IIS_85: Final = (
    "date", "time", "s-ip", "cs-method", "cs-uri-stem", "cs-uri-query", "s-port",
    "cs-username", "c-ip", "cs(User-Agent)", "cs(Referer)", "sc-status", "sc-substatus",
    "sc-win32-status", "time-taken",
)  # fmt: skip
# IIS's "all fields" selection, in the order it writes them
_IIS_ALL: Final = (
    "date", "time", "s-sitename", "s-computername", "s-ip", "cs-method", "cs-uri-stem",
    "cs-uri-query", "s-port", "cs-username", "c-ip", "cs-version", "cs(User-Agent)", "cs(Cookie)",
    "cs(Referer)", "cs-host", "sc-status", "sc-substatus", "sc-win32-status", "sc-bytes",
    "cs-bytes", "time-taken",
)  # fmt: skip
# By their number of columns, each also with the custom X-Forwarded-For column last (the
# layouts Filebeat's IIS module reads without a header)
_IIS_DEFAULTS: Final = {
    14: tuple(c for c in _IIS_85 if c != "cs(Referer)"), 15: _IIS_85,
    16: (*_IIS_85, "X-Forwarded-For"), 22: _IIS_ALL, 23: (*_IIS_ALL, "X-Forwarded-For"),
}  # fmt: skip
_ADDRESSES: Final = re.compile(r"[0-9A-Fa-f:.%]+(?:, ?[0-9A-Fa-f:.%]+)*")
_MAX_COLUMNS: Final = 64  # more are dropped (`fields_dropped`): a hostile `#Fields:` line
_OTHER: Final = re.compile(r"[^a-z0-9]+")
_DATE: Final = re.compile(r"\d{4}-\d\d-\d\d")
_TIME: Final = re.compile(r"\d\d:\d\d:\d\d(?:\.\d{1,6})?")
_CLOCK: Final = ("date", "time")


def _field_of(column: str, ours: Mapping[str, str]) -> str:
    low = column.lower()
    return ours.get(low) or _NAMES.get(low) or _OTHER.sub("_", low).strip("_") or "column"


class W3c:
    """One file of W3C extended log lines (module docstring)."""

    def __init__(self, fields: Mapping[str, str], service: str, now_ms: int | None = None) -> None:
        self.service, self.failed, self.headless = service, 0, 0
        # no midnight is passed into the future: past `now` (an hour's leeway for clocks)
        self.latest = None if now_ms is None else now_ms + _DAY_MS // 24
        self.ours = {theirs.lower(): name for name, theirs in fields.items()}
        self.columns: tuple[str, ...] | None = None  # the raw names; None before `#Fields:`
        self.names: tuple[str, ...] = ()
        self.day = ""  # the `#Date:` directive's, for a file without a `date` column
        self.days_on = 0  # ... and the midnights passed since it (`_dated`)
        self.last_ms: int | None = None  # the time of the last line dated by it
        self.millis = False  # time-taken in ms: `#Software:` names Microsoft
        self.defaults = {
            n: tuple(_field_of(c, self.ours) for c in columns)
            for n, columns in _IIS_DEFAULTS.items()
        }

    def _directive(self, text: str) -> None:
        name, _, value = text[1:].partition(":")
        match name.strip().lower():
            case "fields":
                self._use(tuple(value.split()))
            case "software":
                self.millis = "microsoft" in value.lower()
            case "date" if _DATE.match(value.strip()):
                self.day = value.strip()[:10]
                # the header's own time is the line before the first (a header at 23:59:50,
                # its first line at 00:00:05: the next day's)
                clock = value.strip()[10:].strip()
                self.days_on, self.last_ms = 0, _epoch(self.day, clock) if clock else None

    def _use(self, columns: tuple[str, ...]) -> None:
        self.columns, self.names = columns, tuple(_field_of(c, self.ours) for c in columns)

    def feed(self, line: str) -> list[Entry]:
        text = line.rstrip("\r\n").lstrip("\ufeff")
        if not text.strip():
            return []
        if text.startswith("#"):
            self._directive(text)
            return []
        values = text.split("\t") if "\t" in text else text.split()
        found: Entry | None = None
        if self.columns is not None and len(values) == len(self.columns):
            found = self._entry(values, self.names, self.millis)
        elif (default := self.defaults.get(len(values))) is not None:
            found = self._entry(values, default, True)  # no header, or not this header's
            forwarded = found.fields.get("forwarded_for", "") if found is not None else ""
            if not _ADDRESSES.fullmatch(str(forwarded) or "0"):
                found = None
        if found is None:
            self.failed += 1
            self.headless += self.columns is None
            return []
        return [found]

    def flush(self) -> list[Entry]:
        return []

    def _dated(self, epoch: int) -> int:
        """A time on the `#Date:` directive's day, moved on by the midnights the file has
        passed since: a time more than 12 hours before the last line's is the next day's,
        unless that day's time is still to come (a line of a later time before it was out of
        order: a clock's jump, not a midnight)."""
        epoch += self.days_on * _DAY_MS
        if (
            self.last_ms is not None
            and epoch < self.last_ms - _DAY_MS // 2
            and (self.latest is None or epoch + _DAY_MS <= self.latest)
        ):
            self.days_on += 1
            epoch += _DAY_MS
        self.last_ms = epoch
        return epoch

    def _entry(self, values: list[str], names: tuple[str, ...], millis: bool) -> Entry | None:
        fields: dict[str, JsonScalar] = {}
        day, clock, dropped = self.day, "", 0
        for name, value in zip(names, values, strict=True):
            if name == "date":
                day = value
            elif name == "time":
                clock = value
            elif value != "-" and value:
                if len(fields) >= _MAX_COLUMNS:
                    dropped += 1
                    continue
                fields.setdefault(name, value)
        epoch = _epoch(day, clock)
        if epoch is None or not _numbers(fields, millis):
            return None
        if "date" not in names:
            epoch = self._dated(epoch)
        if dropped:
            fields["fields_dropped"] = dropped
        code = fields.get("http_status")
        status = code if isinstance(code, int) else None
        if "method" in fields or "uri" in fields:
            request = " ".join(
                str(part)
                for part in (fields.get("method", "-"), _target(fields), fields.get("protocol"))
                if part is not None
            )
            message = f"{request} {code if code is not None else '-'} {fields.get('bytes', '-')}"
        else:  # no request (a firewall's W3C log): the columns as written, less the time
            message = " ".join(
                _shown(n, v) for n, v in zip(names, values, strict=True) if n not in _CLOCK
            )
        return Entry(epoch, status_level(status), self.service, message, fields)


_DAY_MS: Final = 86_400_000


def _shown(name: str, value: str) -> str:
    """A column's value in the message, which names no column: masked as its field is when
    its name is a secret's (`x-password`)."""
    if value == "-" or not log_secret_name(name):
        return value
    one: dict[str, JsonScalar] = {name: value}
    mask_fields(one)
    return str(one[name])


def _target(fields: Mapping[str, JsonScalar]) -> str:
    uri, query = fields.get("uri", "-"), fields.get("uri_query")
    return f"{uri}?{query}" if query is not None else str(uri)


def _epoch(day: str, clock: str) -> int | None:
    if not _DATE.fullmatch(day) or not _TIME.fullmatch(clock):
        return None
    try:
        ms = int(datetime.fromisoformat(f"{day}T{clock}").replace(tzinfo=UTC).timestamp() * 1000)
    except ValueError:  # month 13
        return None
    return ms if MIN_EPOCH_MS <= ms <= MAX_EPOCH_MS else None


def _numbers(fields: dict[str, JsonScalar], millis: bool) -> bool:
    """The numeric columns as numbers (False: one is not a number, the line is no record)."""
    for name in _INTEGERS.intersection(fields):
        value = fields[name]
        if not (isinstance(value, str) and value.isdigit() and len(value) < 19):
            return False
        fields[name] = int(value)
    taken = fields.get("duration_ms")
    if isinstance(taken, str):
        if millis and taken.isdigit() and len(taken) < 19:
            fields["duration_ms"] = int(taken)
        elif re.fullmatch(r"\d{1,12}(?:\.\d{1,9})?", taken):
            fields["duration_ms"] = round(float(taken) * 1000, 3) if not millis else float(taken)
        else:
            return False
    return True
