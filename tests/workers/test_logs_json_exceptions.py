"""JSON producers' exception and duration keys under the fields an agent asks for: ECS's
`error.type` (Elasticsearch 8's own log, ecs-logging's Java, .NET and Python loggers) is the
field `exception`, MongoDB's slow operation `attr.durationMillis` is also `duration_ms`.
Before, `exception:IllegalArgumentException` over Elasticsearch's failed searches and
`duration_ms:>1000` over mongod's slow queries answered NO_EVIDENCE.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

from logs_helpers import file_source, search

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC).timestamp()


def write(tmp_path: Path, lines: list[dict[str, object]]) -> None:
    path = tmp_path / "app.json"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    os.utime(path, (NOW - 60, NOW - 60))


def test_ecs_error_type_is_the_exception(tmp_path: Path) -> None:
    write(tmp_path, [
        {"@timestamp": "2026-12-04T11:50:00.000Z", "log.level": "ERROR",
         "message": "failed to execute search", "ecs.version": "1.2.0",
         "service.name": "ES_ECS", "log.logger": "o.e.a.s.TransportSearchAction",
         "error.type": "java.lang.IllegalArgumentException",
         "error.message": "No mapping found for [ts]",
         "error.stack_trace": "java.lang.IllegalArgumentException: No mapping found for [ts]\n"
                              "\tat o.e.s.s.FieldSortBuilder.build(FieldSortBuilder.java:1)"},
        {"@timestamp": "2026-12-04T11:50:01.000Z", "log.level": "ERROR", "message": "own",
         "exception": "mine", "error.type": "kept"},
    ])  # fmt: skip
    source = file_source(tmp_path, "jsonl", ["app.json"], now=NOW)
    (record,) = search(source, "exception:IllegalArgumentException").records
    assert record.message == "failed to execute search" and "error_type" not in record.fields
    (own,) = search(source, "exception:mine").records  # an app's own `exception` wins
    assert own.fields["error_type"] == "kept"


def test_mongodb_slow_operations_compare_by_duration(tmp_path: Path) -> None:
    write(tmp_path, [
        {"t": {"$date": "2026-12-04T11:50:00.000+00:00"}, "s": "I", "c": "COMMAND", "id": 51803,
         "ctx": "conn3", "msg": "Slow query",
         "attr": {"ns": "shop.orders", "durationMillis": 3012, "planSummary": "COLLSCAN"}},
        {"t": {"$date": "2026-12-04T11:50:01.000+00:00"}, "s": "I", "c": "COMMAND", "id": 51803,
         "ctx": "conn4", "msg": "Slow query", "attr": {"ns": "shop.orders", "durationMillis": 120}},
    ])  # fmt: skip
    source = file_source(tmp_path, "jsonl", ["app.json"], now=NOW)
    (slow,) = search(source, "duration_ms:>1000").records
    assert slow.fields["duration_ms"] == 3012 and slow.fields["attr_durationMillis"] == 3012


def test_node_and_python_json_loggers_name_the_exception(tmp_path: Path) -> None:
    write(tmp_path, [
        {"name": "orders", "hostname": "web-1", "pid": 7, "level": 50, "v": 0,
         "err": {"message": "boom", "name": "TypeError",
                 "stack": "TypeError: boom\n    at f (/app/x.js:1:1)"},
         "msg": "boom", "time": "2026-12-04T11:50:00.000Z"},  # bunyan
        {"level": 50, "time": 1796385001000, "pid": 7, "hostname": "web-1",
         "err": {"type": "Error", "message": "connect ECONNREFUSED 10.0.0.5:5432",
                 "stack": "Error: connect ECONNREFUSED 10.0.0.5:5432\n    at TCPConnectWrap"},
         "msg": "db connect failed"},  # pino
        {"asctime": "x", "levelname": "ERROR", "timestamp": "2026-12-04T11:50:02Z",
         "name": "shop", "message": "charge failed",
         "exc_info": "Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: bad"},
    ])  # fmt: skip
    source = file_source(tmp_path, "jsonl", ["app.json"], now=NOW)
    assert [r.fields["exception"].split("\n")[0] for r in search(source, "exception:*").records] == [
        "TypeError", "Error", "Traceback (most recent call last):",
    ]  # fmt: skip
    assert search(source, "exception:ValueError level:error").match_count == 1


def test_elasticsearch_7_stacktrace_is_text_and_names_the_exception(tmp_path: Path) -> None:
    write(tmp_path, [
        {"type": "server", "timestamp": "2026-12-04T11:50:00,123Z", "level": "WARN",
         "component": "o.e.b.ElasticsearchUncaughtExceptionHandler", "cluster.name": "es",
         "node.name": "es-1", "message": "uncaught exception in thread [main]",
         "stacktrace": [
             "org.elasticsearch.bootstrap.StartupException: java.lang.IllegalStateException: "
             "failed to obtain node locks, tried [[/data]]",
             "at org.elasticsearch.bootstrap.Elasticsearch.init(Elasticsearch.java:174) ~[?:?]",
             "Caused by: java.lang.IllegalStateException: failed to obtain node locks",
         ]},
        {"@timestamp": "2026-12-04T11:50:01.000Z", "level": "ERROR", "message": "charge failed",
         "stack_trace": "java.sql.SQLTransientConnectionException: pool exhausted\n\tat x.y(Z.java:1)"},
        {"timestamp": "2026-12-04T11:50:02.000Z", "level": "INFO", "message": "tags",
         "stacktrace": ["a", 1]},  # not a stack: kept as its JSON text
    ])  # fmt: skip
    source = file_source(tmp_path, "jsonl", ["app.json"], now=NOW)
    (es,) = search(source, "exception:StartupException").records
    assert es.fields["exception"] == "org.elasticsearch.bootstrap.StartupException"
    assert str(es.fields["stacktrace"]).split("\n")[2].startswith("Caused by: java.lang")
    assert search(source, '"Caused by: java.lang.IllegalStateException"').match_count == 1
    assert search(source, '"Elasticsearch.init(Elasticsearch.java:174)"').match_count == 1
    (logback,) = search(source, "exception:SQLTransientConnectionException").records
    assert logback.message == "charge failed"
    (other,) = search(source, "tags").records
    assert other.fields["stacktrace"] == '["a",1]' and "exception" not in other.fields
