"""The FILE backend: formats written by real producers, rotation, zones, newest first."""

from __future__ import annotations

import gzip
import json
import logging
import os
import shutil
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import structlog
from logs_helpers import file_source, project, search

from contracts import EvidenceStatus, Topic
from workers.sources.logs.deadline import StopFlag
from workers.sources.logs.files import find_files
from workers.sources.logs.formats import level_of, parse_time
from workers.sources.logs.scenario_files import write_file_scenario
from workers.sources.logs.slowlog import sql_template

NOW = 1_796_000_000.0  # fixed clock: 2026-11-29T...Z


def iso(seconds_ago: float) -> str:
    return datetime.fromtimestamp(NOW - seconds_ago, UTC).isoformat()


def test_structlog_json_lines_are_read(tmp_path: Path) -> None:
    path = tmp_path / "app.jsonl"
    with path.open("w") as out:
        logger = structlog.wrap_logger(
            structlog.PrintLogger(out),
            processors=[
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                structlog.processors.JSONRenderer(),
            ],
        )
        logger.error("payment declined", service="payment-service", http_status=502)
        logger.info("health ok", service="payment-service")
    # structlog stamps the wall clock: read it with a clock just after
    source = file_source(tmp_path, "jsonl", ["app.jsonl"], now=time.time() + 1)
    found = search(source, "level:ERROR http_status:502 declined")
    assert found.match_count == 1 and found.source_kind == "FILE"
    record = found.records[0]
    assert (record.level, record.service, record.message) == (
        "ERROR",
        "payment-service",
        "payment declined",
    )
    assert record.fields == {"http_status": 502}


def test_python_logging_with_gzip_rotation(tmp_path: Path) -> None:
    now = time.time()
    write_file_scenario(tmp_path, now)
    assert sorted(p.name for p in (tmp_path / "app").iterdir())[:2] == [
        "shop.jsonl",
        "shop.jsonl.1.gz",
    ]
    source = file_source(tmp_path, "jsonl", ["app/shop.jsonl*"], now=now)
    every = search(source, "", lookback=60)
    assert every.match_count == 360 + 24  # an hour of traffic and the errors, over all files
    errors = project(search(source, "exception:SQLTransientConnectionException http_status:503"))
    assert errors.evidence_status is EvidenceStatus.EVIDENCE_FOUND and errors.match_count == 24
    assert errors.patterns[0].template.startswith("HikariPool-<NUM> - Connection is not available")


def test_rotated_files_are_chosen_by_their_records_time_not_only_mtime(tmp_path: Path) -> None:
    # Issue 31: a rotated file whose mtime is older than the window (a `cp -p` copy, a file
    # unpacked from a tarball) is still read when its records fall in the window (before, it
    # was pruned by mtime and its 100-odd records were missing from the count).
    now = time.time()
    write_file_scenario(tmp_path, now)
    old = tmp_path / "app" / "shop.jsonl.2.gz"
    os.utime(old, (now - 7200, now - 7200))
    source = file_source(tmp_path, "jsonl", ["app/shop.jsonl*"], now=now)
    assert search(source, "", lookback=60).match_count == 384
    os.utime(old, (now, now))
    assert search(source, "", lookback=60).match_count == 384
    # A file last written before the window whose last record is before it too is not read;
    # one written after the window whose first record is after it is not read either.
    before, after = tmp_path / "app" / "shop.jsonl.old", tmp_path / "app" / "shop.jsonl.new"
    before.write_text(json.dumps({"timestamp": iso_at(now - 3 * 3600), "event": "old"}) + "\n")
    after.write_text(json.dumps({"timestamp": iso_at(now - 60), "event": "new"}) + "\n")
    os.utime(before, (now - 2 * 3600, now - 2 * 3600))
    needed = source._needed((int((now - 5400) * 1000), int((now - 1800) * 1000)), StopFlag(60))
    chosen, _, matched = find_files(source.entry.paths, source.config.roots, 0, 256, None, needed)
    names = {Path(f.real).name for f in chosen}
    assert matched == 5 and "shop.jsonl.2.gz" in names
    assert "shop.jsonl.old" not in names and "shop.jsonl.new" not in names


def iso_at(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).isoformat()


@pytest.mark.parametrize(
    ("line", "level", "message", "service"),
    [
        # logstash-logback-encoder
        (
            {
                "@timestamp": iso(60),
                "level": "WARN",
                "level_value": 30000,
                "message": "m",
                "logger_name": "a.B",
            },
            "WARN",
            "m",
            "",
        ),
        # zap production: epoch seconds as a float
        ({"level": "error", "ts": NOW - 60.5, "caller": "x.go:1", "msg": "m"}, "ERROR", "m", ""),
        # bunyan: numeric level, ISO time, name
        (
            {
                "name": "shop",
                "hostname": "h",
                "pid": 1,
                "level": 50,
                "msg": "m",
                "time": iso(60),
                "v": 0,
            },
            "ERROR",
            "m",
            "shop",
        ),
        # pino: epoch ms, numeric level
        (
            {"level": 60, "time": int((NOW - 60) * 1000), "pid": 1, "hostname": "h", "msg": "m"},
            "FATAL",
            "m",
            "",
        ),
        # ECS
        (
            {
                "@timestamp": iso(60),
                "log": {"level": "warn"},
                "message": "m",
                "service": {"name": "svc"},
            },
            "WARN",
            "m",
            "svc",
        ),
        # OpenTelemetry field names, nanoseconds
        (
            {
                "Timestamp": str(int((NOW - 60) * 1e9)),
                "SeverityText": "ERROR",
                "SeverityNumber": 17,
                "Body": "m",
                "ServiceName": "svc",
            },
            "ERROR",
            "m",
            "svc",
        ),
        (
            {"Timestamp": str(int((NOW - 60) * 1e9)), "SeverityNumber": 13, "Body": "m"},
            "WARN",
            "m",
            "",
        ),
        # logback level_value alone
        ({"@timestamp": iso(60), "level_value": 40000, "message": "m"}, "ERROR", "m", ""),
        # Monolog's JsonFormatter (Laravel, Symfony): `datetime`, a number and its name;
        # before: no time read (no record), and with `time` mapped every record FATAL
        (
            {
                "message": "m",
                "context": {"order": "o-1"},
                "level": 400,
                "level_name": "ERROR",
                "channel": "app",
                "datetime": iso(60),
                "extra": {},
            },
            "ERROR",
            "m",
            "",
        ),
        ({"message": "m", "level": 200, "datetime": iso(60)}, "INFO", "m", ""),
        ({"message": "m", "level": 250, "datetime": iso(60)}, "INFO", "m", ""),
        ({"message": "m", "level": 300, "datetime": iso(60)}, "WARN", "m", ""),
        ({"message": "m", "level": 550, "datetime": iso(60)}, "FATAL", "m", ""),
        # Nextcloud's and ownCloud's `nextcloud.log`: 0 DEBUG .. 3 ERROR, 4 FATAL; before
        # every record was TRACE and `level:ERROR` found none
        (
            {
                "reqId": "twvbRFk1OwgHo2bqggnx",
                "level": 3,
                "time": iso(60),
                "remoteAddr": "10.0.0.1",
                "user": "admin",
                "app": "files",
                "method": "GET",
                "url": "/",
                "message": "m",
                "userAgent": "--",
                "version": "29.1.1.0",
            },
            "ERROR",
            "m",
            "files",
        ),
        ({"reqId": "r", "level": 1, "time": iso(60), "message": "m"}, "INFO", "m", ""),
        # Serilog's compact JSON (CLEF, .NET): `@t`, `@l` (absent: Information), the
        # rendered `@m` or the template `@mt`; before, no time read (an EXECUTION error)
        (
            {"@t": iso(60), "@mt": "Order {OrderId} failed", "@l": "Error", "OrderId": 42},
            "ERROR",
            "Order {OrderId} failed",
            "",
        ),
        ({"@t": iso(60), "@m": "Started", "@mt": "Started"}, "INFO", "Started", ""),
        # log4j2's JsonLayout: `instant` in epoch seconds and nanoseconds; before, no time
        # read, every line "not in the format" (an EXECUTION error)
        (
            {
                "instant": {"epochSecond": int(NOW - 60), "nanoOfSecond": 484000000},
                "thread": "main",
                "level": "WARN",
                "loggerName": "com.shop.Orders",
                "message": "m",
                "endOfBatch": False,
                "loggerFqcn": "org.apache.logging.log4j.spi.AbstractLogger",
            },
            "WARN",
            "m",
            "",
        ),
    ],
)
def test_json_field_names_of_common_producers(
    tmp_path: Path, line: dict[str, object], level: str, message: str, service: str
) -> None:
    (tmp_path / "a.jsonl").write_text(json.dumps(line) + "\n")
    found = search(file_source(tmp_path, "jsonl", ["a.jsonl"], now=NOW), "")
    assert found.match_count == 1
    record = found.records[0]
    assert (record.level, record.message, record.service) == (level, message, service)
    assert record.timestamp.startswith(
        datetime.fromtimestamp(NOW - 61, UTC).strftime("%Y-%m-%dT%H:%M")
    )


def test_configured_field_map_and_zone(tmp_path: Path) -> None:
    # a naive local time in +08:00, the message under a custom key
    local = datetime.fromtimestamp(NOW - 120, UTC).astimezone(datetime.now(UTC).astimezone().tzinfo)
    naive = (datetime.fromtimestamp(NOW - 120, UTC) + timedelta(hours=8)).strftime(
        "%Y-%m-%d %H:%M:%S,%f"
    )[:-3]
    (tmp_path / "a.jsonl").write_text(
        json.dumps({"when": naive, "sev": "err", "text": "boom", "svc": "s", "order": "o-1"}) + "\n"
    )
    extra = 'timezone = "+08:00"\n[topics.APPLICATION.fields]\ntime = "when"\nlevel = "sev"\nmessage = "text"\nservice = "svc"\norder_id = "order"\n'
    source = file_source(tmp_path, "jsonl", ["a.jsonl"], now=NOW, extra=extra)
    found = search(source, "order_id:o-1 level:ERROR", lookback=5)
    assert found.match_count == 1 and local is not None
    assert found.records[0].timestamp.endswith("+08:00")
    assert parse_time(naive, source.zone) == int((NOW - 120) * 1000)


def test_logfmt(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text(
        f'ts={iso(30)} level=error msg="upstream timed out" service=api duration_ms=1200\n'
        f"ts={iso(20)} level=info msg=ok service=api duration_ms=12\n"
    )
    source = file_source(
        tmp_path,
        "logfmt",
        ["a.log"],
        now=NOW,
        extra='[topics.APPLICATION.fields]\nduration_ms = "duration_ms"\n',
    )
    found = search(source, "duration_ms:>1000")
    assert found.match_count == 1 and found.records[0].message == "upstream timed out"


def test_cri_partial_lines_are_joined(tmp_path: Path) -> None:
    pod = tmp_path / "pods" / "shop_order-7d9f_0d1e" / "order"
    pod.mkdir(parents=True)
    stamp = datetime.fromtimestamp(NOW - 30, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z"
    (pod / "0.log").write_text(
        f"{stamp} stderr P java.lang.OutOfMemoryError: Java heap\n"
        f"{stamp} stderr F  space at Cache.grow\n"
        f'{stamp} stdout F {{"level":"info","msg":"started","ts":{NOW - 29}}}\n'
    )
    source = file_source(tmp_path, "cri", ["pods/shop_order-7d9f_0d1e/order/*.log"], now=NOW)
    found = search(source, '"Java heap space"')
    assert found.match_count == 1
    # the kubelet's names of the pod (not the file's location) become fields
    names = {"stream": "stderr", "namespace": "shop", "pod": "order-7d9f", "container": "order"}
    assert found.records[0].fields == names and found.records[0].service == "order"
    inner = search(source, "stream:stdout level:INFO namespace:shop pod:order-7d9f")
    assert inner.match_count == 1 and inner.records[0].message == "started"


@pytest.mark.skipif(shutil.which("logger") is None, reason="util-linux logger not installed")
def test_syslog_lines_written_by_logger(tmp_path: Path) -> None:
    lines = []  # util-linux's logger (RFC 5424 with its structured data, and RFC 3164)
    for flag, prio, text in (
        ("--rfc5424", "user.err", "payment declined"),
        ("--rfc3164", "daemon.warning", "disk almost full"),
    ):
        done = subprocess.run(
            ["logger", "--no-act", "--stderr", "--socket-errors=off", flag, "-t", "shopd", "-p", prio, text],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        lines.append(done.stderr.strip())
    (tmp_path / "syslog").write_text("\n".join(lines) + "\n")
    source = file_source(
        tmp_path, "syslog", ["syslog"], now=time.time() + 5, topic=Topic.SYSTEM_EVENTS
    )
    err = search(source, "level:ERROR declined")
    assert err.match_count == 1 and err.records[0].service == "shopd"
    # logger's `[timeQuality tzKnown="1" ...]` is kept: before, structured data was dropped
    assert "tzKnown" in str(err.records[0].fields.get("structured_data"))
    warn = search(source, "level:WARN app:shopd")
    assert warn.match_count == 1 and warn.records[0].message == "disk almost full"


def test_mariadb_slow_log_entries(tmp_path: Path) -> None:
    write_file_scenario(tmp_path, NOW)
    source = file_source(
        tmp_path, "mysql_slow", ["mysql/slow.log"], now=NOW, topic=Topic.DATABASE_SLOW_QUERY
    )
    slow = search(source, "duration_ms:>2000 table:orders")
    assert slow.match_count == 4
    fields = slow.records[-1].fields
    assert (
        fields["sql_template"]
        == "SELECT * FROM orders WHERE customer_id = ? AND status = ? FOR UPDATE"
    )
    assert fields["rows_examined"] == 120000 and fields["db_user"] == "shop"
    assert isinstance(fields["lock_time_ms"], float) and fields["lock_time_ms"] > 1000
    # the server's banner (version, port, socket) is never a record
    assert all("socket" not in r.message.lower() for r in search(source, "", lookback=120).records)


def test_sql_template_masks_literals() -> None:
    assert sql_template("SELECT * FROM t WHERE a IN (1, 2, 3) AND b = 'x''y' AND c = -4.5;") == (
        "SELECT * FROM t WHERE a IN (?+) AND b = ? AND c = ?"
    )


def test_levels_normalised() -> None:
    assert [level_of(v) for v in ("warning", "err", "CRITICAL", 30, 50, 60)] == [
        "WARN", "ERROR", "FATAL", "INFO", "ERROR", "FATAL",
    ]  # fmt: skip
    assert level_of(9, "SeverityNumber") == "INFO"


def test_a_large_file_is_read_from_its_newest_end(tmp_path: Path) -> None:
    with (tmp_path / "big.jsonl").open("w") as out:
        for i in range(20_000):
            out.write(
                json.dumps({"ts": NOW - 3000 + i * 0.1, "level": "info", "msg": f"line {i}"}) + "\n"
            )
    source = file_source(
        tmp_path, "jsonl", ["big.jsonl"], now=NOW, top="[scan]\nmax_bytes = 100000\n"
    )
    found = search(source, "")
    assert found.match_count_lower_bound and 0 < found.match_count < 20_000
    assert found.records[-1].message == "line 19999"  # the newest records were read
    assert project(found).truncated


def test_gzip_archives_are_read(tmp_path: Path) -> None:
    with gzip.open(tmp_path / "a.jsonl.1.gz", "wt") as out:
        out.write(json.dumps({"ts": NOW - 10, "level": "error", "msg": "from the archive"}) + "\n")
    logging.getLogger(__name__).debug("archive written")
    found = search(file_source(tmp_path, "jsonl", ["a.jsonl*"], now=NOW), "archive")
    assert found.match_count == 1


def test_serilog_clef_exception_is_the_exception_field(tmp_path: Path) -> None:
    line = {
        "@t": iso(60),
        "@mt": "Payment for {OrderId} failed",
        "@l": "Error",
        "@x": "System.InvalidOperationException: gateway refused\n   at Shop.Pay() in Pay.cs:31",
        "OrderId": "o-1042",
    }
    (tmp_path / "app.clef").write_text(json.dumps(line) + "\n")
    source = file_source(tmp_path, "jsonl", ["app.clef"], now=NOW)
    (found,) = search(source, "exception:InvalidOperationException").records
    assert found.level == "ERROR" and found.fields["OrderId"] == "o-1042"


def test_a_slow_logs_use_names_the_schema_of_the_statements_after_it(tmp_path: Path) -> None:
    # MySQL writes `use db;` only when the database differs from the last one it logged (the
    # shape of a 5.0 server's log): before, only the first statement had `schema`, and
    # `schema:shop` counted 1 of 3. A statement's own `# Schema:` header wins.
    at = int(NOW) - 60
    (tmp_path / "slow.log").write_text(
        "# Time: 261129 00:00:00\n"
        "# User@Host: app[app] @ h1 [192.0.2.87]\n"
        "# Query_time: 30  Lock_time: 0  Rows_sent: 0  Rows_examined: 0\n"
        f"use shop;\nSET timestamp={at};\nUPDATE orders SET s = 1;\n"
        "# User@Host: app[app] @ h2 [192.0.2.80]\n"
        "# Query_time: 29  Lock_time: 0  Rows_sent: 0  Rows_examined: 0\n"
        f"SET timestamp={at};\nUPDATE orders SET s = 2;\n"
        "# User@Host: app[app] @ h3 [192.0.2.81]\n"
        "# Schema: billing  Last_errno: 0  Killed: 0\n"
        "# Query_time: 29  Lock_time: 0  Rows_sent: 0  Rows_examined: 0\n"
        f"SET timestamp={at};\nUPDATE invoices SET s = 3;\n"
        "# User@Host: app[app] @ h4 [192.0.2.82]\n"
        "# Query_time: 28  Lock_time: 0  Rows_sent: 0  Rows_examined: 0\n"
        f"SET timestamp={at};\nUPDATE orders SET s = 4;\n"
    )
    os.utime(tmp_path / "slow.log", (NOW - 60, NOW - 60))
    source = file_source(
        tmp_path, "mysql_slow", ["slow.log"], now=NOW, topic=Topic.DATABASE_SLOW_QUERY
    )
    found = search(source, "", lookback=1440).records
    assert sorted(str(r.fields.get("schema")) + r.message[-3:] for r in found) == [
        "billing 3;", "shop 1;", "shop 2;", "shop 4;",
    ]  # fmt: skip


def test_rfc5424_lines_a_file_writes_without_their_pri_and_version(tmp_path: Path) -> None:
    # VMware's (ESXi, NSX, vCenter) and rsyslog's RSYSLOG_SyslogProtocol23Format file lines
    # without `<PRI>1 ` (the shape): TIMESTAMP HOST APP PROCID MSGID SD MSG. Before, read as
    # a tag-less line: the app, pid and structured data stayed in the message, no service,
    # `app:NSX` unknown to every record.
    (tmp_path / "syslog").write_text(
        f'{iso(120)} edge01.example NSX 3106 - [nsx@6876 comp="nsx-edge" level="INFO"] '
        "keep-alive check received\n"
        f"{iso(60)} edge01.example CRON 20856 - -  (root) CMD (/usr/bin/monitor.py)\n"
    )
    source = file_source(tmp_path, "syslog", ["syslog"], now=NOW, topic=Topic.SYSTEM_EVENTS)
    (nsx,) = search(source, "app:NSX").records
    assert nsx.service == "NSX" and nsx.fields["pid"] == "3106"
    assert nsx.message == "keep-alive check received"
    # its structured data is kept, searchable (before, a true RFC 5424 line's was dropped)
    assert nsx.fields["structured_data"] == '[nsx@6876 comp="nsx-edge" level="INFO"]'
    assert search(source, "nsx-edge").match_count == 1
    (cron,) = search(source, "app:CRON").records
    assert cron.message == " (root) CMD (/usr/bin/monitor.py)" and cron.fields["pid"] == "20856"


def test_a_tagged_iso_syslog_line_is_not_read_as_bare_rfc5424(tmp_path: Path) -> None:
    (tmp_path / "syslog").write_text(f"{iso(60)} web01 nginx: GET / - 200\n")
    source = file_source(tmp_path, "syslog", ["syslog"], now=NOW, topic=Topic.SYSTEM_EVENTS)
    (line,) = search(source, "").records
    assert (line.service, line.message) == ("nginx", "GET / - 200")


@pytest.mark.parametrize(
    "key",
    [
        "TraceId",  # OpenTelemetry's log record as JSON (the collector's file exporter, SDK bridges)
        "traceId",  # OTLP/JSON's camelCase
        "traceID",  # zap/Jaeger's
        "@tr",  # Serilog's compact JSON (CLEF)
        "dd.trace_id",  # Datadog's log injection
    ],
)
def test_a_records_trace_id_under_its_producers_key_is_the_trace_id_field(
    tmp_path: Path, key: str
) -> None:
    # Before: `trace_id:<id>` answered NO_EVIDENCE over the very record (the id stood under
    # its producer's key), where the CLICKHOUSE backend finds it in the OTel TraceId column.
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    line = {"@t" if key == "@tr" else "timestamp": iso(60), "message": "charge failed", key: trace}
    (tmp_path / "app.jsonl").write_text(json.dumps(line) + "\n")
    source = file_source(tmp_path, "jsonl", ["app.jsonl"], now=NOW)
    (found,) = search(source, f"trace_id:{trace}").records
    assert found.fields["trace_id"] == trace and found.message == "charge failed"
    # an app's own trace_id wins; the producer's key then stays as it is
    both = {"timestamp": iso(60), "message": "m", "trace_id": "own", key: trace}
    (tmp_path / "app.jsonl").write_text(json.dumps(both) + "\n")
    (kept,) = search(source, "trace_id:own").records
    assert kept.fields["trace_id"] == "own"
