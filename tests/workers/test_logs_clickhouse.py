"""The CLICKHOUSE backend on the real engine in-process (chDB through clickhouse-connect's chdb
backend), on the OpenTelemetry Collector's `otel_logs` schema."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from logs_helpers import chdb_client, clickhouse_source

from contracts import ErrorCode, QueryLogsRequest, Topic
from workers.sources import SourceError
from workers.sources.logs.clickhouse import OTEL_LOGS_DDL, ClickhouseLogSource, compile_query
from workers.sources.logs.config import ClickhouseTopic
from workers.sources.logs.source import parse_log_query

NOW = 1_796_000_000.0
COLUMNS = [
    "Timestamp",
    "SeverityText",
    "SeverityNumber",
    "ServiceName",
    "Body",
    "LogAttributes",
    "ResourceAttributes",
]


def make_table(rows: list[list[Any]]) -> str:
    client = chdb_client()
    table = f"otel_logs_{uuid.uuid4().hex[:12]}"
    client.command(OTEL_LOGS_DDL.format(table=table))
    if rows:
        client.insert(table, rows, column_names=COLUMNS)
    return table


def row(seconds_ago: float, level: str, service: str, body: str, **attrs: str) -> list[Any]:
    number = {"ERROR": 17, "WARN": 13, "INFO": 9}.get(level, 0)
    return [
        datetime.fromtimestamp(NOW - seconds_ago, UTC),
        level,
        number,
        service,
        body,
        attrs,
        {"k8s.namespace.name": "shop"},
    ]


def source_for(table: str, extra: str = "") -> ClickhouseLogSource:
    return clickhouse_source(table, NOW, extra)


async def fetch(source: ClickhouseLogSource, query: str, lookback: int = 60) -> Any:
    return await source.fetch(
        QueryLogsRequest(topic=Topic.APPLICATION, query=query, lookback_minutes=lookback)
    )


@pytest.fixture(scope="module")
def incident() -> str:
    rows = [
        row(
            i * 10,
            "INFO",
            "order-service",
            f"GET /api/orders/{i} 200",
            http_status="200",
            uri="/api/orders",
        )
        for i in range(300)
    ]
    rows += [
        row(
            i * 10 + 5,
            "ERROR",
            "order-service",
            "HikariPool-1 - Connection is not available",
            http_status="503",
            exception="java.sql.SQLTransientConnectionException",
        )
        for i in range(40)
    ]
    rows += [
        row(
            i * 30,
            "WARN",
            "payment-service",
            "slow downstream call took 2300ms",
            cost_ms=str(2300 + i),
        )
        for i in range(20)
    ]
    rows += [row(7200, "ERROR", "order-service", "an old failure outside the window")]
    return make_table(rows)


async def test_counts_events_and_scope(incident: str) -> None:
    found = await fetch(source_for(incident), "level:ERROR exception:SQLTransient")
    assert found.source_kind == "CLICKHOUSE" and found.match_count == 40
    assert found.patterns[0].template == "HikariPool-<NUM> - Connection is not available"
    assert found.scope.start_time < found.scope.end_time
    assert found.records[-1].fields["http_status"] == 503


async def test_the_lookback_filters_both_time_columns(incident: str) -> None:
    assert (await fetch(source_for(incident), "old failure", lookback=60)).match_count == 0
    assert (await fetch(source_for(incident), "old failure", lookback=180)).match_count == 1
    where, _ = compile_query(parse_log_query(""), ClickhouseTopic(), 0, 1, has_timestamp_time=True)
    assert "TimestampTime >=" in where and "Timestamp >=" in where


async def test_numbers_exclusions_and_presence(incident: str) -> None:
    source = source_for(incident)
    assert (await fetch(source, "cost_ms:>=2310")).match_count == 10
    assert (await fetch(source, "http_status:503")).match_count == 40
    assert (await fetch(source, "-level:INFO -level:WARN")).match_count == 40
    assert (await fetch(source, "exception:*")).match_count == 40
    assert (await fetch(source, '"downstream call"')).match_count == 20


async def test_the_topic_filter_narrows_the_table(incident: str) -> None:
    only = source_for(incident, 'service_names = ["payment-service"]\n')
    assert (await fetch(only, "")).match_count == 20
    by_attr = source_for(
        incident, '[topics.APPLICATION.attributes]\n"k8s.namespace.name" = "other"\n'
    )
    assert (await fetch(by_attr, "")).match_count == 0


async def test_limit_n_plus_one_and_an_exact_count(incident: str) -> None:
    found = await fetch(source_for(incident, "row_limit = 10\n"), "")
    assert found.match_count == 360 and len(found.records) <= 10
    assert not found.match_count_lower_bound  # count() is exact


async def test_agent_text_is_only_ever_a_bound_parameter(incident: str) -> None:
    hostile = '"\'; DROP TABLE x; --" service:"\') OR 1=1 --"'
    where, params = compile_query(
        parse_log_query(hostile), ClickhouseTopic(), 0, 1, has_timestamp_time=False
    )
    assert "DROP" not in where and "OR 1=1" not in where and ";" not in where
    assert "'; drop table x; --" in params.values()
    found = await fetch(source_for(incident), hostile)
    assert found.match_count == 0
    assert chdb_client().query(f"SELECT count() FROM {incident}").result_rows[0][0] == 361


async def test_readonly_does_not_stick_to_the_handle(incident: str) -> None:
    await fetch(source_for(incident), "timeout")
    table = make_table([])
    chdb_client().insert(table, [row(1, "INFO", "s", "written after a read")], column_names=COLUMNS)


async def test_a_missing_table_is_an_error_that_names_no_table() -> None:
    with pytest.raises(SourceError) as caught:
        await fetch(source_for("no_such_table_here"), "")
    assert caught.value.code is ErrorCode.EXECUTION
    assert "no_such_table" not in caught.value.message and "APPLICATION" in caught.value.message


def test_max_execution_time_stops_the_query() -> None:
    client = chdb_client()
    table = make_table([])
    client.command(
        f"INSERT INTO {table} (Timestamp, SeverityText, ServiceName, Body, LogAttributes) "
        "SELECT fromUnixTimestamp64Milli(toInt64(1796000000000 - number)), 'INFO', 'svc', "
        "concat('line ', toString(number)), map('k', toString(number)) FROM numbers(3000000)"
    )
    source = source_for(table)
    request = QueryLogsRequest(topic=Topic.APPLICATION, query="-zzz 999", lookback_minutes=1440)
    with pytest.raises(SourceError) as caught:
        source.search(request, parse_log_query(request.query), 0.001)
    assert caught.value.code is ErrorCode.TIMEOUT


async def test_the_trace_id_of_the_otel_schema_is_the_trace_id_field() -> None:
    # The Collector's exporter writes a record's trace context into the TraceId column, not
    # into LogAttributes. Before, `trace_id:<id>` and the id as a word answered NO_EVIDENCE
    # over the very row, shown without its trace id, though `trace_id` is a field of the topic.
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    table = make_table([row(60, "ERROR", "pay", "charge failed"), row(70, "INFO", "pay", "ok")])
    chdb_client().insert(
        table,
        [[datetime.fromtimestamp(NOW - 30, UTC), trace, "ERROR", 17, "pay", "card declined", {}],
         [datetime.fromtimestamp(NOW - 40, UTC), trace, "INFO", 9, "pay", "retry", {"trace_id": "t-own"}]],
        column_names=["Timestamp", "TraceId", "SeverityText", "SeverityNumber", "ServiceName",
                      "Body", "LogAttributes"],
    )  # fmt: skip
    source = source_for(table)
    (found,) = (await fetch(source, f"trace_id:{trace}")).records
    assert found.message == "card declined" and found.fields["trace_id"] == trace
    assert (await fetch(source, trace)).match_count == 1  # the other row shows its own
    assert (await fetch(source, "trace_id:t-own")).match_count == 1  # an app's own attribute
    assert (await fetch(source, "trace_id:*")).match_count == 2
    assert (await fetch(source, "-trace_id:*")).match_count == 2
