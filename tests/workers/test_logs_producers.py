"""Logs of producers a new user has, beyond the named formats' own samples: what a program
writes beside its log when it dies (Go's `panic:` / `fatal error:` with their goroutine dump
and Java's uncaught `Exception in thread` are records of their own, timed by the record before
them; in Kubernetes and Docker container logs too), java.util.logging's two-line default,
epoch-second stamps (mosquitto), a pid before the time (nats-server), journald's and MongoDB's
JSON. Samples are byte-exact outputs of the producers (tests/workers/logs_samples/README.md)
where the producer runs here; MongoDB's lines follow its documented structure."""

from __future__ import annotations

import os
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
from logs_helpers import file_source, search

from contracts import LogsUpstream
from workers.sources.base import SourceError
from workers.sources.logs.formats import make_parser
from workers.sources.logs.records import entry_matches, masked
from workers.sources.logs.source import parse_log_query

SAMPLES = Path(__file__).parent / "logs_samples"
NOW = datetime(2026, 12, 4, 20, 0, tzinfo=UTC).timestamp()  # the samples were written at 19:4x


def read(
    tmp_path: Path,
    name: str,
    query: str = "",
    fmt: str = "plain",
    now: float = NOW,
    written: float | None = None,
) -> LogsUpstream:
    if not (tmp_path / name).exists():
        shutil.copy(SAMPLES / name, tmp_path / name)
    mtime = now - 60 if written is None else written  # when its producer last wrote it
    os.utime(tmp_path / name, (mtime, mtime))  # a file written by the test too
    return search(file_source(tmp_path, fmt, [name], now=now), query, lookback=1440)


PANICKED = datetime(2026, 12, 4, 19, 46, 37, 100000, tzinfo=UTC).timestamp()  # go_panic.log


def test_a_go_panic_is_one_fatal_record_timed_by_its_files_last_write(tmp_path: Path) -> None:
    every = read(tmp_path, "go_panic.log")
    assert every.match_count == 4 and not every.unparsed_lines  # 3 log lines and the panic
    (panic,) = read(tmp_path, "go_panic.log", "level:fatal", written=PANICKED).records
    assert panic.message.startswith("panic: runtime error: invalid memory address")
    assert (
        "goroutine 6 [running]:" in panic.message and "main.(*Server).handle(...)" in panic.message
    )
    assert panic.message.endswith("/srv/orderapi/main.go:22 +0x12a")
    assert panic.fields == {"exception": "panic"}
    assert panic.timestamp == "2026-12-04T19:46:37.100Z"  # its process's last write
    # the dump no longer sticks to the record before it
    (request,) = read(tmp_path, "go_panic.log", '"handling request"').records
    assert request.message == "handling request id=42" and request.level == ""
    assert read(tmp_path, "go_panic.log", '"nil pointer" level:error').match_count == 0
    assert read(tmp_path, "go_panic.log", "exception:panic").match_count == 1


def test_a_go_fatal_error_keeps_its_whole_goroutine_dump(tmp_path: Path) -> None:
    every = read(tmp_path, "go_fatal.log")
    assert every.match_count == 2 and not every.unparsed_lines
    (fatal,) = read(tmp_path, "go_fatal.log", '"concurrent map writes"').records
    assert fatal.level == "FATAL" and fatal.fields == {"exception": "fatal error"}
    lines = (SAMPLES / "go_fatal.log").read_text().splitlines()
    assert fatal.message.splitlines() == [line for line in lines[1:] if line.strip()]


def test_java_util_logging_default_and_an_uncaught_exception(tmp_path: Path) -> None:
    every = read(tmp_path, "jul_default.log")
    assert every.match_count == 4 and not every.unparsed_lines
    (slow,) = read(tmp_path, "jul_default.log", "level:warning").records
    assert slow.message == "payment gateway slow: 2300 ms for o-1042"
    assert slow.fields == {"source": "Main charge", "level_name": "WARNING"}
    assert slow.timestamp == "2026-12-04T19:48:09.000Z"
    exited = datetime(2026, 12, 4, 19, 48, 9, 400000, tzinfo=UTC).timestamp()
    (thrown,) = read(tmp_path, "jul_default.log", "level:error", written=exited).records
    assert thrown.message.startswith('Exception in thread "main" java.lang.IllegalStateException')
    assert "Caused by: java.io.IOException: connection reset by peer" in thrown.message
    assert thrown.fields == {"exception": "java.lang.IllegalStateException"}
    assert thrown.timestamp == "2026-12-04T19:48:09.400Z"  # the JVM's last write
    info = read(tmp_path, "jul_default.log", "level:info")
    assert sorted(r.message for r in info.records) == [
        "charging order o-1042",
        "order-service starting",
    ]


def test_mosquitto_epoch_seconds(tmp_path: Path) -> None:
    every = read(tmp_path, "mosquitto.log")
    assert every.match_count == 13 and not every.unparsed_lines
    refused = read(tmp_path, "mosquitto.log", '"not authorised"')
    assert refused.match_count == 2
    assert refused.records[0].timestamp == "2026-12-04T19:46:49.000Z"
    assert refused.records[0].message == "Client <unknown> disconnected, not authorised."


def test_a_number_that_only_starts_a_line_is_no_time(tmp_path: Path) -> None:
    (tmp_path / "app.log").write_text(
        "2026-12-04 19:00:00 INFO upload done\n"
        "1500000000 bytes sent\n"  # a count, not 2017-07-14
        "1796413608: mosquitto says hello\n"
    )
    found = read(tmp_path, "app.log")
    assert found.unparsed_lines == 1 and found.match_count == 2
    assert read(tmp_path, "app.log", "bytes").match_count == 1  # matched as text, not lost
    (hello,) = read(tmp_path, "app.log", "hello").records
    assert hello.timestamp == "2026-12-04T19:46:48.000Z"


def test_an_epoch_far_from_the_record_before_it_is_no_time(tmp_path: Path) -> None:
    # `1234567890: ` amid ISO-stamped records (a numbered list, an id and a colon) was a
    # record of 2009-02-13: outside any recent window, so `"order ids"` found nothing.
    (tmp_path / "app.log").write_text(
        "2026-12-04 19:40:00 INFO batch of order ids follows\n"
        "1234567890: o-1042\n"  # an id, 17 years before the record above
        "2026-12-04 19:41:00 INFO batch done\n"
        "1796413608: mosquitto says hello\n"  # 19:46:48: within a day of the record above
    )
    found = read(tmp_path, "app.log")
    assert found.match_count == 3 and found.unparsed_lines == 1
    (line,) = read(tmp_path, "app.log", "o-1042").records  # matched as text, in the window
    assert line.message == "1234567890: o-1042" and line.timestamp.startswith("2026-12-04T19:")
    (hello,) = read(tmp_path, "app.log", "hello").records
    assert hello.timestamp == "2026-12-04T19:46:48.000Z"
    # epoch after epoch is always a time (a quiet broker: days between its lines), and so is
    # the first record of a file
    parser = make_parser("plain", {}, UTC, "", "auto", int(NOW * 1000))
    lines = ["1000000000: first\n", "1796413608: years later\n", "2026-12-04 19:40:00 x\n"]
    entries = [e for line in lines for e in parser.feed(line)] + parser.flush()
    assert [e.epoch_ms for e in entries] == [
        1_000_000_000_000,
        1_796_413_608_000,
        1_796_413_200_000,
    ]
    assert parser.failed == 0


def test_a_crash_before_any_record_is_a_line_not_in_the_format(tmp_path: Path) -> None:
    (tmp_path / "crash.log").write_text(
        "panic: boom\n\ngoroutine 1 [running]:\nmain.main()\n\t/srv/app/main.go:5 +0x25\n"
    )
    found = read(tmp_path, "crash.log", "boom")
    assert found.unparsed_lines == 4 and found.match_count == 1  # no time to give it: text


@pytest.mark.parametrize(
    ("name", "fmt", "hours"),
    [
        ("go_panic.log", "plain", 0), ("go_fatal.log", "plain", 0), ("jul_default.log", "plain", 0),
        ("mosquitto.log", "plain", 0), ("nats-server.log", "plain", 0),
        ("logback_level_first.log", "log4j", 1), ("journald.json", "jsonl", 1),
        ("gunicorn.log", "plain", 1), ("celery.log", "plain", 1),
        ("python_logging.log", "plain", 1), ("ruby_logger.log", "plain", 16),
        ("ruby_logger_backtrace.log", "plain", 16),
        ("php_error.log", "plain", 16), ("php_error_zones.log", "plain", 16),
        ("php-fpm.log", "plain", 16), ("php-fpm_slow.log", "plain", 16),
        ("named.log", "plain", 16), ("cups_error_log", "plain", 16), ("exim_mainlog", "plain", 16),
        ("squid_access.log", "apache_access", 16), ("caddy.log", "jsonl", 16),
        ("caddy_access.log", "jsonl", 16),
    ],
)  # fmt: skip
def test_the_record_prefilter_never_hides_a_match(
    tmp_path: Path, name: str, fmt: str, hours: int
) -> None:
    now = NOW + 3600 * hours
    text = (SAMPLES / name).read_text()
    parser = make_parser(fmt, {}, UTC, "", "auto", int(now * 1000))
    records = [e for line in text.splitlines(True) for e in parser.feed(line)] + parser.flush()
    records = [masked(r) for r in records]  # as every backend matches them: Celery's `:**@`
    words = sorted({w for w in text.split() if '"' not in w and "\\" not in w})[:300]
    levels = ["level:fatal", "level:error", "level:warn", "level:info", "level:notice"]
    for query in [*words, *levels, "exception:panic", "level:error -level:warn"]:
        try:
            parsed = parse_log_query(query)
        except SourceError:
            continue  # refused forms (a glued comma, parentheses): nothing to compare
        if any(c.field not in (None, "level", "exception") for c in parsed.clauses):
            continue
        expected = sum(entry_matches(parsed, r) for r in records)
        assert read(tmp_path, name, query, fmt, now).match_count == expected, query


def test_nats_server_log_with_its_pid_first(tmp_path: Path) -> None:
    every = read(tmp_path, "nats-server.log")
    assert every.match_count == 22 and not every.unparsed_lines
    (parser,) = read(tmp_path, "nats-server.log", "level:ERR").records
    assert parser.message.startswith("127.0.0.1:48934 - cid:5 - Client parser ERROR")
    assert parser.fields == {"pid": "2986", "level_name": "ERR"}
    assert parser.timestamp == "2026-12-04T19:52:07.065Z"
    assert read(tmp_path, "nats-server.log", '"Server is ready" pid:2986').match_count == 1


def test_rabbitmq_log_one_record_per_event_its_erlang_pid_a_field(tmp_path: Path) -> None:
    # RabbitMQ 3.9+ writes each line of a multi-line event (its banner, an error report) with
    # the event's stamp, level and Erlang pid: one record each, not one per line (the report
    # was nine ERROR records of a line each: `reason: shutdown`, `{id,channel_sup},` ...).
    now = datetime(2026, 12, 5, 9, 0, tzinfo=UTC).timestamp()
    every = read(tmp_path, "rabbitmq.log", now=now)
    assert not every.unparsed_lines and all(r.level for r in every.records)
    assert every.match_count == 329 - 8 - 3 - 8  # the report's 8 more lines, the banners' 3 and 8
    (report,) = read(tmp_path, "rabbitmq.log", "level:error", now=now).records
    assert report.message.splitlines()[0] == "supervisor: {<0.705.0>,rabbit_channel_sup_sup}"
    assert report.message.splitlines()[-1] == "               {child_type,supervisor}]"
    assert report.fields == {"pid": "0.705.0"}
    assert report.timestamp == "2026-12-05T08:46:08.459Z"
    (banner,) = read(tmp_path, "rabbitmq.log", '"Starting RabbitMQ"', now=now).records
    assert "Licensed under the MPL 2.0" in banner.message and "home dir" not in banner.message
    assert read(tmp_path, "rabbitmq.log", '"home dir" "database dir"', now=now).match_count == 1
    connections = read(tmp_path, "rabbitmq.log", '"accepting AMQP connection"', now=now)
    assert connections.match_count == 4 and not any(
        "<0." in p.template for p in connections.patterns
    )
    assert read(tmp_path, "rabbitmq.log", "pid:0.705.0", now=now).match_count == 1


def test_a_go_panic_in_a_container_log_is_one_fatal_record(tmp_path: Path) -> None:
    # The kubelet's CRI file of a crashed Go container: JSON on stdout (zap), the panic and its
    # goroutine dump on stderr, a line of stdout in between (the streams interleave).
    dump = (SAMPLES / "go_panic.log").read_text().splitlines()[3:]
    lines = [("stdout", '{"level":"info","ts":1796413597.0,"msg":"handling request","id":42}')]
    lines += [("stderr", text) for text in dump[:5]] + [("stdout", '{"msg":"draining"}')]
    lines += [("stderr", text) for text in dump[5:]]
    lines += [("stderr", '{"level":"info","ts":1796413599.0,"msg":"restarted"}')]
    folder = tmp_path / "pods" / "shop_orders-7d9f_0a1b" / "orders"
    folder.mkdir(parents=True)
    (folder / "0.log").write_text(
        "".join(f"2026-12-04T19:46:37.{i:06d}123Z {s} F {t}\n" for i, (s, t) in enumerate(lines))
    )
    os.utime(folder / "0.log", (NOW - 60, NOW - 60))
    source = file_source(tmp_path, "cri", ["pods/shop_orders-7d9f_0a1b/orders/*.log"], now=NOW)
    every = search(source, "", lookback=1440)
    assert every.match_count == 4 and not every.unparsed_lines
    (panic,) = search(source, "level:fatal", lookback=1440).records
    assert panic.message.splitlines() == [t for t in dump if t.strip()]
    assert panic.fields == {
        "stream": "stderr", "exception": "panic", "namespace": "shop", "pod": "orders-7d9f",
        "container": "orders",
    }  # fmt: skip
    assert panic.timestamp == "2026-12-04T19:46:37.000Z"
    assert search(source, "draining", lookback=1440).match_count == 1


def test_docker_json_file_logs_with_a_go_panic_and_a_split_line(tmp_path: Path) -> None:
    # Docker's json-file driver: the app's zap JSON on stdout, a line longer than 16 KiB that
    # Docker split in two entries, then the panic and its goroutine dump on stderr.
    dump = (SAMPLES / "go_panic.log").read_text().splitlines(True)[3:]
    long = '{"level":"warn","ts":1796413597.5,"msg":"slow query","sql":"' + "x" * 20000 + '"}\n'
    logs = [("stdout", '{"level":"info","ts":1796413597.0,"msg":"handling request","id":42}\n')]
    logs += [("stdout", long[:16384]), ("stdout", long[16384:])]
    logs += [("stderr", text) for text in dump]
    cid = "4f" * 32
    folder = tmp_path / "containers" / cid
    folder.mkdir(parents=True)
    (folder / f"{cid}-json.log").write_text(
        "".join(
            msgspec.json.encode(
                {"log": text, "stream": stream, "time": f"2026-12-04T19:46:37.{i:06d}123Z"}
            ).decode()
            + "\n"
            for i, (stream, text) in enumerate(logs)
        )
        + "not json\n"
    )
    os.utime(folder / f"{cid}-json.log", (NOW - 60, NOW - 60))
    source = file_source(tmp_path, "docker", [f"containers/{cid}/*-json.log"], now=NOW)
    every = search(source, "", lookback=1440)
    assert every.match_count == 3 and every.unparsed_lines == 1
    (panic,) = search(source, "level:fatal", lookback=1440).records
    assert panic.message.splitlines() == [t.rstrip("\n") for t in dump if t.strip()]
    assert panic.fields == {"stream": "stderr", "exception": "panic", "container_id": cid[:12]}
    (slow,) = search(source, "level:warn", lookback=1440).records
    assert slow.message == "slow query" and slow.fields["sql"] == "x" * 20000
    assert slow.timestamp == "2026-12-04T19:46:37.500Z"  # the app's own time
    hit = search(source, f"container_id:{cid[:12]} handling", lookback=1440)
    assert hit.match_count == 1 and hit.records[0].fields["id"] == 42


def test_journald_export_read_as_jsonl(tmp_path: Path) -> None:
    # `journalctl -o json` of systemd-journald 252 (systemd-cat -t order-api / billing -p ...)
    later = NOW + 3600  # written at 20:02
    every = read(tmp_path, "journald.json", fmt="jsonl", now=later)
    assert every.match_count == 8 and not every.unparsed_lines
    (oom,) = read(tmp_path, "journald.json", "level:fatal", fmt="jsonl", now=later).records
    assert oom.message == "out of memory: killed worker 3" and oom.service == "order-api"
    assert oom.fields["level_name"] == "crit" and oom.fields["_COMM"] == "cat"
    assert oom.timestamp == "2026-12-04T20:02:29.072Z"
    assert "__CURSOR" not in oom.fields and "__MONOTONIC_TIMESTAMP" not in oom.fields
    pool = read(tmp_path, "journald.json", '"connection pool" level:err', fmt="jsonl", now=later)
    assert pool.match_count == 2
    assert read(tmp_path, "journald.json", "notice", fmt="jsonl", now=later).match_count == 2
    billing = read(tmp_path, "journald.json", "service:billing", fmt="jsonl", now=later)
    assert billing.match_count == 3


@pytest.mark.parametrize("fmt", ["plain", "cri"])
def test_a_hostile_line_in_a_goroutine_dump_is_read_in_linear_time(fmt: str) -> None:
    # a frame pattern whose class held `(` took 0.8 s for 16,000 `(` (quadratic: ~1 h a MiB)
    stamp = "2026-12-04T19:46:37.000000000Z stderr F " if fmt == "cri" else ""
    head = "2026/12/04 19:46:37 ok\n" if fmt == "plain" else ""
    parser = make_parser(fmt, {}, UTC, "", "auto", int(NOW * 1000))
    started = time.perf_counter()
    hostile = [f"{stamp}{x * 200_000}\n" for x in ("(", "a(*")]
    for line in [head, f"{stamp}panic: boom\n", *hostile]:
        if line:
            parser.feed(line)
    parser.flush()
    assert time.perf_counter() - started < 1.5


def test_mongodb_structured_log_lines(tmp_path: Path) -> None:
    # MongoDB 4.4+ (documented "Log Messages" structure: t.$date, s, c, id, ctx, msg, attr)
    (tmp_path / "mongod.log").write_text(
        '{"t":{"$date":"2026-12-04T19:46:37.027+00:00"},"s":"I",  "c":"NETWORK",  "id":22943,'
        '   "ctx":"listener","msg":"Connection accepted","attr":{"remote":"127.0.0.1:52314"}}\n'
        '{"t":{"$date":"2026-12-04T19:46:38.100+00:00"},"s":"W",  "c":"COMMAND",  "id":51803,'
        '   "ctx":"conn3","msg":"Slow query","attr":{"ns":"shop.orders","durationMillis":2300}}\n'
        '{"t":{"$date":"2026-12-04T19:46:39.000+00:00"},"s":"D2", "c":"REPL", "id":1,'
        ' "ctx":"conn3","msg":"heartbeat"}\n'
    )
    every = read(tmp_path, "mongod.log", fmt="jsonl")
    assert every.match_count == 3 and not every.unparsed_lines  # before: no line had a time
    (slow,) = read(tmp_path, "mongod.log", "level:warn", fmt="jsonl").records
    assert slow.message == "Slow query" and slow.timestamp == "2026-12-04T19:46:38.100Z"
    assert slow.fields["c"] == "COMMAND" and slow.fields["attr_durationMillis"] == 2300
    assert read(tmp_path, "mongod.log", "level:debug", fmt="jsonl").match_count == 1


def test_a_level_first_logback_layout_as_cassandra_writes(tmp_path: Path) -> None:
    # logback 1.2.11 with Cassandra's `%-5level [%thread] %date{ISO8601} %F:%L - %msg%n`
    later = NOW + 3600  # written at 20:14
    every = read(tmp_path, "logback_level_first.log", fmt="log4j", now=later)
    assert every.match_count == 4 and not every.unparsed_lines  # before: every line unparsed
    (failed,) = read(tmp_path, "logback_level_first.log", "level:error", "log4j", later).records
    assert failed.fields == {
        "thread": "CompactionExecutor:3",
        "logger": "CassandraDaemon.java:14",
        "exception": "java.lang.IllegalStateException",
    }
    assert failed.message.startswith("Exception in thread Thread[CompactionExecutor:3,5,main]\n")
    assert failed.timestamp == "2026-12-04T20:14:46.662Z"
    (up,) = read(tmp_path, "logback_level_first.log", "NORMAL", "log4j", later).records
    assert up.message == "Node /10.0.0.5:7000 state jump to NORMAL"


def test_gunicorn_error_log_with_its_zone_pid_and_tracebacks(tmp_path: Path) -> None:
    # gunicorn 27.0.1: `[2026-12-04 20:16:13 +0000] [7083] [ERROR] ...`, a traceback, a timeout
    later = NOW + 3600  # written at 20:16
    every = read(tmp_path, "gunicorn.log", now=later)
    assert every.match_count == 18 and not every.unparsed_lines
    timeout = read(tmp_path, "gunicorn.log", "level:fatal", now=later)
    assert [r.message for r in timeout.records] == ["WORKER TIMEOUT (pid:7084)"]
    errors = read(tmp_path, "gunicorn.log", "level:error", now=later).records
    assert {r.fields["exception"] for r in errors} == {"RuntimeError", "SystemExit"}
    boom = next(r for r in errors if r.fields["exception"] == "RuntimeError")
    assert boom.fields["pid"] == "7083" and boom.timestamp == "2026-12-04T20:16:13.000Z"
    assert boom.message.endswith("RuntimeError: charge failed for order o-1042")
    # the zone written is read: the topic's own zone does not move these times
    shifted = file_source(
        tmp_path, "plain", ["gunicorn.log"], now=later, extra='timezone = "+08:00"'
    )
    (again,) = search(shifted, '"WORKER TIMEOUT"', lookback=1440).records
    assert again.timestamp.startswith("2026-12-05T04:16:16.000")  # 20:16:16 UTC, shown in +08


def test_celery_worker_log(tmp_path: Path) -> None:
    # celery 5.7.0 worker, `--logfile`: `[2026-12-04 20:16:28,833: ERROR/ForkPoolWorker-1] ...`
    later = NOW + 3600
    every = read(tmp_path, "celery.log", now=later)
    assert every.match_count == 6 and not every.unparsed_lines
    (failed,) = read(tmp_path, "celery.log", "level:error", now=later).records
    assert failed.fields == {"process": "ForkPoolWorker-1", "exception": "ValueError"}
    assert failed.message.startswith("Task tasks.charge[76f13d8c")
    assert failed.message.endswith("ValueError: card declined for o-1042")
    assert read(tmp_path, "celery.log", "process:MainProcess", now=later).match_count == 4


def test_python_logging_cookbook_layout(tmp_path: Path) -> None:
    # CPython 3.11 logging, `%(asctime)s - %(name)s - %(levelname)s - %(message)s`
    later = NOW + 3600  # written at 20:20
    every = read(tmp_path, "python_logging.log", now=later)
    assert every.match_count == 4 and not every.unparsed_lines
    errors = read(tmp_path, "python_logging.log", "level:error", now=later).records
    assert sorted(r.fields["logger"] for r in errors) == ["shop.orders", "shop.stock"]
    charge = next(r for r in errors if r.fields["logger"] == "shop.orders")
    assert charge.message.startswith("charge failed for order o-1042\nTraceback")
    assert charge.fields["exception"] == "KeyError"
    assert read(tmp_path, "python_logging.log", "logger:shop.stock", now=later).match_count == 1


def test_a_level_line_after_a_head_that_is_not_java_util_logging_stays_its_own_line(
    tmp_path: Path,
) -> None:
    # Go's `log` has no level; a library's bare `WARNING: ...` on stderr after it was read as
    # java.util.logging's second line: the request's record became WARN "proxy ignored" and
    # its own text moved to a field `source`.
    (tmp_path / "app.log").write_text(
        "2026/12/04 19:46:37.027351 handling request id=42\nWARNING: proxy ignored: no_proxy set\n"
    )
    found = read(tmp_path, "app.log")
    (request,) = found.records
    assert request.message == "handling request id=42" and request.level == ""
    assert request.fields == {} and found.unparsed_lines == 1
    assert read(tmp_path, "app.log", "level:warn").match_count == 0
    assert read(tmp_path, "app.log", "proxy").match_count == 1  # matched as text, not lost


def test_a_go_stack_overflow_keeps_its_runtime_stack(tmp_path: Path) -> None:
    # Go 1.19's `fatal error: stack overflow`: its `runtime stack:` line was a line not in the
    # format (counted, matched as text apart from its crash). The two `runtime:` lines before
    # the `fatal error` were lines not in the format too: they start its record
    # (test_logs_go_runtime.py).
    every = read(tmp_path, "go_stack_overflow.log", now=NOW + 3600)
    assert every.match_count == 2 and not every.unparsed_lines
    (fatal,) = read(tmp_path, "go_stack_overflow.log", "level:fatal", now=NOW + 3600).records
    lines = (SAMPLES / "go_stack_overflow.log").read_text().splitlines()
    assert fatal.message.splitlines() == [line for line in lines[1:] if line.strip()]
    assert fatal.fields == {"exception": "fatal error"}


@pytest.mark.parametrize("fmt", ["plain", "cri"])
def test_a_goroutine_dump_past_the_joined_cap_is_lines_not_in_the_format(
    tmp_path: Path, fmt: str
) -> None:
    # A server's panic with 600 goroutines (1,800 lines of dump): the lines past the 1,000 a
    # record joins were dropped, counted nowhere: a query for the last goroutine's frame found
    # nothing (NO_EVIDENCE) though the file held it.
    dump = ["panic: boom", "", "goroutine 1 [running]:", "main.main()", "\t/srv/main.go:5 +0x25"]
    for n in range(2, 602):
        dump += ["", f"goroutine {n} [chan receive]:", f"main.worker{n}()", "\t/srv/w.go:9 +0x1"]
    stamp = "2026-12-04T19:46:37.000000000Z stderr F " if fmt == "cri" else ""
    head = "2026/12/04 19:46:37.027351 handling request id=42"
    lines = [head if fmt == "plain" else f"{stamp}{head}", *(f"{stamp}{t}" for t in dump)]
    (tmp_path / "app.log").write_text("".join(f"{line}\n" for line in lines))
    every = read(tmp_path, "app.log", fmt=fmt)
    (panic,) = read(tmp_path, "app.log", "level:fatal", fmt=fmt).records
    kept = len(panic.message.splitlines())
    past = sum(1 for t in dump if t.strip()) - kept
    assert past > 0 and every.match_count == 2 and every.unparsed_lines == past
    assert read(tmp_path, "app.log", "main.worker601", fmt=fmt).match_count == 1


def test_a_journald_message_exported_as_bytes_is_read_as_its_text(tmp_path: Path) -> None:
    # journalctl -o json writes a field holding an escape (a coloured line) as an array of its
    # bytes: the record's message was "[27,91,51,50,...]", so `"order placed"` found nothing
    # (and the prefilter skipped the line, whose raw text has no such words).
    later = NOW + 3600  # written at 20:22
    every = read(tmp_path, "journald_color.json", fmt="jsonl", now=later)
    assert every.match_count == 2 and not every.unparsed_lines
    (placed,) = read(
        tmp_path, "journald_color.json", '"order placed"', fmt="jsonl", now=later
    ).records
    # shown without its colour codes, as a coloured line of a text file is (they could hide
    # a secret's name from masking: `password\x1b[0m=...`)
    assert placed.message == "INFO order placed id=42"
    assert placed.service == "review-color" and placed.level == "INFO"
    assert read(tmp_path, "journald_color.json", "placed", fmt="jsonl", now=later).match_count == 1


def test_epoch_seconds_read_are_those_of_2001_to_2065_as_documented(tmp_path: Path) -> None:
    # docs/logs.md and stamps.py said 2001 to 2286; `[12]` and nine digits end in January 2065
    (tmp_path / "app.log").write_text(
        "1000000000: first\n2999999999: last\n3000000000: a count, not 2065\n"
    )
    parser = make_parser("plain", {}, UTC, "", "auto", int(NOW * 1000))
    text = (tmp_path / "app.log").read_text().splitlines(True)
    times = [e.epoch_ms for line in text for e in parser.feed(line)] + [
        e.epoch_ms for e in parser.flush()
    ]
    assert times == [1_000_000_000_000, 2_999_999_999_000] and parser.failed == 1
    docs = (Path(__file__).parents[2] / "docs" / "logs.md").read_text()
    assert "epoch seconds of 2001 to 2065" in " ".join(docs.split())


def test_a_quiet_services_crash_is_found_in_the_last_hour(tmp_path: Path) -> None:
    # Logged once at 09:00, panicked at 19:59 (the file's mtime): "did it panic in the last
    # hour?" answers nothing, the panic dated 09:00.
    (tmp_path / "app.log").write_text(
        "2026/12/04 09:00:00.000001 starting order-api on :8080\n"
        "panic: runtime error: index out of range [3] with length 3\n\n"
        "goroutine 1 [running]:\nmain.main()\n\t/srv/main.go:9 +0x1d\nexit status 2\n"
    )
    os.utime(tmp_path / "app.log", (NOW - 60, NOW - 60))
    found = search(file_source(tmp_path, "plain", ["app.log"], now=NOW), "level:fatal", 60)
    assert found.match_count == 1  # was 0: the panic dated 09:00, the record before it
    assert found.records[0].timestamp == "2026-12-04T19:59:00.000Z"


def test_a_crash_before_a_restart_is_timed_by_the_restart(tmp_path: Path) -> None:
    (tmp_path / "app.log").write_text(
        "2026/12/04 09:00:00.000001 starting order-api on :8080\n"
        "panic: runtime error: index out of range [3] with length 3\n\n"
        "goroutine 1 [running]:\nmain.main()\n\t/srv/main.go:9 +0x1d\n"
        "2026/12/04 19:30:02.000001 starting order-api on :8080\n"
    )
    os.utime(tmp_path / "app.log", (NOW - 60, NOW - 60))
    found = search(file_source(tmp_path, "plain", ["app.log"], now=NOW), "level:fatal", 60)
    assert [r.timestamp for r in found.records] == ["2026-12-04T19:30:02.000Z"]


def test_a_copied_file_s_crash_keeps_the_time_of_the_record_before_it(tmp_path: Path) -> None:
    # A post-mortem of yesterday's log copied today: its mtime is no time of the crash, which
    # is then dated by the record before it (a lower bound), inside the incident's window.
    (tmp_path / "app.log").write_text(
        "2026/12/03 03:00:00.000001 handling request id=42\n"
        "panic: runtime error: invalid memory address or nil pointer dereference\n"
    )
    os.utime(tmp_path / "app.log", (NOW - 60, NOW - 60))
    as_of = datetime(2026, 12, 3, 3, 30, tzinfo=UTC).timestamp()
    found = search(file_source(tmp_path, "plain", ["app.log"], now=as_of), "level:fatal", 60)
    assert [r.timestamp for r in found.records] == ["2026-12-03T03:00:00.000Z"]


def test_a_docker_rotation_compressed_by_the_daemon_keeps_its_container_id(tmp_path: Path) -> None:
    # `--log-opt compress=true` rotates to `<id>-json.log.1.gz`: its records had no
    # container_id, so `container_id:<id>` missed every record of the compressed rotations.
    import gzip

    cid = "4f" * 32
    folder = tmp_path / "containers" / cid
    folder.mkdir(parents=True)
    line = '{"log":"rotated away\\n","stream":"stdout","time":"2026-12-04T19:46:37.000000001Z"}\n'
    (folder / f"{cid}-json.log.1.gz").write_bytes(gzip.compress(line.encode()))
    os.utime(folder / f"{cid}-json.log.1.gz", (NOW - 60, NOW - 60))
    source = file_source(tmp_path, "docker", [f"containers/{cid}/*-json.log*"], now=NOW)
    found = search(source, f"container_id:{cid[:12]}", lookback=1440)
    assert found.match_count == 1 and found.records[0].message == "rotated away"


@pytest.mark.parametrize("fmt", ["cri", "docker"])
def test_an_empty_line_in_a_container_log_is_no_record(tmp_path: Path, fmt: str) -> None:
    # an app's blank line was a record with an empty message (an empty query counted it)
    lines = [("stdout", "starting"), ("stdout", ""), ("stderr", "   "), ("stdout", "ready")]
    if fmt == "cri":
        text = "".join(f"2026-12-04T19:46:3{i}.000000000Z {s} F {t}\n" for i, (s, t) in
                       enumerate(lines))  # fmt: skip
    else:
        text = "".join(
            msgspec.json.encode(
                {"log": t + "\n", "stream": s, "time": f"2026-12-04T19:46:3{i}.000000000Z"}
            ).decode()
            + "\n"
            for i, (s, t) in enumerate(lines)
        )
    (tmp_path / "c.log").write_text(text)
    os.utime(tmp_path / "c.log", (NOW - 60, NOW - 60))
    found = search(file_source(tmp_path, fmt, ["c.log"], now=NOW), "", lookback=1440)
    assert sorted(r.message for r in found.records) == ["ready", "starting"]
    assert not found.unparsed_lines


def test_epoch_records_days_after_a_record_stamped_another_way_are_records(
    tmp_path: Path,
) -> None:
    # A container's entrypoint stamps its banner in ISO, mosquitto its lines in epoch seconds:
    # restarted days later (or quiet for days), every line of its was a line not in the format
    # (more than a day after the banner), and the last hour had no record (0 of 3).
    (tmp_path / "app.log").write_text(
        "2026-12-01 10:00:00 INFO entrypoint: starting mosquitto\n"
        "1796413600: mosquitto version 2.0.18 starting\n"  # 19:46:40, 3 days later
        "1796413601: Opening ipv4 listen socket on port 1883.\n"
        "1796413608: New connection from 10.0.0.7 on port 1883.\n"
    )
    found = read(tmp_path, "app.log")
    assert found.match_count == 3 and not found.unparsed_lines
    # still no time: a number before the record it follows, by more than a day (an id)
    parser = make_parser("plain", {}, UTC, "", "auto", int(NOW * 1000))
    lines = ["2026-12-04 19:40:00 x\n", "1234567890: o-1042\n", "1999999999: o-1043\n"]
    entries = [e for line in lines for e in parser.feed(line)] + parser.flush()
    assert len(entries) == 1 and parser.failed == 2  # 2009, and 2033: after now by years
