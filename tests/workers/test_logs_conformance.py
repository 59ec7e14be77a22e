"""One query language, one answer: the same records loaded into an in-memory backend (the
MOCK source's matching over plain entries), the FILE backend (JSON lines) and the CLICKHOUSE
backend (chDB, `otel_logs`) give the same match counts, events and patterns for every query."""

from __future__ import annotations

import json
import random
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from logs_helpers import chdb_client, file_source, project, search

from contracts import LogScope, LogsResult, QueryLogsRequest, SourceKind, Topic
from workers.sources.logs.clickhouse import OTEL_LOGS_DDL, ClickhouseLogSource
from workers.sources.logs.config import ClickhouseTopic, parse_logs_config
from workers.sources.logs.records import Digest, Entry, entry_matches, format_ms
from workers.sources.logs.source import parse_log_query

NOW = 1_796_000_000.0
END_MS = int(NOW * 1000)

QUERIES = [
    "", "timeout", '"connection refused"', "level:ERROR", "level:error", "-level:INFO",
    "service:order", "http_status:503", "http_status:>=500", "cost_ms:<100", "cost_ms:>=2999.5",
    "exception:*", "-exception:*", "uri:/api/orders", "timeout -level:WARN", "ünïcödé", "50",
    "message:timed", "service:*", '"pool-2"', "-timeout -refused", "exception:Transient http_status:503",
    "trace_id:ab", "retry -service:payment", "503",
]  # fmt: skip


def make_records() -> list[Entry]:
    rng = random.Random(21)
    services = ["order-service", "payment-service", "gateway"]
    messages = [
        ("ERROR", "HikariPool-{n} - Connection is not available, request timed out after 30000ms"),
        ("WARN", "retry {n} of downstream call: connection refused (timeout 2s)"),
        ("INFO", "GET /api/orders/{n} 200"),
        ("INFO", "health check ok"),
        ("ERROR", "payment declined for order {n}: ünïcödé reason"),
        ("WARN", 'slow query "pool-2" took {n}ms'),
    ]
    records = []
    for i in range(400):
        level, text = rng.choice(messages)
        fields: dict[str, Any] = {"uri": rng.choice(["/api/orders", "/api/pay", "/health"])}
        if level == "ERROR":
            fields["http_status"] = rng.choice([500, 503])
            if rng.random() < 0.6:
                fields["exception"] = "java.sql.SQLTransientConnectionException"
        else:
            fields["http_status"] = 200
        if rng.random() < 0.5:
            fields["cost_ms"] = rng.choice([12, 80, 2999.5, 3000, 30000])
        if rng.random() < 0.3:
            fields["trace_id"] = f"{rng.getrandbits(64):016x}"
        epoch = END_MS - rng.randrange(0, 90 * 60_000)  # some outside the 60-minute window
        records.append(Entry(epoch, level, rng.choice(services), text.format(n=i), fields))
    return records


def in_memory(records: list[Entry], query: str) -> Any:
    parsed = parse_log_query(query)
    digest = Digest(64)
    start = END_MS - 60 * 60_000
    for entry in records:
        if start <= entry.epoch_ms <= END_MS and entry_matches(parsed, entry):
            digest.add(entry)
    scope = LogScope(topic=Topic.APPLICATION, query=query, lookback_minutes=60,
                     start_time=format_ms(start), end_time=format_ms(END_MS))  # fmt: skip
    return digest.upstream(SourceKind.MOCK, scope, UTC)


@pytest.fixture(scope="module")
def backends(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[list[Entry], Any, ClickhouseLogSource]:
    records = make_records()
    root: Path = tmp_path_factory.mktemp("conformance")
    with (root / "app.jsonl").open("w") as out:
        for r in records:
            out.write(
                json.dumps(
                    {
                        "timestamp": format_ms(r.epoch_ms),
                        "level": r.level,
                        "service": r.service,
                        "message": r.message,
                        **r.fields,
                    }
                )
                + "\n"
            )
    files = file_source(root, "jsonl", ["app.jsonl"], now=NOW)
    client = chdb_client()
    table = f"otel_logs_{uuid.uuid4().hex[:12]}"
    client.command(OTEL_LOGS_DDL.format(table=table))
    rows = [
        [
            datetime.fromtimestamp(r.epoch_ms / 1000, UTC),
            r.level,
            0,
            r.service,
            r.message,
            {k: str(v) for k, v in r.fields.items()},
        ]
        for r in records
    ]
    client.insert(
        table,
        rows,
        column_names=[
            "Timestamp",
            "SeverityText",
            "SeverityNumber",
            "ServiceName",
            "Body",
            "LogAttributes",
        ],
    )
    config = parse_logs_config(
        f'[clickhouse]\ndsn = "chdb://memory"\n[topics.APPLICATION]\nbackend = "clickhouse"\ntable = "{table}"\n'
    )
    entry = config.topics[Topic.APPLICATION]
    assert isinstance(entry, ClickhouseTopic) and config.clickhouse is not None
    clickhouse = ClickhouseLogSource(
        config.clickhouse, {Topic.APPLICATION: entry}, config, {}, client=client, clock=lambda: NOW
    )
    return records, files, clickhouse


def comparable(result: LogsResult) -> tuple[Any, ...]:
    return (
        result.evidence_status,
        result.match_count,
        result.returned_count,
        result.patterns,
        result.events,
        result.truncated,
    )


@pytest.mark.parametrize("query", QUERIES)
async def test_every_backend_gives_the_same_answer(backends: Any, query: str) -> None:
    records, files, clickhouse = backends
    memory = project(in_memory(records, query))
    from_files = project(search(files, query))
    request = QueryLogsRequest(topic=Topic.APPLICATION, query=query, lookback_minutes=60)
    from_clickhouse = project(await clickhouse.fetch(request))
    assert comparable(from_files) == comparable(memory)
    assert comparable(from_clickhouse) == comparable(memory)
    assert (from_files.source_kind, from_clickhouse.source_kind) == ("FILE", "CLICKHOUSE")


def test_the_table_is_discriminating(backends: Any) -> None:
    records = backends[0]
    counts = {q: in_memory(records, q).match_count for q in QUERIES}
    assert counts[""] > counts["timeout"] > 0
    assert len(set(counts.values())) > len(QUERIES) // 2
