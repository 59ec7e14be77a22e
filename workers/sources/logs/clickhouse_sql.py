"""The SQL of `query_logs` over ClickHouse (`workers.sources.logs.clickhouse`): the
OpenTelemetry Collector's `otel_logs` table, and the query language compiled to a WHERE clause
whose every value is a bound server-side parameter (`{p3:String}`): no text of the agent is
ever spliced into SQL. Pure: no client, no I/O.
"""

from __future__ import annotations

from typing import Any, Final

from workers.sources.logs.config import ClickhouseTopic
from workers.sources.logs.levels import LEVEL_WORDS, LEVELS
from workers.sources.logs.secret_shapes import CONTROL_SEQUENCE, INVISIBLE
from workers.sources.logs.source import Clause, ParsedQuery
from workers.sources.logs.terms import boundary_pattern, bounded

__all__ = ["OTEL_LOGS_DDL", "compile_query"]

# The exporter's table (exporter/clickhouseexporter logs_table.sql), for tests and the bench.
OTEL_LOGS_DDL: Final = """CREATE TABLE IF NOT EXISTS {table} (
  Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
  TimestampTime DateTime DEFAULT toDateTime(Timestamp),
  TraceId String CODEC(ZSTD(1)),
  SpanId String CODEC(ZSTD(1)),
  TraceFlags UInt8,
  SeverityText LowCardinality(String) CODEC(ZSTD(1)),
  SeverityNumber UInt8,
  ServiceName LowCardinality(String) CODEC(ZSTD(1)),
  Body String CODEC(ZSTD(1)),
  ResourceSchemaUrl LowCardinality(String) CODEC(ZSTD(1)),
  ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
  ScopeSchemaUrl LowCardinality(String) CODEC(ZSTD(1)),
  ScopeName String CODEC(ZSTD(1)),
  ScopeVersion LowCardinality(String) CODEC(ZSTD(1)),
  ScopeAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
  LogAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
  INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
  INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
  INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
  INDEX idx_log_attr_key mapKeys(LogAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
  INDEX idx_log_attr_value mapValues(LogAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
  INDEX idx_body Body TYPE tokenbf_v1(32768, 3, 0) GRANULARITY 8
) ENGINE = MergeTree()
PARTITION BY toDate(TimestampTime)
PRIMARY KEY (ServiceName, TimestampTime)
ORDER BY (ServiceName, TimestampTime, Timestamp)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1"""

_COLUMNS: Final = {"level": "SeverityText", "service": "ServiceName", "message": "Body"}
_LEVEL: Final = "\x00level\x00"  # the level as shown (`_Params.level`), not a column
# The OTel schema's trace context is a column, not an attribute: `trace_id` is an app's own
# attribute when it has one, else TraceId (as `clickhouse` shows the row)
_TRACE: Final = "if(mapContains(LogAttributes, 'trace_id'), LogAttributes['trace_id'], TraceId)"
_TRACE_EXISTS: Final = "(mapContains(LogAttributes, 'trace_id') OR TraceId != '')"
# A word is also looked for in the level as every backend shows it, beside SeverityText as
# written (the record's `level_name`, as FILE keeps it)
_HAY_COLUMNS: Final = ("Body", "SeverityText", "ServiceName", "TraceId", _LEVEL)
_COLUMN: Final = "\x00column\x00"  # where `_text_hit` names its column

# Every backend matches a text as it is shown (`masking`): without a terminal's control
# sequences and the characters a reader does not see (`secret_shapes`), so a phrase split by a
# colour code or a zero-width space is found. An OSC's body is unbounded in both (RE2 has no
# possessive repetition and needs none: it does not backtrack).
# The pattern is compiled once per block of rows whatever it meets, and a repetition of 1,024
# made its compilation cost 5x the search (100k rows: 19 ms raw, 29 ms with this, 115 ms).
_HIDDEN_PATTERN: Final = CONTROL_SEQUENCE.replace(r"\n]*+", r"\n]*") + f"|[{INVISIBLE}]"
_HIDDEN_MARKS: Final = ["\x1b", *INVISIBLE]  # a cheap test first: most texts hold none


def _text_hit(term: str, params: _Params) -> str:
    """A text term in a column `_COLUMN` (`terms`): a substring, case-insensitive; a term that
    starts or ends with a digit also by `match()` with its number boundary, the cheap
    substring search kept in front (each value bound once)."""
    found = f"positionCaseInsensitiveUTF8({_COLUMN}, {params.bind(term, 'String')}) > 0"
    if not bounded(term):
        return found
    return f"({found} AND match({_COLUMN}, {params.bind(boundary_pattern(term), 'String')}))"


def _hay(term: str, params: _Params) -> str:
    """A term in the message or any field value (each value on its own, as the other
    backends' separator keeps a phrase inside one field)."""
    hit = _text_hit(term, params)
    columns = [c for c in _HAY_COLUMNS if c != "TraceId" or params.trace]
    each = [hit.replace(_COLUMN, params.column(column)) for column in columns]
    each.append(f"arrayExists(x -> {hit.replace(_COLUMN, params.shown('x'))}, "
                "mapValues(LogAttributes))")  # fmt: skip
    return "(" + " OR ".join(each) + ")"


_CMP: Final = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}


class _Params:
    def __init__(self, trace: bool = True) -> None:
        self.trace = trace  # the table has TraceId
        self.values: dict[str, Any] = {}
        self._hidden: tuple[str, str] | None = None
        self._level: str | None = None

    def bind(self, value: Any, kind: str) -> str:
        name = f"p{len(self.values)}"
        self.values[name] = value
        return "{" + name + ":" + kind + "}"

    def column(self, name: str) -> str:
        """A column (or the level, `_LEVEL`) as shown."""
        if name == _LEVEL:
            return self.level()
        return self.shown(name)

    def level(self) -> str:
        """The record's level as `formats.level_of` reads the row (`clickhouse`): SeverityText
        normalised (`CRITICAL` FATAL, `err` ERROR, `Information` INFO, `trace3` TRACE, an
        unknown word upper-cased), else the SeverityNumber's (17..20 ERROR), else none.
        Before, `level:` compared SeverityText as written: a row shown FATAL for `CRITICAL`
        was not found by `level:fatal`, nor a SeverityNumber's ERROR by `level:error`."""
        if self._level is None:
            text = f"upperUTF8(trimBoth({self.shown('SeverityText')}))"
            words = self.bind(list(LEVEL_WORDS), "Array(String)")
            named = self.bind(list(LEVEL_WORDS.values()), "Array(String)")
            levels = self.bind(list(LEVELS), "Array(String)")
            numbered = (
                f"multiIf(match({text}, '^TRACE[0-9]+$'), 'TRACE', "
                f"match({text}, '^DEBUG[0-9]+$'), 'DEBUG', {text})"
            )
            self._level = (
                f"multiIf(SeverityText != '', transform({text}, {words}, {named}, {numbered}), "
                f"SeverityNumber != 0, arrayElement({levels}, "
                "least(intDiv(toInt32(SeverityNumber) - 1, 4), 5) + 1), '')"
            )
        return self._level

    def shown(self, column: str) -> str:
        """The column's text as shown: its hidden characters taken out where it holds any
        (the pattern and the marks bound once a query)."""
        if self._hidden is None:
            marks = self.bind(_HIDDEN_MARKS, "Array(String)")
            self._hidden = (marks, self.bind(_HIDDEN_PATTERN, "String"))
        marks, pattern = self._hidden
        return (
            f"if(multiSearchAny({column}, {marks}), "
            f"replaceRegexpAll({column}, {pattern}, ''), {column})"
        )


def _clause_sql(clause: Clause, params: _Params) -> str:
    if clause.field is None:
        return _hay(clause.value, params)
    if clause.op == "exists":
        if clause.field in _COLUMNS:
            return "1"
        if clause.field == "trace_id" and params.trace:
            return _TRACE_EXISTS
        return f"mapContains(LogAttributes, {params.bind(clause.field, 'String')})"
    column = _COLUMNS.get(clause.field) or f"LogAttributes[{params.bind(clause.field, 'String')}]"
    column = _TRACE if clause.field == "trace_id" and params.trace else column
    column = params.level() if clause.field == "level" else params.shown(column)
    number = f"toFloat64OrNull({column})"
    if clause.op == "contains":
        text = _text_hit(clause.value, params).replace(_COLUMN, column)
        if clause.number is None:
            return text
        equal = f"{number} = {params.bind(clause.number, 'Float64')}"
        return f"if(isNotNull({number}), ifNull({equal}, 0), {text})"
    return f"ifNull({number} {_CMP[clause.op]} {params.bind(clause.number, 'Float64')}, 0)"


def compile_query(
    query: ParsedQuery,
    entry: ClickhouseTopic,
    start_ms: int,
    end_ms: int,
    *,
    has_timestamp_time: bool,
    has_trace_id: bool = True,
) -> tuple[str, dict[str, Any]]:
    """The WHERE clause (without `WHERE`) and its bound parameters (`has_trace_id`: the
    table has the exporter's TraceId column, read as the field `trace_id`)."""
    params = _Params(has_trace_id)
    low, high = params.bind(start_ms, "Int64"), params.bind(end_ms, "Int64")
    parts = [
        f"Timestamp >= fromUnixTimestamp64Milli({low})",
        # times are read to the millisecond, as every backend reads them: a row within the
        # window's last millisecond is in it (`Timestamp` holds nanoseconds)
        f"Timestamp < fromUnixTimestamp64Milli({high} + 1)",
    ]
    if has_timestamp_time:
        parts += [
            f"TimestampTime >= toDateTime(intDiv({low}, 1000))",
            f"TimestampTime <= toDateTime(intDiv({high}, 1000))",
        ]
    if entry.service_names:
        parts.append(f"ServiceName IN {params.bind(list(entry.service_names), 'Array(String)')}")
    for key, value in entry.attributes.items():
        k, v = params.bind(key, "String"), params.bind(value, "String")
        parts.append(f"(LogAttributes[{k}] = {v} OR ResourceAttributes[{k}] = {v})")
    for clause in query.clauses:
        sql = _clause_sql(clause, params)
        parts.append(f"NOT ({sql})" if clause.negated else f"({sql})")
    return " AND ".join(parts), params.values
