"""Leading timestamps of text log lines: the shapes real producers write, read to epoch ms.

`STAMP` is one regular expression of the shapes (each a named alternative), anchored where
it is used; `stamp_ms` turns a match into epoch milliseconds in the topic's zone. Shapes:

| shape | example | producers |
|---|---|---|
| `iso` | `2024-01-15 10:15:30,123`, `2024-01-15T10:15:30.123Z` | log4j, logback, oslo.log |
| `iso` | `2024-01-15 10:15:30 +0000` (a space before the zone) | gunicorn |
| `iso` | `2024-01-15  8:15:30` (the hour padded with a space) | MariaDB 10 error log |
| `slash` | `2024/01/15 10:15:30` | nginx error log |
| `yslash` | `17/06/09 20:10:40` | log4j `%d{yy/MM/dd HH:mm:ss}` (Spark) |
| `compact` | `081109 203615` | log4j `%d{yyMMdd HHmmss}` (HDFS) |
| `dmy` | `15-Jan-2024 10:15:30.123` | Tomcat's `OneLineFormatter` |
| `ctime` | `Wed Oct 11 14:32:52.123456 2000` | Apache error log |
| `clf` | `10/Oct/2000:13:55:36 -0700` | access logs (common, combined) |
| `jul` | `Dec 04, 2026 7:48:09 PM` | java.util.logging's default `SimpleFormatter` |
| `bsd` | `Jan  5 10:15:30` | syslog-like lines (the year supplied) |
| `clock` | `10:15:30.123` | logback's default `%d{HH:mm:ss.SSS}` (the date supplied) |
| `epoch` | `1796413608:`, `1286536308.779 ` | mosquitto, squid (seconds since 1970, 2001 to 2065) |

A time without a date or year gets the latest one not more than a day ahead of "now" (as
syslog's yearless dates); a time without a zone is read in the topic's zone. Conversions are
cached per second of text, so a file of many lines a second parses each second once.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime, timedelta, tzinfo
from typing import Final

__all__ = [
    "MAX_EPOCH_MS", "MIN_EPOCH_MS", "SHAPES", "STAMP", "ZONE_ABBREVIATIONS", "matched_ms",
    "stamp_ms", "strptime_ms",
]  # fmt: skip

# datetime's range: an epoch outside it cannot be shown (and is not a real log time).
MIN_EPOCH_MS: Final = -62_135_596_800_000  # 0001-01-01T00:00:00Z
MAX_EPOCH_MS: Final = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z

# Zone abbreviations that name one offset in tzdata (2024-2026), as `+hhmm`: a time written
# with one of them (PostgreSQL's `%m`/`%t` in its `log_timezone`) is read at that offset,
# whatever the topic's `timezone`. Those naming several (CST and CDT: US Central or China or
# Cuba; IST: India, Ireland or Israel; PST: US Pacific or the Philippines) are not here: they
# are read in the topic's zone.
ZONE_ABBREVIATIONS: Final = {
    "GMT": "+0000", "UTC": "+0000", "Z": "+0000", "WET": "+0000", "WEST": "+0100",
    "BST": "+0100", "CET": "+0100", "CEST": "+0200", "MET": "+0100", "MEST": "+0200",
    "WAT": "+0100", "EET": "+0200", "EEST": "+0300", "CAT": "+0200", "SAST": "+0200",
    "IDT": "+0300", "MSK": "+0300", "EAT": "+0300", "PKT": "+0500", "WIB": "+0700",
    "HKT": "+0800", "AWST": "+0800", "WITA": "+0800", "JST": "+0900", "KST": "+0900",
    "WIT": "+0900", "ACST": "+0930", "ACDT": "+1030", "AEST": "+1000", "AEDT": "+1100",
    "ChST": "+1000", "NZST": "+1200", "NZDT": "+1300", "NST": "-0330", "NDT": "-0230",
    "AST": "-0400", "ADT": "-0300", "EST": "-0500", "EDT": "-0400", "MST": "-0700",
    "MDT": "-0600", "PDT": "-0700", "AKST": "-0900", "AKDT": "-0800", "HST": "-1000",
    "HDT": "-0900", "SST": "-1100",
}  # fmt: skip

_MON: Final = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_DAY: Final = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_FRAC: Final = r"(?:[.,]\d{1,9})?"
STAMP: Final = (
    # MariaDB 10 pads an hour before 10 with a space: `2026-12-04  8:52:32`
    r"(?:(?P<iso>\d{4}-\d\d-\d\d(?:[T ]\d\d|  \d):\d\d:\d\d"
    + _FRAC
    + r"(?:Z| ?[+-]\d\d:?\d\d(?!\d))?)"
    r"|(?P<slash>\d{4}/\d\d/\d\d[ T]\d\d:\d\d:\d\d" + _FRAC + r")"
    r"|(?P<yslash>\d\d/\d\d/\d\d \d\d:\d\d:\d\d" + _FRAC + r")"
    # `yymmdd hhmmss` (HDFS) and `yymmdd hh:mm:ss`, the hour space-padded (MySQL before 5.7)
    r"|(?P<compact>\d{6} (?:\d{6}|[ \d]\d:\d\d:\d\d))"
    r"|(?P<dmy>\d\d-" + _MON + r"-\d{4} \d\d:\d\d:\d\d" + _FRAC + r")"
    r"|(?P<ctime>" + _DAY + " " + _MON + r" [ \d]\d \d\d:\d\d:\d\d" + _FRAC + r" \d{4})"
    r"|(?P<clf>\d\d/" + _MON + r"/\d{4}:\d\d:\d\d:\d\d [+-]\d{4})"
    r"|(?P<jul>" + _MON + r" \d\d?, \d{4} \d\d?:\d\d:\d\d [AP]M)"
    r"|(?P<bsd>" + _MON + r" [ \d]\d \d\d:\d\d:\d\d" + _FRAC + r")"
    r"|(?P<clock>\d\d:\d\d:\d\d" + _FRAC + r")"
    # seconds since 1970 (2001..2065) before `: ` or `]`, or with a fraction before a space:
    # a line that only starts with a number (`1500000000 bytes sent`) is no time
    r"|(?P<epoch>[12]\d{9}(?:\.\d{1,9}(?=\s)|(?=: |\]))))"
)
_ZONE_SPACE: Final = re.compile(r" (?=[+-]\d\d:?\d\d$)")
_SPLIT_FRACTION: Final = re.compile(r"[.,](\d{1,9})")
_FORMATS: Final = {
    "slash": "%Y/%m/%d %H:%M:%S",
    "yslash": "%y/%m/%d %H:%M:%S",
    "compact": "%y%m%d %H%M%S",
    "dmy": "%d-%b-%Y %H:%M:%S",
    "ctime": "%a %b %d %H:%M:%S %Y",
    "clf": "%d/%b/%Y:%H:%M:%S %z",
    "jul": "%b %d, %Y %I:%M:%S %p",
}


def _bounded(ms: int) -> int | None:
    return ms if MIN_EPOCH_MS <= ms <= MAX_EPOCH_MS else None


def _supplied(moment: datetime, now_ms: int, step: str) -> datetime | None:
    """A date without a year (`step` "year") or a time without a date ("day"): the latest
    such moment not more than a day ahead of now."""
    now = datetime.fromtimestamp(now_ms / 1000, moment.tzinfo)
    try:
        if step == "year":
            for year in (now.year, now.year - 1):  # Feb 29 read in a common year
                try:
                    candidate = moment.replace(year=year)
                    break
                except ValueError:
                    continue
            else:
                return None
            if candidate - now > timedelta(days=1):
                candidate = candidate.replace(year=candidate.year - 1)
            return candidate
        candidate = moment.replace(year=now.year, month=now.month, day=now.day)
        if candidate - now > timedelta(hours=1):  # written before midnight, read after it
            candidate -= timedelta(days=1)
        return candidate
    except (ValueError, OverflowError):
        return None


@functools.lru_cache(maxsize=4096)
def _second_ms(shape: str, text: str, zone: tzinfo, now_bucket: int) -> int | None:
    """Epoch ms of a stamp without its fraction (cached: lines repeat their second)."""
    if shape == "epoch":
        return _bounded(int(text) * 1000)
    try:
        if shape == "iso":  # gunicorn writes its zone after a space: `... 20:15:28 +0000`
            text = text.replace("  ", " 0", 1)  # MariaDB's space-padded hour
            moment = datetime.fromisoformat(_ZONE_SPACE.sub("", text.replace("Z", "+00:00")))
        elif shape in ("bsd", "clock"):
            fmt = "%b %d %H:%M:%S" if shape == "bsd" else "%H:%M:%S"
            # 2000 is a leap year: a yearless Feb 29 reads, the year is supplied below
            base = datetime.strptime(f"2000 {text}", f"%Y {fmt}").replace(tzinfo=zone)
            supplied = _supplied(base, now_bucket * 3_600_000, "year" if shape == "bsd" else "day")
            if supplied is None:
                return None
            moment = supplied
        else:
            if shape == "compact" and ":" in text:  # `261204  9:46:45`
                day, clock = text.split()
                text = f"{day} {clock.replace(':', '').zfill(6)}"
            moment = datetime.strptime(" ".join(text.split()), _FORMATS[shape])
    except (ValueError, OverflowError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    try:
        return _bounded(int(moment.timestamp() * 1000))
    except (ValueError, OverflowError, OSError):
        return None


def stamp_ms(shape: str, text: str, zone: tzinfo, now_ms: int) -> int | None:
    """Epoch milliseconds of a `STAMP` match of the given shape, or None."""
    fraction = 0
    found = _SPLIT_FRACTION.search(text)
    if found is not None:
        digits = found.group(1)
        fraction = int((digits + "000")[:3])
        text = text[: found.start()] + text[found.end() :]
    # A date-less stamp depends on now: cached per hour of now, so a long scan stays correct.
    bucket = now_ms // 3_600_000 if shape in ("bsd", "clock") else 0
    second = _second_ms(shape, text, zone, bucket)
    return None if second is None else second + fraction


def strptime_ms(text: str, fmt: str, zone: tzinfo, now_ms: int) -> int | None:
    """Epoch ms of a time read with an operator's `time_format` (a year or a date the
    format lacks is supplied as for yearless stamps), or None."""
    try:  # both stripped: a group that takes the space before the message reads as well
        moment = datetime.strptime(text.strip(), fmt.strip())
    except (ValueError, OverflowError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    if "%Y" not in fmt and "%y" not in fmt and "%s" not in fmt:
        has_date = any(d in fmt for d in ("%d", "%j", "%b", "%m", "%B"))
        supplied = _supplied(moment, now_ms, "year" if has_date else "day")
        if supplied is None:
            return None
        moment = supplied
    try:
        return _bounded(int(moment.timestamp() * 1000))
    except (ValueError, OverflowError, OSError):
        return None


# The named groups of `STAMP`, one per shape: a match sets exactly one.
SHAPES: Final = (
    "iso", "slash", "yslash", "compact", "dmy", "ctime", "clf", "jul", "bsd", "clock", "epoch",
)  # fmt: skip


def matched_ms(found: re.Match[str], zone: tzinfo, now_ms: int) -> int | None:
    """The time of a match of a pattern holding `STAMP` (None: no such moment)."""
    for shape in SHAPES:
        text = found.group(shape)
        if text is not None:
            return stamp_ms(shape, text, zone, now_ms)
    return None  # pragma: no cover - the pattern always sets one shape
