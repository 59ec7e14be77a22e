"""`query_logs` over log files (`source_kind` FILE): one topic's globs, format and zone.

The query is parsed and its fields checked before any I/O; the scan then runs in a thread
under the call's deadline and the topic's scan budget (`deadline.run_stoppable`), reading
the newest files first (`files`), parsing them (`formats`, `slowlog`), keeping the matches in
the window in a bounded `Digest` (`records`).

A topic has one or more sources (`FileTopic.file_sources`), each its own globs and format;
their files are read newest first together.

Honest outcomes: a scan stopped early (budget, deadline, an over-long line, a broken file)
answers with what it found, `truncated`, and its count marked as a lower bound; stopped early
with nothing found it is an ERROR (a cut-short search is not "no evidence"). A line that does
not parse in its source's format is counted (`unparsed_lines`) and, for a query made only of
words and phrases, matched as plain text (timed by the record before it in its file, else by
the file's mtime); files of which no line parses and nothing matched are an ERROR. A matched
file in a compression the worker cannot read is counted (`unread_files`) and makes the count
a lower bound. A matched path that is no regular file (a shipper's fifo beside `app.log`) is
skipped unopened and counted (`skipped_files`); only such paths matched is an AUTHORIZATION
error. The model hears of all of these in `notes`. No path reaches an answer or an error: the
topic is named, the files never are.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Final

import msgspec
from msgspec import UNSET

from contracts.logs import LogsUpstream
from contracts.requests import QueryLogsRequest
from contracts.results import LogScope
from contracts.status import ErrorCode, SourceKind, Topic
from workers.sources.base import SourceError
from workers.sources.calltime import call_time
from workers.sources.logs.config import FileSource, FileTopic, LogsConfig, zone_of
from workers.sources.logs.csvlog import CsvLog
from workers.sources.logs.deadline import StopFlag, run_stoppable
from workers.sources.logs.file_outcome import (
    Tally,
    check_outcome,
    kinds_of,
    read_notes,
    unlisted_text,
)
from workers.sources.logs.files import LogFile, Reader, find_files
from workers.sources.logs.filetime import FileTimes, WindowWatch, future_warning
from workers.sources.logs.format_fields import FORMAT_FIELDS, FORMAT_NUMBERS
from workers.sources.logs.formats import LineParser, make_parser
from workers.sources.logs.longlines import long_line_judge, long_line_probe
from workers.sources.logs.masking import KeyLines, without_log_secrets, without_secrets
from workers.sources.logs.prefilter import Prefilter, skipped_time
from workers.sources.logs.records import (
    Digest,
    Entry,
    entry_matches,
    format_ms,
    masked,
    unmasked_first,
)
from workers.sources.logs.secret_shapes import hides_text
from workers.sources.logs.source import ParsedQuery, check_fields, parse_log_query
from workers.sources.logs.syslogformat import SyslogRecords
from workers.sources.logs.textformats import HeadParser

__all__ = ["FORMAT_FIELDS", "FileLogSource"]


def _hides_text(entry: Entry, named: frozenset[str] | None) -> bool:
    """Whether a record's message, service, level or a field's value the query reads (`named`;
    None: every one) holds what masking takes out (a colour code, a zero-width character): a
    term of its shown text may not be in it as it is (CLICKHOUSE reads `ServiceName` and
    `SeverityText` as shown too)."""
    if named is None:  # (every value: about 1 µs a record of 10 fields)
        values: Iterable[object] = entry.fields.values()
        return (
            hides_text(entry.message) or hides_text(entry.service) or hides_text(entry.level)
            or any(isinstance(v, str) and hides_text(v) for v in values)
        )  # fmt: skip
    for name in named:  # (a loop: a generator's setup doubled the cost of one name)
        if name in _OWN:  # (`records.entry_matches` reads these from the record itself)
            value: object = getattr(entry, name)
        else:
            value = entry.fields.get(name)
        if isinstance(value, str) and hides_text(value):
            return True
    return False


_OWN: Final = frozenset({"message", "service", "level"})


def _text_only(query: ParsedQuery) -> bool:
    """A query an unparsed line can be matched by: words and phrases only, one positive."""
    clauses = query.clauses
    return all(c.field is None for c in clauses) and any(not c.negated for c in clauses)


class FileLogSource:
    """One topic's log files behind `query_logs`."""

    source_kind: Final = SourceKind.FILE

    def __init__(
        self,
        topic: Topic,
        entry: FileTopic,
        config: LogsConfig,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.topic, self.entry, self.config, self.clock = topic, entry, config, clock
        self.times = FileTimes()  # first/last record times of files, cached
        self.zone = zone_of(entry.timezone or config.timezone)
        self.sources = entry.file_sources()
        names: dict[str, None] = {}
        comparable: set[str] = set()
        for source in self.sources:
            names.update(dict.fromkeys((*source.fields, *FORMAT_FIELDS[source.format])))
            names.update(dict.fromkeys(source.regex_fields()))
            # the operator's own fields may hold numbers; a format's, those it writes as such
            comparable.update(source.fields, source.regex_fields())
            comparable.update(FORMAT_NUMBERS.intersection(FORMAT_FIELDS[source.format]))
        self.extra_fields = tuple(names)
        self.comparable = frozenset(comparable)

    async def fetch(self, request: QueryLogsRequest) -> LogsUpstream:
        """Parse, check, then scan under the deadline; `SourceError` on any failure."""
        query = parse_log_query(request.query)
        check_fields(query, request.topic, self.extra_fields, self.comparable)
        when = call_time()  # the window admission recorded
        end_ms = None if when is None else when.end_ms
        return await run_stoppable(
            lambda flag: self.search(request, query, flag, end_ms), self.config.scan.max_seconds
        )

    def _files(
        self, window: tuple[int, int], flag: StopFlag, tally: Tally, watch: WindowWatch
    ) -> tuple[list[tuple[LogFile, FileSource]], bool]:
        """Every source's files in the window, newest first (a file two sources match is read
        once, by the first); True when the listing was cut or more than `max_files` matched."""
        budget = self.config.scan
        chosen: dict[tuple[int, int], tuple[LogFile, FileSource]] = {}
        too_many, matched = False, 0
        for source in self.sources:
            specials = len(tally.skipped)
            files, cut, count = find_files(
                source.paths, self.config.roots, window[0], budget.max_files, flag,
                self._needed(window, flag, watch, source), skipped=tally.skipped,
                unlisted=tally.unlisted,
            )  # fmt: skip
            too_many, matched = too_many or cut, matched + count
            tally.sources_empty += count == 0 and not cut and len(tally.skipped) == specials
            for file in files:
                chosen.setdefault((file.dev, file.ino), (file, source))
        if matched == 0 and not too_many and tally.unlisted:  # refused folders: not "no file"
            raise SourceError(
                ErrorCode.EXECUTION,
                f"{unlisted_text(tally.unlisted)} for topic {self.topic.value}: its log files "
                "are unknown; the operator must check the folders' permissions",
            )
        if matched == 0 and not too_many and tally.skipped:  # nothing to read: not "no evidence"
            raise SourceError(
                ErrorCode.AUTHORIZATION,
                f"the {len(tally.skipped)} paths the log globs of topic {self.topic.value} "
                f"match are not regular files ({kinds_of(tally.skipped)}) and are never read; "
                "the operator must fix the configured paths",
            )
        if matched == 0 and not too_many:  # a wrong path or a missing folder: not "no evidence"
            raise SourceError(
                ErrorCode.UNAVAILABLE,
                f"no log file of topic {self.topic.value} exists on this deployment; the "
                "operator must check the configured paths",
            )
        ordered = sorted(chosen.values(), key=lambda pair: (-pair[0].mtime_ms, pair[0].real))
        return ordered[: budget.max_files], too_many or len(ordered) > budget.max_files

    def search(
        self,
        request: QueryLogsRequest,
        query: ParsedQuery,
        flag: StopFlag,
        end_ms: int | None = None,
    ) -> LogsUpstream:
        """The synchronous scan behind `fetch` (for the benchmark and the conformance test),
        over the window ending at `end_ms` (default: the source's clock)."""
        lookback = request.lookback_minutes or self.config.default_lookback
        now_ms = int(self.clock() * 1000)
        end_ms = now_ms if end_ms is None else end_ms
        start_ms = end_ms - lookback * 60_000
        flag.narrow(self.config.scan.max_seconds)
        watch = WindowWatch(start_ms, end_ms, now_ms)
        tally = Tally()
        files, too_many = self._files((start_ms, end_ms), flag, tally, watch)
        tally.future_files = watch.future  # files not read: their first record is future
        reader = Reader(self.config.scan, flag, self.config.roots)
        digest = Digest(self.config.sample_limit)
        text_ok = _text_only(query)
        prefilters: dict[int, Prefilter] = {}
        for file, source in files:
            if flag.expired() or reader.out_of_budget:
                reader.stopped = True
                break
            prefilter = prefilters.setdefault(
                id(source), Prefilter(query, source.format, source.service)
            )
            self._scan(file, source, reader, prefilter, digest, query, watch, text_ok, tally)
        lower_bound = reader.stopped or too_many or bool(reader.unread) or bool(tally.unlisted)
        check_outcome(self.topic.value, digest, tally, reader, lower_bound, flag)
        scope = LogScope(
            topic=request.topic,
            query=request.query,
            lookback_minutes=lookback,
            start_time=format_ms(start_ms, self.zone),
            end_time=format_ms(end_ms, self.zone),
        )
        upstream = digest.upstream(self.source_kind, scope, self.zone, lower_bound=lower_bound)
        notes = read_notes(tally, reader, text_ok, len(self.sources))
        return msgspec.structs.replace(
            upstream,
            unparsed_lines=tally.failed or UNSET,
            unread_files=len(reader.unread) or UNSET,
            broken_files=reader.broken or UNSET,
            skipped_files=len(tally.skipped) or UNSET,
            notes=notes or UNSET,
            record_times=watch.times(self.zone),
        )

    def _scan(
        self,
        file: LogFile,
        source: FileSource,
        reader: Reader,
        prefilter: Prefilter,
        digest: Digest,
        query: ParsedQuery,
        watch: WindowWatch,
        text_ok: bool,
        tally: Tally,
    ) -> None:
        """One file: its records, and its unparsed lines as text when the query allows."""
        zone = zone_of(source.timezone) if source.timezone else self.zone
        # a year or a date a stamp lacks: the latest not after the window's end nor after the
        # file's last write (a year-old rotation's `Dec  5 02:30` is not this morning's)
        dated = min(watch.end, file.mtime_ms)
        parser = make_parser(
            source.format, source.fields, zone, source.service, source.time_unit, dated,
            file.real, source.pattern, source.time_format,
        )  # fmt: skip
        may_match = prefilter.may_match if prefilter.active else None
        start_ms, end_ms = watch.start, watch.end
        reader.long_probe = long_line_probe(prefilter, source.format)  # a line over the cap
        reader.long_judge = long_line_judge(query, source, parser, (start_ms, end_ms), reader)
        if isinstance(parser, HeadParser) and file.mtime_ms <= watch.end:
            parser.eof_ms = file.mtime_ms  # a crash at the end is its process's last write
        if may_match is not None and isinstance(parser, HeadParser | SyslogRecords):
            parser.keep, may_match = may_match, None  # over whole records, not lines
        parsed, last_ms = 0, file.mtime_ms
        rejected = (
            parser.rejected if isinstance(parser, HeadParser | SyslogRecords | CsvLog) else None
        )

        # Lines that are no record are shown as text, masked as records are (`masking`).
        keys = KeyLines()  # a private key written over lines: followed from line to line
        # ... and where each line is a record of its own, over the records (`KeyLines.body`).
        own = None if isinstance(parser, HeadParser) else KeyLines()
        raw_first = unmasked_first(query)  # a record that cannot match is never masked
        # the values its clauses read (a word: every one; `level:ERROR`: the level's only)
        named = (
            None
            if any(c.field is None for c in query.clauses)
            else frozenset(c.field for c in query.clauses if c.field is not None)
        )
        probe: str | None = None  # the first line the prefilter skipped, unparsed
        last_skipped: str | None = None  # the latest since a record: a text line's time

        def skipped(line: str) -> None:  # a line the syslog parser skipped: no line shows it
            if text_ok and (keys.inside or "PRIVATE KEY" in line):
                keys.see(line)  # a private key's opening line holds no term of the query
            if own is not None and (own.inside or "PRIVATE KEY" in line):
                own.see(line)

        def take(found: Entry) -> None:  # a record: into the digest if it matches
            if own is not None and (own.inside or "PRIVATE KEY" in found.message):
                found.message = own.body(found.message)
            # secrets masked before the match: a term only a secret holds matches nothing
            if not watch.inside_window(found.epoch_ms):  # a future match: said (a wrong zone)
                future = found.epoch_ms > watch.future_after
                tally.future_matches += future and entry_matches(query, masked(found))
            elif (
                not raw_first or entry_matches(query, found) or _hides_text(found, named)
            ) and entry_matches(query, masked(found)):
                digest.add(found)

        def as_text(lines: list[tuple[int | None, str]]) -> None:
            for at, line in lines:
                # the record before it (a multi-line parser's head), else the file's mtime
                at = at if at is not None else last_ms if rejected is None else file.mtime_ms
                text = Entry(at, "", source.service, keys.masked(line).strip())
                if start_ms <= at <= end_ms and entry_matches(query, text):
                    digest.add(text)
                    tally.text_matches += 1

        text_ok = text_ok and source.format != "mysql_slow"
        if isinstance(parser, SyslogRecords):
            parser.skip = skipped  # it skips whole records (`syslogformat`)
        # a Docker line that is no record (cut short by a full disk) may hold the `attrs` of
        # the container's environment: shown without its secrets, as the records' fields are
        shown = without_secrets if source.format == "docker" else None
        for line in reader.lines_of(file):
            if may_match is not None and not may_match(line):
                if text_ok and (keys.inside or "PRIVATE KEY" in line):
                    keys.see(line)  # a private key's opening line holds no term of the query
                if own is not None and (own.inside or "PRIVATE KEY" in line):
                    own.see(line)
                probe, last_skipped = (line if probe is None else probe), line
                continue  # cannot match: skip the parse
            failed = parser.failed
            for found in parser.feed(line):
                parsed, last_ms, last_skipped = parsed + 1, found.epoch_ms, None
                take(found)
            if (
                may_match is not None
                and parser.failed != failed
                and not may_match(without_log_secrets(line))
            ):
                # No record, and only its secret passed the prefilter: skipped, as the masked
                # line would have been (counted, it would tell a right guess at the secret).
                parser.failed = failed
                if text_ok and (keys.inside or "PRIVATE KEY" in line):
                    keys.see(line)
                probe = line if probe is None else probe  # (as a skipped line would be)
                continue
            if rejected:  # a multi-line parser says which lines were no record
                if text_ok:
                    as_text(rejected)
                rejected.clear()
            elif text_ok and parser.failed != failed and rejected is None:
                if last_skipped is not None:  # the record before it, which the prefilter skipped
                    last_ms, last_skipped = skipped_time(parser, last_skipped, last_ms), None
                as_text([(None, line if shown is None else shown(line))])
        for found in parser.flush():
            parsed += 1
            take(found)
        if rejected and text_ok:
            as_text(rejected)
        parsed += getattr(parser, "skipped", 0)  # records the prefilter did not build
        tally.parsed += parsed
        tally.failed += parser.failed
        tally.headless += getattr(parser, "headless", 0)  # w3c: lines before any `#Fields:`
        if isinstance(parser, SyslogRecords):
            probe = probe or parser.probe
        if parsed == 0 and parser.failed > 0:
            if self._parses(source, probe):
                tally.parsed += 1  # the lines the prefilter skipped are records: in its format
            else:
                tally.files_unparsed += 1
                tally.formats.add(source.format)

    def _parses(self, source: FileSource, line: str | None) -> bool:
        """Whether a line the prefilter skipped is a record: a file whose lines that were read
        are none is not "in no format" when the skipped ones are."""
        if line is None:
            return False
        parser = self._parser(source)
        return bool(parser.feed(line) or parser.flush())

    def _parser(self, source: FileSource, now_ms: int | None = None) -> LineParser:
        """A parser of `source` that supplies a missing year or date from `now_ms` (the
        window's end, as the scan's; default this clock)."""
        zone = zone_of(source.timezone) if source.timezone else self.zone
        now_ms = int(self.clock() * 1000) if now_ms is None else now_ms
        return make_parser(
            source.format, source.fields, zone, source.service, source.time_unit,
            now_ms, "", source.pattern, source.time_format,
        )  # fmt: skip

    def _needed(
        self,
        window: tuple[int, int],
        flag: StopFlag,
        watch: WindowWatch | None = None,
        source: FileSource | None = None,
    ) -> Callable[[LogFile], bool]:
        # Files are chosen by their records' own time (`filetime`); past the deadline, by
        # mtime alone (the peeks are cached, so only a first call over many files pays).
        peeks = Reader(self.config.scan, flag, self.config.roots)
        chosen = self.sources[0] if source is None else source
        seen = watch.inside_window if watch is not None else (lambda _: None)

        def parser(dated_ms: int) -> LineParser:  # a missing year or date: as the scan's
            return self._parser(chosen, dated_ms)

        def needed(file: LogFile) -> bool:
            if flag.expired():
                return file.mtime_ms >= window[0]
            return self.times.needed(file, window, peeks, parser, seen)

        return needed

    def clock_warning(self) -> str:
        """The worker-start check: '' unless a source's newest file's last records lie in
        the future of this clock (a wrong timezone), then a line naming the topic."""
        for source in self.sources:
            try:
                files, _, _ = find_files(source.paths, self.config.roots, 0, 1)
            except SourceError:
                continue  # refused files are said by the warm-up's own call
            reader = Reader(self.config.scan, StopFlag(5.0), self.config.roots)
            newest = files[0] if files else None
            zone = zone_of(source.timezone) if source.timezone else self.zone
            warning = future_warning(self.topic.value, newest, reader, self._parser(source), zone)
            if warning:
                return warning
        return ""

    async def aclose(self) -> None:
        """Nothing held open between calls: each call opens and closes its files."""
