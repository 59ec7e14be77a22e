"""FILE and CLICKHOUSE answer alike over the same records (docs/logs.md, "The language means
the same on every backend"): an attack on their parity beyond `test_logs_conformance`'s
records, which hold only the six level names."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from logs_helpers import chdb_client, clickhouse_source, file_source, search

from contracts import QueryLogsRequest, Topic
from workers.sources.logs.clickhouse import OTEL_LOGS_DDL, ClickhouseLogSource
from workers.sources.logs.deadline import StopFlag
from workers.sources.logs.records import format_ms
from workers.sources.logs.source import parse_log_query

NOW = 1_796_000_000.0
END_MS = int(NOW * 1000)


def clickhouse_of(rows: list[list[Any]]) -> ClickhouseLogSource:
    """A CLICKHOUSE topic over a fresh `otel_logs` table of these rows (Timestamp,
    SeverityText, SeverityNumber, ServiceName, Body, LogAttributes)."""
    client = chdb_client()
    table = f"otel_logs_{uuid.uuid4().hex[:12]}"
    client.command(OTEL_LOGS_DDL.format(table=table))
    columns = [
        "Timestamp",
        "SeverityText",
        "SeverityNumber",
        "ServiceName",
        "Body",
        "LogAttributes",
    ]
    client.insert(table, rows, column_names=columns)
    return clickhouse_source(table, NOW)


async def from_clickhouse(source: ClickhouseLogSource, query: str) -> Any:
    request = QueryLogsRequest(topic=Topic.APPLICATION, query=query, lookback_minutes=60)
    return await source.fetch(request)


def summary(found: Any) -> tuple[Any, ...]:
    return (
        found.match_count,
        sorted((r.level, r.message, r.fields.get("level_name")) for r in found.records),
    )


# A level as OpenTelemetry SDKs and bridges write it: Python's `CRITICAL`, syslog's `err`,
# java.util.logging's `SEVERE`, .NET's `Information`, and a record with only a SeverityNumber
# (17: ERROR), as the Collector's receivers leave SeverityText empty when no text was given.
LEVELLED = [("CRITICAL", 21, "disk /data gone"), ("err", 17, "charge failed for o-1"),
            ("", 17, "no severity text"), ("Information", 9, "order accepted"),
            ("SEVERE", 17, "gateway refused"), ("Warning", 13, "pool at 90%")]  # fmt: skip


async def test_levels_written_otherwise_are_matched_alike(tmp_path: Path) -> None:
    # Before: CLICKHOUSE showed these records as FATAL and ERROR, but compared `level:` and a
    # word with SeverityText as written: `level:fatal` and `critical` answered NO_EVIDENCE,
    # `level:error` 0 of 3 (FILE: 1, 1 and 3).
    lines = []
    rows: list[list[Any]] = []
    for n, (text, number, body) in enumerate(LEVELLED):
        at = END_MS - (n + 1) * 60_000
        record: dict[str, Any] = {"Timestamp": format_ms(at), "Body": body}
        if text:
            record["SeverityText"] = text
        record["SeverityNumber"] = number
        lines.append(json.dumps(record) + "\n")
        rows.append([datetime.fromtimestamp(at / 1000, UTC), text, number, "", body, {}])
    (tmp_path / "app.jsonl").write_text("".join(lines))
    files = file_source(tmp_path, "jsonl", ["app.jsonl"], now=NOW)
    store = clickhouse_of(rows)
    queries = ["", "level:fatal", "level:critical", "level:error", "level:err", "level:info",
               "level:warn", "fatal", "critical", "-level:error", "information", "-critical"]  # fmt: skip
    for query in queries:
        assert summary(await from_clickhouse(store, query)) == summary(search(files, query)), query
    assert (await from_clickhouse(store, "level:error")).match_count == 3


async def test_a_record_within_the_windows_last_millisecond_is_in_it_on_both(
    tmp_path: Path,
) -> None:
    # An as-of pinned to an alert's time (to the millisecond, as every window is) and the
    # record that raised it, stamped to the nanosecond within that millisecond: FILE reads
    # times to the millisecond (the record is at the window's end, inside it), CLICKHOUSE
    # compared the nanoseconds (after the end: outside). Before, `"disk full"` found it on
    # FILE and answered NO_EVIDENCE on CLICKHOUSE.
    at = datetime.fromtimestamp(NOW, UTC).replace(microsecond=123_456)  # .123456 past NOW
    end_ms = int(NOW * 1000) + 123
    line = json.dumps({"Timestamp": at.isoformat(), "SeverityText": "ERROR", "Body": "disk full"})
    (tmp_path / "app.jsonl").write_text(line + "\n")
    files = file_source(tmp_path, "jsonl", ["app.jsonl"], now=NOW + 60)
    store = clickhouse_of([[at, "ERROR", 17, "", "disk full", {}]])
    request = QueryLogsRequest(topic=Topic.APPLICATION, query='"disk full"', lookback_minutes=5)
    parsed = parse_log_query(request.query)
    on_file = files.search(request, parsed, StopFlag(60), end_ms)
    on_clickhouse = store.search(request, parsed, 30.0, end_ms)
    assert on_file.match_count == 1
    assert on_clickhouse.match_count == 1
    assert on_clickhouse.records[0].timestamp == on_file.records[0].timestamp
