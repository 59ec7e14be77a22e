"""Benchmark of `query_logs` per backend.

- mock: world build time, then the median time to answer a query over a 60-minute window of
  the busiest scenario (goal <= 20 ms), and over 1440 minutes;
- file: 1M JSON-lines records over 60 minutes: MB/s scanned per query shape, what the scan
  budget (bytes, seconds) does, and a 100 MB line;
- clickhouse: the same 1M records in an `otel_logs` table on the in-process engine (chDB):
  ms for a 60-minute query (LIMIT n+1 plus an exact count());
- masking: what masking secrets costs per record (`records.masked`, every record a scan
  parses): the file's records (no candidate: the prefilter's cost), and records that each hold
  a candidate (a secret, or a name that only looks like one).

Run: `.venv/bin/python bench/logs_bench.py [--backend mock|file|clickhouse|masking|all]
[--records N]`
from the repository root.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from contracts import DEFAULT_BOUNDS, QueryLogsRequest, Topic, project_logs
from workers.sources.logs.config import parse_logs_config
from workers.sources.logs.deadline import StopFlag
from workers.sources.logs.file_source import FileLogSource
from workers.sources.logs.mocklog import SCENARIOS, index_of
from workers.sources.logs.source import (
    MockLogSettings,
    MockLogSource,
    check_fields,
    parse_log_query,
)

QUERIES = (
    (Topic.APPLICATION, ""),
    (Topic.APPLICATION, "timeout"),
    (Topic.APPLICATION, "level:ERROR"),
    (Topic.APPLICATION, '"connection not available" -level:INFO'),
    (Topic.APPLICATION, "http_status:>=500 service:order-service"),
    (Topic.APPLICATION, "GET -health"),
    (Topic.SYSTEM_EVENTS, ""),
    (Topic.SYSTEM_EVENTS, "reason:OOMKilled"),
    (Topic.DATABASE_SLOW_QUERY, "duration_ms:>2000"),
)
REAL_QUERIES = (
    '"timed out"',
    '"not available" -level:INFO',
    "level:ERROR http_status:503",
    "-health",
)
ROUNDS = 30
NOW = 1_796_000_000.0


def _answer(source: MockLogSource, request: QueryLogsRequest) -> float:
    started = time.perf_counter()
    query = parse_log_query(request.query)
    check_fields(query, request.topic)
    project_logs("bench", source.search(request, query), DEFAULT_BOUNDS)
    return (time.perf_counter() - started) * 1000


def _median(source: MockLogSource, lookback: int) -> tuple[float, float]:
    times = [
        _answer(source, QueryLogsRequest(topic=topic, query=q, lookback_minutes=lookback))
        for _ in range(ROUNDS)
        for topic, q in QUERIES
    ]
    return statistics.median(times), max(times)


def bench_mock() -> None:
    """Print build times, window sizes and median query times of the MOCK source."""
    sizes: dict[str, int] = {}
    for name in SCENARIOS:
        started = time.perf_counter()
        index = index_of(name)
        built = time.perf_counter() - started
        now = index.world.now_ms
        sizes[name] = sum(len(t.window(now - 3_600_000, now)) for t in index.topics.values())
        total = sum(len(t.records) for t in index.topics.values())
        print(f"mock build {name}: {built:.2f} s, {total} records in 24 h, {sizes[name]} in 60 min")
    busiest = max(sizes, key=lambda n: sizes[n])
    source = MockLogSource(MockLogSettings(scenario=busiest))
    for lookback in (60, 1440):
        median, worst = _median(source, lookback)
        print(
            f"mock query {busiest} over {lookback} min: median {median:.2f} ms, max {worst:.2f} ms "
            f"({ROUNDS * len(QUERIES)} queries, parse + match + mine lookup + project)"
        )


def _record(i: int, n: int) -> dict[str, Any]:
    epoch = NOW - 3600 + 3600 * i / n
    if i % 50 == 0:
        return {"ts": epoch, "level": "error", "msg": "HikariPool-1 - Connection is not "
                "available, request timed out after 30000ms", "service": "order-service",
                "http_status": 503, "exception": "SQLTransientConnectionException"}  # fmt: skip
    if i % 7 == 0:
        return {"ts": epoch, "level": "info", "msg": "GET /health 200", "service": "gateway",
                "http_status": 200}  # fmt: skip
    return {"ts": epoch, "level": "info", "msg": f"GET /api/orders/{i} 200 in {i % 90}ms",
            "service": "order-service", "http_status": 200, "cost_ms": i % 90}  # fmt: skip


def _file_source(root: Path, glob: str, scan: str = "") -> FileLogSource:
    config = parse_logs_config(
        f'roots = ["{root}"]\n[scan]\n{scan}\n[topics.APPLICATION]\nbackend = "file"\n'
        f'format = "jsonl"\npaths = ["{root}/{glob}"]\n'
    )
    entry: Any = config.topics[Topic.APPLICATION]
    return FileLogSource(Topic.APPLICATION, entry, config, clock=lambda: NOW)


def _scan(source: FileLogSource, text: str) -> tuple[float, Any]:
    request = QueryLogsRequest(topic=Topic.APPLICATION, query=text, lookback_minutes=60)
    query = parse_log_query(text)
    started = time.perf_counter()
    try:
        found: Any = source.search(request, query, StopFlag(600))
    except Exception as exc:  # a budget stop with nothing found is an error: report it
        found = exc
    return time.perf_counter() - started, found


def bench_file(records: int, long_line_mb: int) -> None:
    """Print scan rates of the FILE backend, the scan budget's effect and a long line."""
    root = Path(tempfile.mkdtemp(prefix="aci-logs-bench-"))
    path = root / "app.jsonl"
    with path.open("w") as out:
        for i in range(records):
            out.write(json.dumps(_record(i, records)) + "\n")
    mb = path.stat().st_size / 1e6
    print(f"file: {records} records, {mb:.0f} MB of JSON lines over 60 min")
    source = _file_source(root, "app.jsonl", "max_bytes = 10000000000\nmax_seconds = 600\n")
    for text in REAL_QUERIES:
        seconds, found = _scan(source, text)
        print(
            f"file query {text!r}: {seconds * 1000:.0f} ms, {mb / seconds:.1f} MB/s, "
            f"{found.match_count} matches"
        )
    for scan in ("max_bytes = 16000000\nmax_seconds = 600\n", "max_seconds = 0.5\n"):
        seconds, found = _scan(_file_source(root, "app.jsonl", scan), "level:ERROR")
        label = scan.replace("\n", " ").strip()
        if isinstance(found, Exception):
            print(f"file budget [{label}]: {seconds * 1000:.0f} ms, error {found}")
        else:
            print(
                f"file budget [{label}]: {seconds * 1000:.0f} ms, {found.match_count} matches, "
                f"lower bound {found.match_count_lower_bound} (full count {records // 50})"
            )
    long = root / "long.jsonl"
    with long.open("w") as out:
        out.write(json.dumps(_record(1, 2)) + "\n")
        out.write('{"ts": %f, "msg": "' % (NOW - 10) + "x" * (long_line_mb * 1_000_000) + '"}\n')
        out.write(json.dumps(_record(2, 2)) + "\n")
    seconds, found = _scan(_file_source(root, "long.jsonl", "max_bytes = 1000000000\n"), "")
    print(
        f"file {long_line_mb} MB line: {seconds * 1000:.0f} ms, {found.match_count} records around "
        f"it, lower bound {found.match_count_lower_bound}"
    )


def bench_clickhouse(records: int) -> None:
    """Print the latency of 60-minute queries over an otel_logs table on chDB."""
    import clickhouse_connect

    from workers.sources.logs.clickhouse import OTEL_LOGS_DDL, ClickhouseLogSource

    folder = tempfile.mkdtemp(prefix="aci-chdb-bench-")
    client = clickhouse_connect.get_client(dsn=f"chdb://{folder}")
    client.command(OTEL_LOGS_DDL.format(table="otel_logs"))
    started = time.perf_counter()
    end_ms = int(NOW * 1000)
    client.command(
        "INSERT INTO otel_logs (Timestamp, SeverityText, ServiceName, Body, LogAttributes) "
        f"SELECT fromUnixTimestamp64Milli(toInt64({end_ms} - intDiv(number * 3600000, {records}))),"
        " if(number % 50 = 0, 'ERROR', 'INFO'),"
        " if(number % 7 = 0, 'gateway', 'order-service'),"
        " multiIf(number % 50 = 0, 'HikariPool-1 - Connection is not available, request timed "
        "out after 30000ms', number % 7 = 0, 'GET /health 200', concat('GET /api/orders/', "
        "toString(number), ' 200 in ', toString(number % 90), 'ms')),"
        " map('http_status', if(number % 50 = 0, '503', '200'), 'cost_ms', toString(number % 90))"
        f" FROM numbers({records})"
    )
    print(f"clickhouse: {records} rows loaded in {time.perf_counter() - started:.1f} s (chDB)")
    config = parse_logs_config(
        '[clickhouse]\ndsn = "chdb://memory"\n[topics.APPLICATION]\nbackend = "clickhouse"\n'
        'table = "otel_logs"\nrow_limit = 100\n'
    )
    entry: Any = config.topics[Topic.APPLICATION]
    assert config.clickhouse is not None
    source = ClickhouseLogSource(
        config.clickhouse, {Topic.APPLICATION: entry}, config, {}, client=client, clock=lambda: NOW
    )
    for text in REAL_QUERIES:
        request = QueryLogsRequest(topic=Topic.APPLICATION, query=text, lookback_minutes=60)
        query = parse_log_query(text)
        times = []
        for _ in range(5):
            began = time.perf_counter()
            found = source.search(request, query, 30.0)
            times.append((time.perf_counter() - began) * 1000)
        print(
            f"clickhouse query {text!r}: median {statistics.median(times):.0f} ms "
            f"(LIMIT 101 + count(), 5 runs), {found.match_count} matches"
        )
    client.close()


def _log4j_lines(records: int) -> Any:
    """log4j `%d{ISO8601} %-5p [%t] %c - %m%n` lines over 60 min; a stack trace every 200th."""
    for i in range(records):
        moment = datetime.fromtimestamp(NOW - 3600 + 3600 * i / records, UTC)
        stamp = moment.strftime("%Y-%m-%dT%H:%M:%S,") + f"{moment.microsecond // 1000:03d}"
        if i % 200 == 0:
            yield (
                f"{stamp} ERROR [http-nio-8080-exec-{i % 9}] com.shop.order.OrderService - "
                f"Payment failed for order o-{i}\njava.lang.IllegalStateException: charge failed\n"
                "\tat com.shop.order.OrderService.pay(OrderService.java:31)\n"
                "Caused by: java.io.IOException: connection reset by peer\n\t... 2 more\n"
            )
        else:
            yield (
                f"{stamp} INFO  [http-nio-8080-exec-{i % 9}] com.shop.web.Access - "
                f"GET /api/orders/{i} 200 in {i % 90}ms\n"
            )


TEXT_QUERIES = ('"Payment failed"', "level:ERROR", "exception:IllegalStateException", "-health")


def bench_text(records: int) -> None:
    """Print scan rates of a named text format (log4j, multi-line records)."""
    root = Path(tempfile.mkdtemp(prefix="aci-logs-bench-"))
    path = root / "app.log"
    with path.open("w") as out:
        out.writelines(_log4j_lines(records))
    mb = path.stat().st_size / 1e6
    print(f"text: {records} log4j records, {mb:.0f} MB over 60 min")
    config = parse_logs_config(
        f'roots = ["{root}"]\n[scan]\nmax_bytes = 10000000000\nmax_seconds = 600\n'
        f'[topics.APPLICATION]\nbackend = "file"\nformat = "log4j"\npaths = ["{root}/app.log"]\n'
    )
    entry: Any = config.topics[Topic.APPLICATION]
    source = FileLogSource(Topic.APPLICATION, entry, config, clock=lambda: NOW)
    for text in TEXT_QUERIES:
        seconds, found = _scan(source, text)
        print(
            f"text query {text!r}: {seconds * 1000:.0f} ms, {mb / seconds:.1f} MB/s, "
            f"{found.match_count} matches"
        )


def bench_memory(gigabytes: float) -> None:
    """Peak resident memory of one FILE call over a file of `gigabytes` (a child process, so
    the figure is the call's own): JSON lines each with a request body of 300 keys logged as
    an object (issue 31's attack: 602 MiB for 60 MiB read) and a message of its own (so the
    call keeps the most records: the first and last of 2,000 templates), an empty query."""
    import subprocess

    root = Path(tempfile.mkdtemp(prefix="aci-logs-bench-"))
    path = root / "big.jsonl"
    extra = {"body": {f"attr_{k}": "v" * 20 for k in range(300)}}
    with path.open("w") as out:
        i = 0
        while out.tell() < gigabytes * 1e9:
            # a word per record that no mask removes: up to MAX_TEMPLATES templates kept
            word = "".join(chr(97 + int(d)) for d in str(i))
            record = {**_record(i, 1_000_000), **extra, "msg": f"request for tenant {word}"}
            out.write(json.dumps(record) + "\n")
            i += 1
    size = path.stat().st_size / 1e6
    code = (
        "import resource, sys, time; sys.argv = ['x']; from pathlib import Path; "
        "import bench.logs_bench as b; "
        f"s = b._file_source(Path({str(root)!r}), 'big.jsonl', "
        "'max_bytes = 10000000000\\nmax_seconds = 600\\n'); t, f = b._scan(s, ''); "
        "print(f'{t:.1f} {f.match_count} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss} "
        '{len(bytes(__import__("msgspec").json.encode(f)))}\')'
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seconds, matches, rss_kb, upstream = done.stdout.split()
    print(
        f"memory: one call over {size:.0f} MB ({i} records, a 300-key body, distinct messages): "
        f"{float(seconds):.1f} s, {matches} matches, peak RSS {int(rss_kb) / 1024:.0f} MiB, "
        f"upstream answer {int(upstream) / 1024:.0f} KiB"
    )
    path.unlink()


_CANDIDATES = (
    "login for bob with password=S3cret-{i} from 10.0.0.{j}",
    "GET /api/v1/items?id={i} Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.{i}.sig",
    "cache miss key=user:{i} ttl=300 token_count={j}",
    "connecting to postgres://app:pw{i}@db-{j}:5432/orders",
)


def bench_masking(records: int) -> None:
    """Print the cost of masking per record, over records without and with candidates."""
    from workers.sources.logs.formats import make_parser
    from workers.sources.logs.records import masked

    parser = make_parser("jsonl", {}, UTC, "", "auto", int(NOW * 1000))
    plain = [e for i in range(records) for e in parser.feed(json.dumps(_record(i, records)))]
    tricky = [
        e
        for i in range(records)
        for e in parser.feed(
            json.dumps({**_record(i, records), "msg": _CANDIDATES[i % 4].format(i=i, j=i % 97)})
        )
    ]
    for label, entries in (("no candidate", plain), ("a candidate each", tricky)):
        started = time.perf_counter()
        for entry in entries:
            masked(entry)
        seconds = time.perf_counter() - started
        print(
            f"masking, {label}: {seconds * 1e6 / len(entries):.2f} us a record, "
            f"{seconds * 1e6 / len(entries):.2f} s per 1M records"
        )


def main(argv: list[str] | None = None) -> None:
    """Run the chosen backends' benchmarks and print their figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--backend",
        choices=["mock", "file", "text", "memory", "clickhouse", "masking", "all"],
        default="all",
    )
    parser.add_argument("--memory-gb", type=float, default=1.0)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--long-line-mb", type=int, default=100)
    args = parser.parse_args(argv)
    if args.backend in ("mock", "all"):
        bench_mock()
    if args.backend in ("file", "all"):
        bench_file(args.records, args.long_line_mb)
    if args.backend in ("text", "all"):
        bench_text(args.records)
    if args.backend == "memory":  # a separate run: it writes a file of --memory-gb
        bench_memory(args.memory_gb)
    if args.backend in ("clickhouse", "all"):
        bench_clickhouse(args.records)
    if args.backend in ("masking", "all"):
        bench_masking(args.records)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
