"""Log files and time: which files a window needs, by their records' own time; what a scan saw
of the records outside its window; records dated in the future (a wrong topic timezone).

- `WindowWatch` (one per call) sees every parsed record's time: whether it is in the window,
  the nearest ones before and after it (said when none fell in it: a post-mortem at the wrong
  time answers NO_EVIDENCE *and* where the records are), and how many lie in the future.
- `FileTimes` reads a file's first and last records (a 16 KiB peek at its head and tail, cached
  by identity, size and mtime) so file selection does not trust mtime alone: a log copied with
  `cp -p` or unpacked from a tarball keeps an old mtime over recent records, and a file written
  after the window (the logs of today, in a post-mortem of last week) need not be read when its
  first record is later than the window's end.
- `future_warning` is the worker-start check of a FILE topic: the newest file's last records,
  compared with this clock, and with the file's last write (`zone_behind`: a live log whose
  last record is a zone's offset older than its mtime is read in a zone ahead of its writer's).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
import zoneinfo
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime, tzinfo
from typing import Final

from msgspec import UNSET, UnsetType

from contracts.results import RecordTimes
from contracts.window import AS_OF_SKEW_MS
from workers.sources.logs.compression import (
    UNREADABLE,
    compression_of,
    damage_of,
    decompressed,
    read_before_damage,
)
from workers.sources.logs.files import LogFile, Reader, without_colour
from workers.sources.logs.formats import LineParser
from workers.sources.logs.records import format_ms

__all__ = ["FileTimes", "WindowWatch", "future_warning", "last_record", "zone_behind"]

_PEEK: Final = 16 * 1024
_CACHE_MAX: Final = 4096
# A record's stamp to its file's mtime, beyond a zone's offset: a stamp cut to the second and
# the write's own delay (a line-buffered logger's), or a clock step of the file system's.
_LATE_MS: Final = 3_000
_EARLY_MS: Final = 2_000


class WindowWatch:
    """The records one call parsed, against its window `[start_ms, end_ms]` and the clock
    `now_ms` that read them (later than it by more than the as-of skew is the future)."""

    __slots__ = ("after", "before", "end", "future", "future_after", "inside", "latest", "start")

    def __init__(self, start_ms: int, end_ms: int, now_ms: int) -> None:
        self.start, self.end, self.future_after = start_ms, end_ms, now_ms + AS_OF_SKEW_MS
        self.inside = self.future = 0
        self.before: int | None = None
        self.after: int | None = None
        self.latest: int | None = None

    def inside_window(self, epoch_ms: int) -> bool:
        """Whether a parsed record's time is in the window (noting it when it is not)."""
        if epoch_ms > self.future_after:
            self.future += 1
            self.latest = epoch_ms if self.latest is None else max(self.latest, epoch_ms)
        if epoch_ms < self.start:
            self.before = epoch_ms if self.before is None else max(self.before, epoch_ms)
            return False
        if epoch_ms > self.end:
            self.after = epoch_ms if self.after is None else min(self.after, epoch_ms)
            return False
        self.inside += 1
        return True

    def times(self, zone: tzinfo) -> RecordTimes | UnsetType:
        """What the Control View hears: the nearest records when none fell in the window,
        and the future-dated ones; UNSET when there is nothing to say."""
        empty = self.inside == 0
        before = format_ms(self.before, zone) if empty and self.before is not None else UNSET
        after = format_ms(self.after, zone) if empty and self.after is not None else UNSET
        future = self.future or UNSET
        latest = format_ms(self.latest, zone) if self.latest is not None else UNSET
        if before is UNSET and after is UNSET and future is UNSET:
            return UNSET
        return RecordTimes(
            nearest_before=before, nearest_after=after, future_records=future, latest=latest
        )


def _first_time(lines: list[str], parser: LineParser, last: bool) -> int | None:
    found: int | None = None
    for line in lines:
        for entry in parser.feed(line):
            if not last:
                return entry.epoch_ms
            found = entry.epoch_ms if found is None else max(found, entry.epoch_ms)
    for entry in parser.flush():
        if not last and found is None:
            return entry.epoch_ms
        found = entry.epoch_ms if found is None else max(found, entry.epoch_ms)
    return found


class FileTimes:
    """First and last record times of files, peeked and cached (thread-safe, bounded)."""

    def __init__(self) -> None:
        self._cache: OrderedDict[tuple[int, int, int, int, bool, int], int | None] = OrderedDict()
        self._lock = threading.Lock()

    def peek(
        self,
        file: LogFile,
        reader: Reader,
        parser: Callable[[], LineParser],
        *,
        last: bool,
        dated_ms: int = 0,
    ) -> int | None:
        """The time of the file's first record (`last=False`) or its latest in its last 16
        KiB (`last=True`, uncompressed files only: the codec is read from the magic bytes);
        None when it cannot be read or nothing parses. `dated_ms` is the "now" the parser
        supplies a missing year or date from (the window's end): part of the cache key, by
        the hour, as `stamps` caches it."""
        key = (file.dev, file.ino, file.size, file.mtime_ms, last, dated_ms // 3_600_000)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        found = self._read(file, reader, parser, last)
        with self._lock:
            self._cache[key] = found
            while len(self._cache) > _CACHE_MAX:
                self._cache.popitem(last=False)
        return found

    @staticmethod
    def _read(
        file: LogFile, reader: Reader, parser: Callable[[], LineParser], last: bool
    ) -> int | None:
        try:
            raw = reader._open(file)  # confined exactly as the scan opens it
        except OSError:
            return None  # refused (EACCES): the scan says so
        if raw is None:
            return None
        with raw:
            codec = ""
            try:
                codec = compression_of(raw)  # by its magic bytes, as the scan reads it
                if codec and (last or codec in UNREADABLE):
                    return None  # its end is not reachable without reading it all
                if codec:
                    stream = decompressed(raw, codec, reader.flag.expired)
                    data = read_before_damage(stream, _PEEK, codec)
                else:
                    if last and file.size > _PEEK:
                        raw.seek(file.size - _PEEK)
                    data = raw.read(_PEEK)
            except Exception as exc:  # a cut or corrupt archive, a failed read: no time read
                if not damage_of(exc, codec):
                    raise
                return None
        full = len(data) == _PEEK
        if b"\x1b" in data:  # as the scan reads its lines
            data = without_colour(data)
        lines = data.decode("utf-8", "replace").splitlines(keepends=True)
        if last and file.size > _PEEK:
            lines = lines[1:]  # the first is cut
        elif not last and full:
            lines = lines[:-1]  # the last may be cut
        return _first_time(lines, parser(), last)

    def needed(
        self,
        file: LogFile,
        window: tuple[int, int],
        reader: Reader,
        parser: Callable[[int], LineParser],
        seen: Callable[[int], object] = lambda _: None,
    ) -> bool:
        """Whether a file may hold records of the window, by its records' own time where its
        mtime would decide wrongly: last written before the window but its last record inside
        (or its mtime earlier than its first record: a copy), or written after the window but
        its first record later than the window's end. `seen` hears the time of the record
        that ruled a file out (it was read, and lies outside the window). `parser(dated_ms)`
        supplies a missing year or date from `dated_ms`, the window's end or the file's last
        write if earlier, as the scan does: a peek on the wall clock dated last year's syslog
        this year and ruled the file out, or read a year-old rotation into today's window."""
        start, end = window
        dated = min(end, file.mtime_ms)

        def dated_parser() -> LineParser:
            return parser(dated)

        if file.mtime_ms >= start:
            if file.mtime_ms <= end:
                return True
            first = self.peek(file, reader, dated_parser, last=False, dated_ms=dated)
            if first is None or first <= end:
                return True
            seen(first)
            return False
        last = self.peek(file, reader, dated_parser, last=True, dated_ms=dated)
        if last is not None:
            if last < start:
                seen(last)
            return last >= start
        first = self.peek(file, reader, dated_parser, last=False, dated_ms=dated)  # compressed
        return first is not None and first > file.mtime_ms and first <= end


def last_record(file: LogFile, reader: Reader, parser: LineParser) -> int | None:
    """The time of the latest record in the file's last 16 KiB (uncompressed), or None."""
    return FileTimes._read(file, reader, lambda: parser, True)


@functools.lru_cache(maxsize=4)
def _offsets(hour: int) -> frozenset[int]:
    """The UTC offsets, in minutes, of every IANA zone at that hour (since the epoch)."""
    at = datetime.fromtimestamp(hour * 3600, UTC)
    found: set[int] = set()
    for name in zoneinfo.available_timezones():
        with contextlib.suppress(Exception):  # a zone file this system cannot read
            offset = at.astimezone(zoneinfo.ZoneInfo(name)).utcoffset()
            found.add(int(offset.total_seconds() // 60) if offset is not None else 0)
    return frozenset(found or range(-720, 841, 60))


def zone_behind(latest_ms: int, mtime_ms: int, zone: tzinfo, *, ahead: bool = False) -> str | None:
    """The offset (`-05:00`) the writer of a file seems to write its local time in, when its
    last record lies before the file's last write by what a real zone is behind `zone` at
    that time (at least half an hour), to the seconds a write takes; None otherwise. Read in
    `zone`, such a file's records are that much older than they are: a window counted back
    from now misses them. A copy of an old log made now is hours behind its mtime too, but
    by a zone's offset to the five seconds about once in 600 (14 offsets behind UTC in
    12 h). `ahead`: the same for a writer ahead of `zone` (its records in the future)."""
    gap = mtime_ms - latest_ms
    at = datetime.fromtimestamp(latest_ms / 1000, UTC)
    try:
        own_offset = at.astimezone(zone).utcoffset()
    except OverflowError:  # year 1 in a zone behind UTC (Go's zero time), 9999 in one ahead
        return None
    own = int(own_offset.total_seconds() // 60) if own_offset is not None else 0
    for minutes in sorted(_offsets(latest_ms // 3_600_000)):
        behind_ms = (own - minutes) * 60_000
        apart = abs(behind_ms) >= 30 * 60_000 and (behind_ms < 0) == ahead
        if apart and -_EARLY_MS <= gap - behind_ms <= _LATE_MS:
            sign = "-" if minutes < 0 else "+"
            return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    return None


def future_warning(
    topic: str, newest: LogFile | None, reader: Reader, parser: LineParser, zone: tzinfo
) -> str:
    """The worker-start warning for a topic whose newest file's last records lie in the
    future of this clock (a wrong `timezone`, most often), or a zone's offset before its
    last write (`zone_behind`), or ''."""
    if newest is None:
        return ""
    latest = last_record(newest, reader, parser)
    now_ms = int(time.time() * 1000)
    if latest is not None and latest <= now_ms + AS_OF_SKEW_MS:
        offset = zone_behind(latest, newest.mtime_ms, zone)
        if offset is None:
            return ""
        hours = (newest.mtime_ms - latest) / 3_600_000
        return (
            f"query_logs: topic {topic}: the last record of its newest file is {hours:.1f} h "
            f"before the file's last write (latest {format_ms(latest, zone)}); its writer "
            f"seems to write local time at offset {offset}: check its timezone "
            f'(timezone = "{offset}" or the host\'s IANA zone): a window counted back from now '
            "will not find its records"
        )
    if latest is None:
        return ""
    hours = (latest - now_ms) / 3_600_000
    return (
        f"query_logs: topic {topic} has records dated {hours:.1f} h in the future of this "
        f"clock (latest {format_ms(latest, zone)}); check its timezone: a window counted back "
        "from now will not find them"
    )
