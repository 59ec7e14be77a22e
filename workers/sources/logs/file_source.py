"""`query_logs` over log files (`source_kind` FILE): one topic's globs, format and zone.

The query is parsed and its fields checked before any I/O; the scan then runs in a thread
under the call's deadline and the topic's scan budget (`deadline.run_stoppable`), reading
the newest files first (`files`), parsing them (`formats`, `slowlog`), keeping the matches in
the window in a bounded `Digest` (`records`).

Honest outcomes: a scan stopped early (budget, deadline, an over-long line, a broken archive)
answers with what it found, `truncated`, and its count marked as a lower bound; stopped early
with nothing found it is an ERROR (a cut-short search is not "no evidence"); files of which not
one line parses in the configured format are an ERROR too. No path reaches an answer or an
error: the topic is named, the files never are.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

import msgspec

from contracts.logs import LogsUpstream
from contracts.requests import QueryLogsRequest
from contracts.results import LogScope
from contracts.status import ErrorCode, SourceKind, Topic
from workers.sources.base import SourceError
from workers.sources.calltime import call_time
from workers.sources.logs.config import FileTopic, LogsConfig, zone_of
from workers.sources.logs.deadline import StopFlag, run_stoppable
from workers.sources.logs.files import LogFile, Reader, find_files
from workers.sources.logs.filetime import FileTimes, WindowWatch, future_warning
from workers.sources.logs.formats import LineParser, make_parser
from workers.sources.logs.prefilter import Prefilter
from workers.sources.logs.records import Digest, entry_matches, format_ms
from workers.sources.logs.source import ParsedQuery, check_fields, parse_log_query

__all__ = ["FORMAT_FIELDS", "FileLogSource"]

# Fields each format adds beyond the topic's own (so a query may name them).
FORMAT_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "jsonl": (),
    "logfmt": (),
    "cri": ("stream", "namespace", "container"),
    "syslog": ("host", "app", "pid", "facility"),
    "mysql_slow": ("db_instance", "thread_id", "rows_affected", "schema", "db_user"),
}


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
        self.extra_fields = tuple(entry.fields) + FORMAT_FIELDS[entry.format]

    async def fetch(self, request: QueryLogsRequest) -> LogsUpstream:
        """Parse, check, then scan under the deadline; `SourceError` on any failure."""
        query = parse_log_query(request.query)
        check_fields(query, request.topic, self.extra_fields)
        when = call_time()  # the window admission recorded
        end_ms = None if when is None else when.end_ms
        return await run_stoppable(
            lambda flag: self.search(request, query, flag, end_ms), self.config.scan.max_seconds
        )

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
        budget = self.config.scan
        flag.narrow(budget.max_seconds)
        watch = WindowWatch(start_ms, end_ms, now_ms)
        files, too_many, matched = find_files(
            self.entry.paths, self.config.roots, start_ms, budget.max_files, flag,
            self._needed((start_ms, end_ms), flag, watch),
        )  # fmt: skip
        if matched == 0 and not too_many:  # a wrong path or a missing folder: not "no evidence"
            raise SourceError(
                ErrorCode.UNAVAILABLE,
                f"no log file of topic {self.topic.value} exists on this deployment; the "
                "operator must check the configured paths",
            )
        reader = Reader(budget, flag, self.config.roots)
        fmt = self.entry.format
        prefilter = Prefilter(query, fmt, self.entry.service)
        may_match = prefilter.may_match if prefilter.terms else None
        digest = Digest(self.config.sample_limit)
        parsed = failed = 0
        for file in files:
            if flag.expired() or reader.out_of_budget:
                reader.stopped = True
                break
            parser = make_parser(
                self.entry.format, self.entry.fields, self.zone, self.entry.service,
                self.entry.time_unit, end_ms, file.real,
            )  # fmt: skip
            for line in reader.lines_of(file):
                if may_match is not None and not may_match(line):
                    continue  # cannot match: skip the parse
                for found in parser.feed(line):
                    parsed += 1
                    if watch.inside_window(found.epoch_ms) and entry_matches(query, found):
                        digest.add(found)
            for found in parser.flush():
                parsed += 1
                if watch.inside_window(found.epoch_ms) and entry_matches(query, found):
                    digest.add(found)
            failed += parser.failed
        lower_bound = reader.stopped or too_many
        self._check_outcome(digest, parsed, failed, lower_bound, flag)
        scope = LogScope(
            topic=request.topic,
            query=request.query,
            lookback_minutes=lookback,
            start_time=format_ms(start_ms, self.zone),
            end_time=format_ms(end_ms, self.zone),
        )
        upstream = digest.upstream(self.source_kind, scope, self.zone, lower_bound=lower_bound)
        return msgspec.structs.replace(upstream, record_times=watch.times(self.zone))

    def _parser(self) -> LineParser:
        entry, now_ms = self.entry, int(self.clock() * 1000)
        return make_parser(
            entry.format, entry.fields, self.zone, entry.service, entry.time_unit, now_ms
        )

    def _needed(
        self, window: tuple[int, int], flag: StopFlag, watch: WindowWatch | None = None
    ) -> Callable[[LogFile], bool]:
        # Files are chosen by their records' own time (`filetime`); past the deadline, by
        # mtime alone (the peeks are cached, so only a first call over many files pays).
        peeks = Reader(self.config.scan, flag, self.config.roots)

        def needed(file: LogFile) -> bool:
            if flag.expired():
                return file.mtime_ms >= window[0]
            seen = watch.inside_window if watch is not None else (lambda _: None)
            return self.times.needed(file, window, peeks, self._parser, seen)

        return needed

    def clock_warning(self) -> str:
        """The worker-start check: '' unless the newest file's last records lie in the
        future of this clock (a wrong timezone), then a line naming the topic."""
        try:
            files, _, _ = find_files(self.entry.paths, self.config.roots, 0, 1)
        except SourceError:
            return ""  # refused files are said by the warm-up's own call
        reader = Reader(self.config.scan, StopFlag(5.0), self.config.roots)
        newest = files[0] if files else None
        return future_warning(self.topic.value, newest, reader, self._parser(), self.zone)

    def _check_outcome(
        self, digest: Digest, parsed: int, failed: int, lower_bound: bool, flag: StopFlag
    ) -> None:
        name = self.topic.value
        if parsed == 0 and failed > 0:
            raise SourceError(
                ErrorCode.EXECUTION,
                f"the log files of topic {name} are not in the configured format "
                f"({self.entry.format}): no line could be read as a record",
            )
        if lower_bound and digest.match_count == 0:
            code = ErrorCode.TIMEOUT if flag.timed_out else ErrorCode.EXECUTION
            raise SourceError(
                code,
                f"the search of topic {name} stopped at its size or time limit before it found "
                "a match; try a shorter lookback_minutes or a narrower query",
            )

    async def aclose(self) -> None:
        """Nothing held open between calls: each call opens and closes its files."""
