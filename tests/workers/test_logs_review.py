"""Findings of the hostile review of the FILE and CLICKHOUSE backends, one test each: lines
that made a parser quadratic or crash it, caches that outlived a call, /proc through a
symlinked root, a wrong path answered NO_EVIDENCE, unbounded listings and answers."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from logs_helpers import chdb_client, file_source, search

from contracts import ErrorCode, QueryLogsRequest, Topic
from workers.sources import SourceError
from workers.sources.logs import files as files_module
from workers.sources.logs import formats, records
from workers.sources.logs.clickhouse import OTEL_LOGS_DDL, ClickhouseLogSource
from workers.sources.logs.config import (
    ClickhouseTopic,
    LogsConfigError,
    ScanBudget,
    load_logs_config,
    parse_logs_config,
)
from workers.sources.logs.deadline import StopFlag
from workers.sources.logs.formats import make_parser
from workers.sources.logs.slowlog import sql_template
from workers.sources.logs.source import parse_log_query

NOW = 1_796_000_000.0


def jline(message: str, **extra: Any) -> str:
    return json.dumps({"ts": NOW - 60, "level": "info", "msg": message, **extra}) + "\n"


def _elapsed(work: Any) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


# --- quadratic parsing on hostile lines (each was seconds to hours before) ---------------


@pytest.mark.serial
def test_a_logfmt_line_without_equals_is_parsed_in_linear_time() -> None:
    parser = make_parser("logfmt", {}, UTC, "", "auto", 0)
    # 60 kB took ~20 s (the key pattern re-scanned the rest from every position); 1 MiB, hours
    assert _elapsed(lambda: parser.feed("a" * 60_000)) < 1.5
    assert parser.failed == 1
    found = make_parser("logfmt", {}, UTC, "", "auto", 0).feed(
        f'time={NOW} level=warn msg="a \\"quoted\\" text" user_id=7\n'
    )
    assert found[0].message == 'a "quoted" text' and found[0].fields == {"user_id": "7"}


@pytest.mark.serial
def test_many_partial_cri_lines_are_joined_in_linear_time() -> None:
    parser = make_parser("cri", {}, UTC, "", "auto", 0)
    lines = ["2026-01-01T00:00:00Z stdout P x\n"] * 50_000
    # 50,000 one-byte parts took ~25 s (the parts were summed again on every line)
    assert _elapsed(lambda: [parser.feed(one) for one in lines]) < 2.0
    (entry,) = parser.feed("2026-01-01T00:00:00Z stdout F y\n")
    assert entry.message == "x" * 50_000 + "y"


@pytest.mark.serial
def test_an_unclosed_quote_in_a_slow_statement_is_masked_in_linear_time() -> None:
    hostile = "select '" + "\\'" * 32_000  # 64 kB, the statement cap: ~13 s before
    assert _elapsed(lambda: sql_template(hostile)) < 1.0
    assert sql_template(hostile) == "select ?"
    assert sql_template("select 'a''b', \"c\\\"d\" from t where x in (1, 2)") == (
        "select ?, ? from t where x in (?+)"
    )


# --- a hostile line crashed the whole call (every query of the topic INTERNAL) -----------


def test_a_huge_integer_time_or_deep_nesting_is_a_bad_line_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "app.jsonl").write_text(
        '{"ts": '
        + "9" * 400
        + ', "msg": "big"}\n'  # float() of it: OverflowError
        + '{"a":' * 5000
        + "1"
        + "}" * 5000
        + "\n"  # msgspec: RecursionError
        + jline("deep", a=json.loads('{"b":' * 900 + "1" + "}" * 900))
        + jline("still here", n=10**400)
    )
    found = search(file_source(tmp_path, "jsonl", ["*.jsonl"], now=NOW), "")
    assert sorted(r.message for r in found.records) == ["deep", "still here"]


def test_a_future_feb_29_in_a_yearless_syslog_line_is_a_bad_line_not_a_crash() -> None:
    january_2028 = int(datetime(2028, 1, 10, tzinfo=UTC).timestamp() * 1000)
    # (a syslog record is read when the line after it comes, or at the end: `flush`)
    parser = make_parser("syslog", {}, UTC, "", "auto", january_2028)
    assert parser.feed("<13>Feb 29 00:00:00 host app: x\n") + parser.flush() == []
    assert parser.failed == 1
    march_2025 = int(datetime(2025, 3, 1, tzinfo=UTC).timestamp() * 1000)
    parser = make_parser("syslog", {}, UTC, "", "auto", march_2025)
    (entry,) = parser.feed("<13>Feb 29 00:00:00 host app: last leap day\n") + parser.flush()
    assert entry.epoch_ms == int(datetime(2024, 2, 29, tzinfo=UTC).timestamp() * 1000)


# --- memory that outlived the call --------------------------------------------------------


def test_long_messages_and_keys_do_not_stay_in_the_caches() -> None:
    records._cached_template.cache_clear()
    formats._cached_name.cache_clear()
    for i in range(20):
        records._template(f"{i} " + "x" * 100_000)
        formats.field_name(f"k{i}." + "y" * 100_000)
    assert records._cached_template.cache_info().currsize == 0
    assert formats._cached_name.cache_info().currsize == 0
    assert records._template("took 12 ms") == records._template("took 12 ms")
    assert records._cached_template.cache_info().currsize == 1


# --- confinement and honest outcomes ------------------------------------------------------


def test_a_root_that_is_a_symlink_into_proc_is_refused(tmp_path: Path) -> None:
    (tmp_path / "logs").symlink_to("/proc/self")
    source = file_source(tmp_path / "logs", "logfmt", ["environ"], now=time.time())
    with pytest.raises(SourceError) as caught:
        search(source, "", lookback=60 * 24 * 30)
    assert caught.value.code is ErrorCode.AUTHORIZATION
    assert str(tmp_path) not in str(caught.value) and "proc" not in str(caught.value)


def test_globs_that_match_no_file_are_an_error_not_no_evidence(tmp_path: Path) -> None:
    # Its record is as old as its mtime: files are chosen by their records' own time (issue
    # 31), so a day-old mtime over a record of a minute ago would be read.
    (tmp_path / "old.jsonl").write_text(jline("old", ts=NOW - 86_400))
    os.utime(tmp_path / "old.jsonl", (NOW - 86_400, NOW - 86_400))
    # a file that exists but is older than the window: an honest "nothing in the window"
    assert search(file_source(tmp_path, "jsonl", ["*.jsonl"], now=NOW), "").match_count == 0
    with pytest.raises(SourceError) as caught:  # a wrong path: nothing was searched
        search(file_source(tmp_path, "jsonl", ["shop/*.jsonl"], now=NOW), "")
    assert caught.value.code is ErrorCode.UNAVAILABLE
    assert "APPLICATION" in str(caught.value) and str(tmp_path) not in str(caught.value)


def test_the_listing_of_a_folder_full_of_files_is_cut_and_marked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(12):
        (tmp_path / f"stale-{i}.jsonl").write_text(jline("stale", ts=NOW - 86_400))
        os.utime(tmp_path / f"stale-{i}.jsonl", (NOW - 86_400, NOW - 86_400))
    (tmp_path / "live.jsonl").write_text(jline("live") * 3)
    monkeypatch.setattr(files_module, "MAX_NAMES", 20)
    whole = search(file_source(tmp_path, "jsonl", ["*.jsonl"], now=NOW), "")
    assert whole.match_count == 3 and not whole.match_count_lower_bound
    monkeypatch.setattr(files_module, "MAX_NAMES", 4)
    found, cut, _ = files_module.find_files([f"{tmp_path}/*.jsonl"], [str(tmp_path)], 0, 256)
    assert cut and len(found) <= 4  # not all 13 listed and stat'ed


# --- ClickHouse: the answer bounded before it is read, a silent server does not hang -----


def _clickhouse(table: str, scan: str) -> ClickhouseLogSource:
    config = parse_logs_config(
        f'[scan]\n{scan}\n[clickhouse]\ndsn = "chdb://memory"\n'
        f'[topics.APPLICATION]\nbackend = "clickhouse"\ntable = "{table}"\n'
    )
    entry = config.topics[Topic.APPLICATION]
    assert isinstance(entry, ClickhouseTopic) and config.clickhouse is not None
    return ClickhouseLogSource(
        config.clickhouse, {Topic.APPLICATION: entry}, config, {},
        client=chdb_client(), clock=lambda: NOW,
    )  # fmt: skip


def _rows(table: str, bodies: list[str]) -> None:
    client = chdb_client()
    client.command(OTEL_LOGS_DDL.format(table=table))
    when = datetime.fromtimestamp(NOW - 60, UTC)
    client.insert(
        table,
        [[when, "INFO", 9, "shop", body, {}, {}] for body in bodies],
        column_names=["Timestamp", "SeverityText", "SeverityNumber", "ServiceName", "Body",
                      "LogAttributes", "ResourceAttributes"],
    )  # fmt: skip


def _search(source: ClickhouseLogSource, query: str = "") -> Any:
    request = QueryLogsRequest(topic=Topic.APPLICATION, query=query, lookback_minutes=60)
    return source.search(request, parse_log_query(query), 5.0)


def test_clickhouse_cuts_a_huge_body_on_the_server() -> None:
    table = f"otel_logs_{uuid.uuid4().hex[:12]}"
    _rows(table, ["boom " + "z" * 5000])
    found = _search(_clickhouse(table, "max_line_bytes = 100"), "boom")
    assert found.match_count == 1 and len(found.records[0].message) == 100


def test_clickhouse_refuses_an_answer_over_the_byte_budget() -> None:
    table = f"otel_logs_{uuid.uuid4().hex[:12]}"
    _rows(table, [f"row {i} " + "z" * 900 for i in range(50)])
    with pytest.raises(SourceError) as caught:
        _search(_clickhouse(table, "max_bytes = 4096"))
    assert caught.value.code is ErrorCode.EXECUTION and "size limit" in str(caught.value)
    assert table not in str(caught.value)


def test_a_clickhouse_server_that_never_answers_does_not_hold_the_thread() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepts (the kernel does), never answers
    port = listener.getsockname()[1]
    config = parse_logs_config(
        f'[scan]\nmax_seconds = 1\n[clickhouse]\ndsn = "http://default@127.0.0.1:{port}/db"\n'
        'connect_timeout_s = 1\n[topics.APPLICATION]\nbackend = "clickhouse"\n'
    )
    entry = config.topics[Topic.APPLICATION]
    assert isinstance(entry, ClickhouseTopic) and config.clickhouse is not None
    source = ClickhouseLogSource(config.clickhouse, {Topic.APPLICATION: entry}, config, {})
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            _search(source)
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(15)  # the library's default read timeout is 300 s
    listener.close()
    assert not worker.is_alive()
    assert isinstance(outcome[0], SourceError) and outcome[0].code is ErrorCode.UNAVAILABLE
    assert str(port) not in str(outcome[0]) and "127.0.0.1" not in str(outcome[0])


# --- configuration mistakes: one line naming the key, at start, never a hang ------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('roots = ["//proc"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "jsonl"\n'
         'paths = ["//proc/self/environ"]\n', "roots[0]: /proc, /sys and /dev are not log roots"),
        ('roots = ["/var/log"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "jsonl"\n'
         'paths = ["/var/log/a"]\ntimezone = "Mars/Base"\n', "topics.APPLICATION.timezone: "),
        ('[topics.APPLICATION]\nbackend = "mock"\nscenario = "nope"\n',
         "topics.APPLICATION.scenario: unknown mock scenario 'nope'"),
        ('[clickhouse]\ndsn = "chdb://x"\n[topics.APPLICATION]\nbackend = "clickhouse"\n'
         'row_limit = 0\n', "topics.APPLICATION.row_limit: must be 1..100000"),
        ('[clickhouse]\ndsn = "chdb://x"\n[topics.APPLICATION]\nbackend = "clickhouse"\n'
         'fields = ["a b"]\n', "topics.APPLICATION.fields: 'a b' is not a field name"),
    ],
)  # fmt: skip
def test_config_mistakes_name_their_key(text: str, expected: str) -> None:
    with pytest.raises(LogsConfigError) as caught:
        parse_logs_config(text)
    assert str(caught.value).startswith(f"ACI_LOGS_CONFIG: {expected}")
    assert "\n" not in str(caught.value)


def test_a_config_that_names_a_fifo_is_an_error_not_a_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "logs.toml")
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            load_logs_config({"ACI_LOGS_CONFIG": str(tmp_path / "logs.toml")})
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(5)
    if worker.is_alive():  # unblock the old blocking open so the thread ends
        with open(os.open(tmp_path / "logs.toml", os.O_WRONLY | os.O_NONBLOCK), "wb"):
            pass
    assert outcome and isinstance(outcome[0], LogsConfigError)
    # the operator's own path is named (before: no path, confusing with a relative one)
    assert str(outcome[0]) == f"ACI_LOGS_CONFIG: '{tmp_path}/logs.toml' is not a regular file"


# --- the deadline stops a scan of long, slow lines ---------------------------------------


def test_the_deadline_stops_a_scan_of_long_slow_lines(tmp_path: Path) -> None:
    # ~0.9 MB a line: ~0.3 s each to mine into a template before templates were mined from a
    # line's first 2,000 characters; ~7 ms each since, so 80 lines and a 0.1 s deadline.
    body = "ab-12:cd." * 100_000
    with open(tmp_path / "a.jsonl", "w") as out:
        for i in range(80):
            out.write(json.dumps({"ts": NOW - 60 + i, "level": "info", "msg": f"{i} {body}"}))
            out.write("\n")
    source = file_source(tmp_path, "jsonl", ["a.jsonl"], now=NOW)
    started = time.perf_counter()
    found = search(source, "", flag=StopFlag(0.1))
    # 15 s before (the flag was read every 2,048 lines only), and the answer claimed complete
    assert time.perf_counter() - started < 4.0
    assert found.match_count_lower_bound and 0 < found.match_count < 80


def test_the_worker_refuses_a_bad_config_with_one_line_not_a_traceback(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "logs.toml").write_text(
        '[topics.APPLICATION]\nbackend = "file"\nformat = "json"\npaths = ["/x"]\n'
    )
    env = {**os.environ, "ACI_REDIS_URL": "redis://127.0.0.1:6379/0",
           "ACI_LOGS_CONFIG": str(tmp_path / "logs.toml")}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "worker"], env=env, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "configuration error: ACI_LOGS_CONFIG: topics.APPLICATION.format: Invalid enum value "
        "'json' (one of jsonl, logfmt, cri, docker, syslog, mysql_slow, log4j, apache_access, "
        "nginx_access, apache_error, nginx_error, klog, oslo, postgresql, redis, plain, regex, "
        "w3c, postgresql_csv, envoy)"
    ]


# --- no line, however odd, raises out of a parser ----------------------------------------

_PIECES = st.sampled_from([
    '{"ts":', '"time":', "1e308", "-1e308", "9" * 400, '"0001-01-01T00:00:00"',
    '"9999-12-31T23:59:59.999999999-14:00"', '"level":', "50", '"SeverityNumber":', "-5",
    "1e20", '"msg":', '"x"', "}", "{", ",", ":", '"', "<191>", "<0>", "1 ", " ", "-",
    '[a b="c"]', "Feb 29 00:00:00", "Dec 31 23:59:59", "2026-13-40T99:99:99Z", "# Time: ",
    "# Query_time: nan", " Lock_time: inf", "SET timestamp=", ";", "\n", "stdout P ",
    "stderr F ", "ts=", "level=", 'msg="', "\\", "NaN", "0000-00-00", "\x00", "\ufffd",
    '"level_value":', "1e400", '{"a":' * 40, "panic: ", "fatal error: ", "goroutine 1 [x]:",
    '{"log":"', '"stream":"stderr"', '"time":"2026-12-04T00:00:00Z"', "\\n", "\t",
    'Exception in thread "main" a.B', "1796413608: ", "[12] ",
    # w3c's directives and columns, csvlog's rows, syslog's continuation lines
    "#Fields: ", "#Date: ", "#Software: Microsoft", "date time c-ip sc-status time-taken ",
    "x-forwarded-for ", "2026-12-04 ", "10:00:00.5 ", "2026-12-04 10:00:00.123 UTC,",
    '"a""b",', ",,,,,,,,,,,,,,,,,,,,,", "-0930", "Traceback (most recent call last):",
    '  File "x.py", line 1', "ValueError: x", "During handling of the above exception,"
    " another exception occurred:", "Dec  4 10:00:00 h app[1]: ",
])  # fmt: skip


_FORMATS = (
    *("jsonl", "logfmt", "cri", "docker", "syslog", "mysql_slow", "plain", "w3c"),
    *("postgresql_csv", "postgresql", "log4j", "nginx_access", "nginx_error", "redis"),
)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(_FORMATS),
    st.lists(st.lists(_PIECES, max_size=12).map("".join), max_size=6),
    st.sampled_from([UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-12))]),
    st.integers(0, 4 * 10**12),
)
def test_no_line_raises_out_of_a_parser(
    fmt: str, lines: list[str], zone: tzinfo, now_ms: int
) -> None:
    parser = make_parser(fmt, {}, zone, "", "auto", now_ms, "/l/pods/ns_pod_uid/c/0.log")
    digest = records.Digest(8)
    for one in lines:
        for entry in parser.feed(one):
            digest.add(entry)
    for entry in parser.flush():
        digest.add(entry)


@pytest.mark.parametrize("zone", ["America", "x" * 5000, "+24:00", "+99:99"])
def test_a_bad_time_zone_is_one_line_not_a_traceback(zone: str) -> None:
    # "America" (a folder of tzdata) raised IsADirectoryError, a long name OSError naming the
    # install path, +24:00 a datetime message
    with pytest.raises(LogsConfigError) as caught:
        parse_logs_config(f'timezone = "{zone}"\n[topics.APPLICATION]\nbackend = "mock"\n')
    text = str(caught.value)
    assert text.startswith("ACI_LOGS_CONFIG: timezone: unknown time zone") and len(text) < 200
    assert "site-packages" not in text


@pytest.mark.parametrize(
    ("dsn", "refused"),
    [
        ("http://reader:s3cret@ch:8123/otel", True),
        ("https://reader:s3cret@ch:8443", True),
        ("http://reader@ch:8123/otel", False),
        ("https://ch:8443?x=a:b@c", False),
        ("chdb:///var/lib/chdb", False),
    ],
)
def test_a_password_in_the_dsn_is_refused(dsn: str, refused: bool) -> None:
    text = f'[clickhouse]\ndsn = "{dsn}"\n[topics.APPLICATION]\nbackend = "clickhouse"\n'
    if not refused:
        parse_logs_config(text)
        return
    with pytest.raises(LogsConfigError, match="password_env") as caught:
        parse_logs_config(text)
    assert "s3cret" not in str(caught.value)


def test_a_folder_swapped_for_a_symlink_between_stat_and_open_is_not_followed(
    tmp_path: Path,
) -> None:
    root, outside = tmp_path / "logs", tmp_path / "secret"
    (root / "app").mkdir(parents=True)
    outside.mkdir()
    (outside / "a.jsonl").write_text(jline("the secret"))
    (root / "app" / "a.jsonl").write_text(jline("inside"))
    listed = str(root / "app" / "a.jsonl")
    # The race's outcome: the listing resolved the inside name, then `app` became a symlink
    # out of the root before the stat and the open (both follow folders): the outside inode
    (root / "app" / "a.jsonl").unlink()
    (root / "app").rmdir()
    (root / "app").symlink_to(outside)
    file = files_module.LogFile(listed, os.stat(listed))
    reader = files_module.Reader(ScanBudget(), StopFlag(5), [str(root)])
    assert list(reader.lines_of(file)) == [] and reader.stopped
