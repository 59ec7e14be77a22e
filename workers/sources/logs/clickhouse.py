"""`query_logs` over ClickHouse (`source_kind` CLICKHOUSE), on the OpenTelemetry Collector's
`otel_logs` schema (`Timestamp DateTime64(9)`, `TimestampTime`, `SeverityText`,
`SeverityNumber`, `ServiceName`, `Body`, `LogAttributes`/`ResourceAttributes` maps).

The query language compiles to a WHERE clause whose every value is a bound server-side
parameter (`{p3:String}`): no text of the agent is ever spliced into SQL, so there is no `;`,
quote or comment to smuggle. The same clause serves two statements: the newest rows
(`ORDER BY Timestamp DESC LIMIT n+1`: more than n rows says the sample is cut) and an exact
`count()`. Both carry `readonly=1` and `max_execution_time` from the call's deadline (a
per-query setting of a SELECT; never on `command()`, where clickhouse-connect would leave the
handle read-only). Lookback filters `Timestamp` and, when the table has it, `TimestampTime`
(the partition and primary key column).

What the clauses mean, as for every backend (`records.py`): a word is a case-insensitive
substring (with the number boundary of `terms`) of `Body`, `SeverityText`,
`ServiceName` or any `LogAttributes` value, each as it is shown (without terminal control
sequences and zero-width characters, taken out in the WHERE clause: `clickhouse_sql`);
`field:value` reads `level` → `SeverityText`, `service` → `ServiceName`, `message` → `Body`,
any other name → `LogAttributes[name]`, compared as a number when both sides are numbers.

Errors name the topic, never the table, host or DSN; ClickHouse's own texts (which quote the
table) are dropped, its error code kept. Reachability is logged per change, not per call: the
first unreachable answer is one WARNING naming the topics, the next answer one WARNING line (the
driver's and urllib3's per-request warnings are quieted in `workers.logging_setup`); every
call while it is down still answers ERROR/UNAVAILABLE.

A cancelled call's statement is killed in the engine (`clickhouse_cancel`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Final

import msgspec
from msgspec import UNSET, UnsetType

from contracts.logs import LogsUpstream
from contracts.requests import QueryLogsRequest
from contracts.results import JsonScalar, LogScope, RecordTimes
from contracts.status import ErrorCode, SourceKind, Topic
from workers.sources.base import SourceError
from workers.sources.calltime import call_time
from workers.sources.logs.clickhouse_cancel import kill, run_stoppable, unless_stopped
from workers.sources.logs.clickhouse_sql import OTEL_LOGS_DDL, compile_query
from workers.sources.logs.config import ClickhouseConnection, ClickhouseTopic, LogsConfig, zone_of
from workers.sources.logs.deadline import remaining_seconds
from workers.sources.logs.formats import level_of
from workers.sources.logs.levels import keep_level_name
from workers.sources.logs.masking import without_cut_url_password
from workers.sources.logs.mocklog import NUMERIC_FIELDS
from workers.sources.logs.records import Digest, Entry, as_number, entry_matches, format_ms, masked
from workers.sources.logs.source import ParsedQuery, check_fields, parse_log_query
from workers.sources.logs.tokens import without_cut_token

__all__ = ["OTEL_LOGS_DDL", "ClickhouseLogSource", "compile_query"]

log = logging.getLogger("aci.sources.clickhouse")

_YEAR_2100_MS: Final = 4_102_444_800_000  # the latest end a nearest-record search reads to


def _field_value(name: str, value: str) -> JsonScalar:
    if name in NUMERIC_FIELDS:
        number = as_number(value)
        if number is not None:
            return int(number) if number.is_integer() and "." not in value else number
    return value


def _masked_count(count: int, read: int, kept: int) -> tuple[int, bool]:
    """The match count over masked text, and whether it is a lower bound: the store counted
    `count` rows by their raw text, `read` of them were read and `kept` still match once
    masked. Every row read: exact. Some row read matched only by a secret and some were left
    unread: those may be such rows too, so only the rows read are counted, as a lower bound
    (the store's count would confirm a guess at a secret)."""
    if read >= count or kept == read:
        return (kept if read >= count else count), False
    return kept, True


class ClickhouseLogSource:
    """Every ClickHouse topic of the configuration, over one client."""

    source_kind: Final = SourceKind.CLICKHOUSE

    def __init__(
        self,
        connection: ClickhouseConnection,
        topics: Mapping[Topic, ClickhouseTopic],
        config: LogsConfig,
        env: Mapping[str, str],
        *,
        client: Any = None,
        stop_client: Any = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """`client`/`stop_client`: injected (tests); an injected client without a stop client
        is not killed on cancel (its statement runs to `max_execution_time`)."""
        self.connection, self.topics, self.config = connection, dict(topics), config
        self.password = env.get(connection.password_env, "") if connection.password_env else ""
        self.zone = zone_of(config.timezone)
        self.clock = clock or time.time
        self._client, self._owns_client = client, client is None
        self._stopper, self._owns_stopper = stop_client, client is None
        self._lock = threading.Lock()
        self._columns: dict[str, frozenset[str]] = {}
        self._state_lock = threading.Lock()
        self._reachable: bool | None = None  # unknown until the first answer or failure

    def _new_client(self, answer_s: float) -> Any:
        import clickhouse_connect

        options: dict[str, Any] = {"dsn": self.connection.dsn}
        if self.password:
            options["password"] = self.password
        if not self.connection.dsn.startswith("chdb:"):
            options["connect_timeout"] = self.connection.connect_timeout_s
            # A server that stops answering must not hold a thread for the library's 300 s.
            options["send_receive_timeout"] = answer_s
        return clickhouse_connect.get_client(**options)

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is None:
                answer_s = self.config.scan.max_seconds + self.connection.connect_timeout_s
                self._client = self._new_client(answer_s)
            return self._client

    def _get_stopper(self) -> Any:
        with self._lock:
            if self._stopper is None and self._owns_stopper:
                self._stopper = self._new_client(self.connection.connect_timeout_s)
            return self._stopper

    async def fetch(self, request: QueryLogsRequest) -> LogsUpstream:
        """Compile, then run the two statements in a thread under the call's deadline; a
        cancel abandons the thread at once and kills the statements in the engine."""
        query = parse_log_query(request.query)
        check_fields(query, request.topic, tuple(self.topics[request.topic].fields))
        seconds = remaining_seconds(self.config.scan.max_seconds)
        if seconds <= 0:
            raise SourceError(ErrorCode.TIMEOUT, "no time was left to run the query")
        when = call_time()  # the window admission recorded
        end_ms = None if when is None else when.end_ms
        search = partial(self.search, request, query, seconds, end_ms)
        return await run_stoppable(search, self.stop, self.connection.connect_timeout_s)

    def stop(self, mark: str) -> bool:
        """Blocking: kill this source's statements of `mark` (`clickhouse_cancel.kill`)."""
        return kill(self._get_stopper, mark)

    def _table(self, entry: ClickhouseTopic, params: dict[str, Any]) -> str:
        db, _, table = entry.table.rpartition(".")
        params["tbl"] = table
        if db:
            params["db"] = db
            return "{db:Identifier}.{tbl:Identifier}"
        return "{tbl:Identifier}"

    def _optional(self, client: Any, entry: ClickhouseTopic, seconds: float) -> frozenset[str]:
        """Which of the exporter's columns a query may do without the table has (a view or an
        older table may lack them): `TimestampTime`, `TraceId`."""
        found = self._columns.get(entry.table)
        if found is None:
            db, _, table = entry.table.rpartition(".")
            database = "{dbname:String}" if db else "currentDatabase()"
            result = client.query(
                "SELECT name FROM system.columns WHERE table = {tab:String} AND name IN "
                f"('TimestampTime', 'TraceId') AND database = {database}",
                parameters={"tab": table, **({"dbname": db} if db else {})},
                settings={"readonly": 1, "max_execution_time": seconds},
            )
            found = self._columns[entry.table] = frozenset(r[0] for r in result.result_rows)
        return found

    def search(
        self,
        request: QueryLogsRequest,
        query: ParsedQuery,
        seconds: float,
        end_ms: int | None = None,
        *,
        mark: str = "",
        stopped: threading.Event | None = None,
    ) -> LogsUpstream:
        """The synchronous query behind `fetch` over the window ending at `end_ms` (default:
        the source's clock); `SourceError` with a safe text on failure. `mark`: the
        `log_comment` of its statements, by which `stop` finds them; `stopped`: set by a
        cancel, checked before each statement."""
        entry = self.topics[request.topic]
        lookback = request.lookback_minutes or self.config.default_lookback
        end_ms = int(self.clock() * 1000) if end_ms is None else end_ms
        start_ms = end_ms - lookback * 60_000
        settings = {
            **({"log_comment": mark} if mark else {}),
            "readonly": 1,
            "max_execution_time": round(max(seconds, 0.05), 3),
            # The answer is bounded before it is read: over this many bytes the server refuses.
            "max_result_bytes": self.config.scan.max_bytes,
            "result_overflow_mode": "throw",
        }
        try:
            unless_stopped(stopped)
            client = self._get_client()
            optional = self._optional(client, entry, seconds)
            where, params = compile_query(
                query, entry, start_ms, end_ms, has_timestamp_time="TimestampTime" in optional,
                has_trace_id="TraceId" in optional,
            )  # fmt: skip
            table = self._table(entry, params)
            params["lim"] = entry.row_limit + 1
            params["cap"] = self.config.scan.max_line_bytes  # a huge Body is cut on the server
            unless_stopped(stopped)
            rows = client.query(
                "SELECT toUnixTimestamp64Milli(Timestamp), SeverityText, SeverityNumber, "
                "ServiceName, substringUTF8(Body, 1, {cap:UInt64}), LogAttributes, "
                + ("TraceId " if "TraceId" in optional else "'' ")
                + f"FROM {table} WHERE {where} "
                "ORDER BY Timestamp DESC LIMIT {lim:UInt32}",
                parameters=params,
                settings=settings,
            ).result_rows
            unless_stopped(stopped)
            count = client.query(
                f"SELECT count() FROM {table} WHERE {where}", parameters=params, settings=settings
            ).result_rows[0][0]
            times = UNSET if count else self._nearest(client, entry, query, (start_ms, end_ms),
                                                      seconds, settings)  # fmt: skip
        except SourceError:
            raise
        except Exception as exc:
            error = self._safe_error(request.topic, exc)
            # Any answer of the server (a refusal, its own timeout) says it is reachable.
            error.logged = self._note(reachable=error.code is not ErrorCode.UNAVAILABLE)
            raise error from None
        self._note(reachable=True)
        digest = Digest(self.config.sample_limit)
        read = rows[: entry.row_limit]
        cap = self.config.scan.max_line_bytes
        for ms, severity, number, service, body, attributes, trace in read:
            level = level_of(severity) if severity else level_of(number, "SeverityNumber")
            fields = {k: _field_value(k, v) for k, v in attributes.items()}
            if trace:  # the OTel schema's trace context (an app's own attribute wins)
                fields.setdefault("trace_id", trace)
            if len(body) >= cap:  # cut on the server: a URL's password may have lost its `@`
                body = without_cut_token(without_cut_url_password(body))
            if severity:  # the word written, as FILE keeps it (a query's `critical` finds it)
                keep_level_name(fields, severity, level)
            found = Entry(int(ms), level if severity or number else "", service, body, fields)
            # The store matched the unmasked text: a row that matched only by a secret's text
            # (masked here, as on every backend) is no match (`_masked_count`).
            if entry_matches(query, masked(found)):
                digest.add(found)
        scope = LogScope(
            topic=request.topic,
            query=request.query,
            lookback_minutes=lookback,
            start_time=format_ms(start_ms, self.zone),
            end_time=format_ms(end_ms, self.zone),
        )
        total, lower_bound = _masked_count(int(count), len(read), digest.match_count)
        if lower_bound and digest.match_count == 0:
            raise SourceError(
                ErrorCode.EXECUTION,
                f"the search of topic {request.topic.value} stopped at its row limit before it "
                "found a match; try a shorter lookback_minutes or a narrower query",
            )
        upstream = digest.upstream(
            self.source_kind, scope, self.zone, match_count=total, lower_bound=lower_bound
        )
        return msgspec.structs.replace(upstream, record_times=times)

    def _nearest(
        self,
        client: Any,
        entry: ClickhouseTopic,
        query: ParsedQuery,
        window: tuple[int, int],
        seconds: float,
        settings: dict[str, Any],
    ) -> RecordTimes | UnsetType:
        # Nothing matched in the window: the matching records nearest before and after it
        # (two more statements, each one row, on the table's time order), so the answer
        # says where the records are (`contracts.results.RecordTimes`).
        (start, end), found = window, []
        optional = self._optional(client, entry, seconds)
        has_time, has_trace = "TimestampTime" in optional, "TraceId" in optional
        for low, high, pick in ((0, start - 1, "max"), (end + 1, _YEAR_2100_MS, "min")):
            where, params = compile_query(
                query, entry, low, high, has_timestamp_time=has_time, has_trace_id=has_trace
            )
            table = self._table(entry, params)
            row = client.query(
                f"SELECT count(), {pick}(toUnixTimestamp64Milli(Timestamp)) FROM {table} "
                f"WHERE {where}",
                parameters=params,
                settings=settings,
            ).result_rows[0]
            found.append(format_ms(int(row[1]), self.zone) if row[0] else UNSET)
        if found == [UNSET, UNSET]:
            return UNSET
        return RecordTimes(nearest_before=found[0], nearest_after=found[1])

    def _note(self, *, reachable: bool) -> bool:
        """Log a change of reachability once (threads race here: one of them says it);
        whether the state is unreachable, and so already said. The line is said under the
        lock: said after it, a racing call's opposite change could be said first, and the
        last line would tell the operator the opposite of the state (up while every call
        fails, and no later failure would warn again)."""
        topics = ", ".join(sorted(t.value for t in self.topics))
        with self._state_lock:
            before, self._reachable = self._reachable, reachable
            if before is not False and not reachable:
                log.warning(
                    "query_logs: the ClickHouse log store of topics %s is unreachable; their "
                    "calls answer ERROR/UNAVAILABLE until it answers again",
                    topics,
                )
            elif before is False and reachable:
                # At the level of the outage's line: a log read at WARNING sees it end, too.
                log.warning(
                    "query_logs: the ClickHouse log store of topics %s answers again", topics
                )
        return not reachable

    def _safe_error(self, topic: Topic, exc: Exception) -> SourceError:
        code = getattr(exc, "code", None)
        name = type(exc).__name__
        if code == 159 or "TIMEOUT_EXCEEDED" in str(exc):
            return SourceError(ErrorCode.TIMEOUT, "the log store did not answer within the limit")
        if name in ("OperationalError", "ConnectionError") or isinstance(exc, OSError):
            return SourceError(
                ErrorCode.UNAVAILABLE, "the log store is unreachable", retryable=True
            )
        if code == 396:  # TOO_MANY_ROWS_OR_BYTES: max_result_bytes
            return SourceError(
                ErrorCode.EXECUTION,
                f"the answer of topic {topic.value} is over its size limit; try a shorter "
                "lookback_minutes or a narrower query",
            )
        if code in (60, 47, 16, 81):  # unknown table / identifier / column / database
            return SourceError(
                ErrorCode.EXECUTION,
                f"the log store of topic {topic.value} lacks the OpenTelemetry log table the "
                "operator configured",
            )
        suffix = f" (code {code})" if isinstance(code, int) else ""
        return SourceError(ErrorCode.EXECUTION, f"the log store refused the query{suffix}")

    async def aclose(self) -> None:
        """Close the clients this source opened (an injected one stays with its owner)."""
        if self._owns_client and self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
            self._client = None
        if self._owns_stopper and self._stopper is not None:
            with contextlib.suppress(Exception):
                self._stopper.close()
            self._stopper = None
