"""What an operator's file log topics read, checked before any worker serves them
(`aci-evidence check`, docs/logs.md "Checking a configuration").

Per file source: the files its globs match (newest first, at most `MAX_FILES`), and for each
the first `SAMPLE_LINES` lines (at most `SAMPLE_BYTES`) read in the source's format, as a call
would read them: how many records, how many lines are not in the format (and the first of
them), the records' first and last time, how many are dated in the future, and, when lines are
not in the format, the named format that reads the most of those same lines, if it reads more
(or `docker` or `cri` reading as many: a container runtime's lines read in the app's format).
Nothing is written anywhere.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from datetime import tzinfo
from typing import Final

from contracts.window import AS_OF_SKEW_MS
from workers.sources.base import SourceError
from workers.sources.logs import files as listing  # its MAX_NAMES read when used
from workers.sources.logs.check_hints import owner_of, time_key, unplaced, unread_keys
from workers.sources.logs.check_report import CONTAINERS as _CONTAINERS
from workers.sources.logs.check_report import FileCheck, SourceCheck, TopicCheck
from workers.sources.logs.config import FORMATS, FileSource, FileTopic, LogsConfig, zone_of
from workers.sources.logs.dbformats import foreign_zone
from workers.sources.logs.deadline import StopFlag
from workers.sources.logs.files import LogFile, Reader, RefusedFile, find_files
from workers.sources.logs.filetime import last_record, zone_behind
from workers.sources.logs.formats import LineParser, make_parser, parse_time
from workers.sources.logs.masking import without_log_secrets, without_secrets
from workers.sources.logs.records import Entry, format_ms
from workers.sources.logs.stamps import strptime_ms
from workers.sources.logs.syslogformat import SyslogRecords
from workers.sources.logs.textformats import HeadParser

__all__ = [
    "MAX_FILES", "SAMPLE_BYTES", "SAMPLE_LINES", "FileCheck", "SourceCheck", "TopicCheck",
    "check_logs",
]  # fmt: skip

SAMPLE_LINES: Final = 2000
SAMPLE_BYTES: Final = 16 * 1024 * 1024  # and no more text: 17 formats parse the sample
MAX_FILES: Final = 8
EXAMPLE_CHARS: Final = 160
# Formats tried on lines the configured one could not read (`regex` needs the operator's
# pattern; `mysql_slow` takes any text for a statement's, so only a slow log is offered it).
_TRIED: Final = tuple(f for f in FORMATS if f not in ("regex", "mysql_slow"))


def _without_password(line: str) -> str:
    """The line with a URL's password and a secret's JSON value as `***` (an app's DSN, Docker's
    environment) and what a record's text would mask (`without_log_secrets`), cut first; where
    masking took text away (a long JWT as `***`), the whole line (at most `max_line_bytes`), or
    the cut would show part of a secret it split, no longer of its shape."""
    cut = EXAMPLE_CHARS + 1024
    masked = without_secrets(without_log_secrets(line[:cut]))
    if len(line) > cut and len(masked) < cut:
        masked = without_secrets(without_log_secrets(line))
    return masked


def check_logs(config: LogsConfig, now: float) -> list[TopicCheck]:
    """Every topic of the configuration, its file sources checked (`now`: epoch seconds)."""
    checks: list[TopicCheck] = []
    for topic, entry in config.topics.items():
        backend = type(entry).__name__.removesuffix("Topic").lower()
        check = TopicCheck(topic=topic.value, backend=backend)
        if isinstance(entry, FileTopic):
            zone = entry.timezone or config.timezone
            check.sources = [_source(s, config, zone, now) for s in entry.file_sources()]
        checks.append(check)
    return checks


def _source(source: FileSource, config: LogsConfig, zone: str, now: float) -> SourceCheck:
    check = SourceCheck(paths=list(source.paths), format=source.format, matched=0, files=[])
    skipped: dict[str, str] = {}
    unlisted: dict[str, str] = {}
    try:  # every match kept (no more than the names looked at): `cut` is the listing's own
        files, check.listing_cut, check.matched = find_files(
            source.paths, config.roots, 0, listing.MAX_NAMES, skipped=skipped,
            unlisted=unlisted,
        )  # fmt: skip
    except RefusedFile as exc:  # the operator's: which path, and why
        check.problem = f"{exc.path}: {exc.why}: the source is refused (AUTHORIZATION)"
        return check
    except SourceError as exc:
        check.problem = exc.message
        return check
    check.skipped = [f"{path}: {why}" for path, why in sorted(skipped.items())]
    check.unlisted = [
        f"{path}: could not be listed ({why})" for path, why in sorted(unlisted.items())
    ]
    zone = source.timezone or zone
    check.files = [_file(file, source, Reader(config.scan, StopFlag(30), config.roots), zone, now)
                   for file in files[:MAX_FILES]]  # fmt: skip
    check.unchecked = len(files) - len(check.files)
    return check


def _file(file: LogFile, source: FileSource, reader: Reader, zone: str, now: float) -> FileCheck:
    lines: list[str] = []
    size = 0
    with contextlib.closing(reader.lines_of(file)) as read:  # the newest part of a large file
        for line in itertools.islice(read, SAMPLE_LINES):
            if line.strip():
                lines.append(line)
            size += len(line)
            if size >= SAMPLE_BYTES:
                break
    check = FileCheck(path=file.real, format=source.format, lines=len(lines), records=0, unparsed=0)
    check.unread = _unread(reader, bool(lines), owner_of(file.real) if reader.refused else "")
    if not lines:
        return check
    tz = zone_of(zone)
    now_ms = int(now * 1000)
    # A year or a date a stamp lacks is supplied from the file's last write when it is older
    # than now: its records are not later than it (an old syslog's `Nov  3` is that year's).
    dated_ms = min(now_ms, file.mtime_ms)
    parser = _parser(source, tz, dated_ms, file)
    entries: list[Entry] = []
    rejected = parser.rejected if isinstance(parser, HeadParser | SyslogRecords) else None
    for line in lines:
        failed = parser.failed
        entries += parser.feed(line)
        if parser.failed > failed and not check.example:
            # a multi-line format fails a record's lines when the next head comes: those lines
            check.example = _without_password(rejected[0][1] if rejected else line.rstrip("\r\n"))
            check.example = check.example[:EXAMPLE_CHARS]
    entries += parser.flush()
    if rejected and not check.example:
        check.example = _without_password(rejected[0][1])[:EXAMPLE_CHARS]
    check.records, check.unparsed = len(entries), parser.failed
    check.levelled = sum(bool(e.level) for e in entries)
    least = (check.lines - check.unparsed, check.levelled)
    check.unplaced, first, check.placing = unplaced(entries, lines, source.format, tz, now_ms,
                                                    least, _TRIED)  # fmt: skip
    check.unplaced_text = _without_password(first)[:EXAMPLE_CHARS]
    if entries:
        times = [e.epoch_ms for e in entries]
        check.first, check.last = format_ms(min(times), tz), format_ms(max(times), tz)
        check.future = sum(t > now_ms + AS_OF_SKEW_MS for t in times)
        late = [t for t in times if file.mtime_ms + AS_OF_SKEW_MS < t <= now_ms + AS_OF_SKEW_MS]
        if late:
            check.after_write, check.written = len(late), format_ms(file.mtime_ms, tz)
            check.after_write_hours = round((max(late) - file.mtime_ms) / 3_600_000, 1)
    latest = last_record(file, reader, _parser(source, tz, dated_ms, file))
    if latest is not None and latest > now_ms + AS_OF_SKEW_MS:  # the future: to what zone
        check.ahead = zone_behind(latest, file.mtime_ms, tz, ahead=True) or ""
    if latest is not None and latest <= now_ms + AS_OF_SKEW_MS:
        check.behind = zone_behind(latest, file.mtime_ms, tz) or ""
        check.written, check.timezone = format_ms(file.mtime_ms, tz), zone
        check.behind_hours = round((file.mtime_ms - latest) / 3_600_000, 1)
    keyed = source.format in ("jsonl", "logfmt")
    if keyed and not entries:
        check.time_key = time_key(lines[0], source.format)
    elif keyed and entries:  # records of no message, or no level: the keys
        check.no_message, check.message_key, check.no_level, check.level_key = unread_keys(
            entries, next(line for line in lines if line.strip()), source.format
        )
    if source.format == "regex" and check.unparsed:
        check.time_format = source.time_format
        check.time_unread = _time_unread(lines, source, tz, dated_ms)
    if source.format in ("postgresql", "postgresql_csv"):  # `CST`, `IST`: the topic's zone
        foreign = sorted({z for line in lines if (z := foreign_zone(line, tz))})
        check.foreign_zone, check.timezone = ", ".join(foreign), zone
    if check.unparsed or 2 * check.levelled < check.records:
        _better(lines, source, tz, now_ms, _TRIED, check)
    elif source.format not in _CONTAINERS:
        _better(lines, source, tz, now_ms, _CONTAINERS, check)
    return check


def _parser(source: FileSource, tz: tzinfo, dated_ms: int, file: LogFile) -> LineParser:
    return make_parser(
        source.format, source.fields, tz, source.service, source.time_unit, dated_ms, file.real,
        source.pattern, source.time_format,
    )  # fmt: skip


def _time_unread(lines: list[str], source: FileSource, tz: tzinfo, now_ms: int) -> str:
    """The `time` of the first line a `regex` source's pattern matches but whose time does
    not read as its records' would (cut, masked), or ''."""
    pattern = re.compile(source.pattern)
    for line in lines:
        found = pattern.search(line.rstrip("\r\n"))
        stamp = None if found is None else found.group("time")
        if stamp is None:
            continue
        if source.time_format:
            read = strptime_ms(stamp, source.time_format, tz, now_ms)
        else:
            read = parse_time(stamp, tz)
        if read is None:
            return _without_password(stamp)[:EXAMPLE_CHARS]
    return ""


def _unread(reader: Reader, some: bool, owner: str = "") -> str:
    """Why the file's sample is not all of its first lines ('' when it is); `owner`: whose
    file a refused one is (`check_hints.owner_of`)."""
    if reader.unread:
        return f"{reader.unread[0]} compression (install its Python package)"
    if reader.cut:
        return "a compressed file cut short (its end is missing): read up to the cut"
    if reader.dictionary:
        return "compressed with a zstd dictionary this worker does not have: read up to it"
    if reader.refused:
        return f"could not be read: the worker may not open it ({reader.refused_error}{owner})"
    if reader.unreadable:
        return f"could not be read to its end: the system failed a read ({reader.read_error})"
    if reader.broken:
        return "a compressed file corrupt part way: read up to the damage"
    if reader.long_lines:
        cap = reader.budget.max_line_bytes
        return (
            f"{reader.long_lines} lines longer than max_line_bytes ({cap}) skipped (the longest "
            f"{reader.longest} bytes): a call they may match is a lower bound, an ERROR when "
            "nothing else matches; raise [scan] max_line_bytes above it to read them"
        )
    if reader.stopped and not some:
        return "replaced or unreadable since it was listed"
    return ""


def _better(
    lines: list[str],
    source: FileSource,
    zone: tzinfo,
    now_ms: int,
    tried: tuple[str, ...],
    check: FileCheck,
) -> None:
    """The named format that reads the most of the lines, if more than the configured one, or
    as many and a level for most of its records where the configured one finds fewer."""
    best_reads, best_levelled = check.lines - check.unparsed, check.levelled
    for fmt in tried:
        if fmt == source.format:
            continue
        parser = make_parser(fmt, {}, zone, "", "auto", now_ms, check.path)
        entries = [e for line in lines for e in parser.feed(line)] + parser.flush()
        reads, levelled = check.lines - parser.failed, sum(bool(e.level) for e in entries)
        # a container runtime's line read as the app's format (Docker's JSON as jsonl, CRI as
        # plain) reads "well", each record level-less: its own format wins a tie (not
        # `kubectl logs --timestamps` lines, which `cri` reads: any ISO-stamped line is one)
        tie = reads == best_reads
        container = fmt in _CONTAINERS and tie and not getattr(parser, "bare", 0)
        levels = tie and 2 * levelled > len(entries) and levelled > best_levelled
        if entries and (reads > best_reads or container or levels):
            check.better, check.better_reads, check.better_levelled = fmt, reads, levelled
            best_reads, best_levelled = reads, levelled
