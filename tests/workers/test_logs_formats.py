"""Named text formats on files real producers wrote (tests/workers/logs_samples/README.md),
several sources per topic, and unparsed lines counted and matched as text, never dropped."""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from logs_helpers import file_source, project, search

from contracts import EvidenceStatus, LogsUpstream, Topic
from contracts.bounds import DEFAULT_BOUNDS
from contracts.status import LifecycleStatus
from contracts.views import InvocationMeta, control_view, observe
from workers.sources.base import SourceError
from workers.sources.logs.config import parse_logs_config
from workers.sources.logs.file_source import FileLogSource

SAMPLES = Path(__file__).parent / "logs_samples"
NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC).timestamp()  # the samples were written at 11:3x


def sample(tmp_path: Path, *names: str) -> None:
    for name in names:
        shutil.copy(SAMPLES / name, tmp_path / name)
        os.utime(tmp_path / name, (NOW - 60, NOW - 60))


def read(tmp_path: Path, fmt: str, name: str, query: str = "", extra: str = "") -> LogsUpstream:
    sample(tmp_path, name)
    return search(file_source(tmp_path, fmt, [name], now=NOW, extra=extra), query, lookback=1440)


def test_log4j_iso_layout_joins_the_stack_trace_to_its_record(tmp_path: Path) -> None:
    found = read(tmp_path, "log4j", "log4j_iso.log", "level:ERROR")
    assert found.match_count == 2 and not found.unparsed_lines
    failed = next(r for r in found.records if "Payment failed" in r.message)
    assert failed.message.startswith("Payment failed for order o-1042\njava.lang.Illegal")
    assert "Caused by: java.io.IOException: connection reset by peer" in failed.message
    assert failed.fields == {
        "thread": "main",
        "logger": "com.shop.order.OrderService",
        "exception": "java.lang.IllegalStateException",
    }
    assert failed.timestamp == "2026-12-04T11:33:20.819Z"
    # a word of the stack trace finds its record; the exception names a field
    trace = search(file_source(tmp_path, "log4j", ["log4j_iso.log"], now=NOW), "IOException", 1440)
    assert trace.match_count == 1
    typed = search(file_source(tmp_path, "log4j", ["log4j_iso.log"], now=NOW), "exception:*", 1440)
    assert typed.match_count == 1


@pytest.mark.parametrize(
    ("name", "count", "first"),
    [
        ("log4j2_default.log", 6, "2026-12-04T11:33:22.714Z"),  # HH:mm:ss.SSS: today's date
        ("log4j_spark.log", 6, "2026-12-04T11:33:26.000Z"),  # yy/MM/dd HH:mm:ss
        ("logback.log", 8, "2026-12-04T11:33:29.663Z"),
    ],
)
def test_log4j_and_logback_layouts(tmp_path: Path, name: str, count: int, first: str) -> None:
    found = read(tmp_path, "log4j", name)
    assert found.match_count == count and not found.unparsed_lines
    assert found.records[0].timestamp == first
    levels = {r.level for r in found.records}
    assert levels <= {"DEBUG", "INFO", "WARN", "ERROR"} and "ERROR" in levels
    assert all(r.fields.get("logger", "").count(".") >= 1 for r in found.records)


def test_logback_exception_field_and_level_synonym_query(tmp_path: Path) -> None:
    found = read(tmp_path, "log4j", "logback.log", "level:WARNING")
    assert found.match_count == 2
    bad = search(file_source(tmp_path, "log4j", ["logback.log"], now=NOW), "level:E", 1440)
    assert bad.match_count == 2
    assert bad.records[0].fields["exception"] == "java.lang.NumberFormatException"


def test_apache_error_log_24_with_its_headerless_line(tmp_path: Path) -> None:
    found = read(tmp_path, "apache_error", "apache_error.log")
    # 8 records; `AH00016: Configuration Failed` has no header: counted, not a record
    assert found.match_count == 8 and found.unparsed_lines == 1
    error = read(tmp_path, "apache_error", "apache_error.log", "level:ERROR invalid")
    assert error.match_count == 1
    record = error.records[0]
    assert record.message == "AH10244: invalid URI path (/../../etc/passwd)"
    # `[pid 31677:tid 31712]`: the worker thread (before: dropped)
    assert record.fields == {
        "module": "core", "pid": "31677", "thread": "31712", "client": "127.0.0.1:59770",
    }  # fmt: skip
    assert record.timestamp == "2026-12-04T11:32:55.358Z"
    # notice is kept as the level_name, so the word finds it; level:notice is level:INFO
    notice = read(tmp_path, "apache_error", "apache_error.log", "notice")
    assert notice.match_count == 3
    # the headerless line still matches a query of words, as text
    text = read(tmp_path, "apache_error", "apache_error.log", "AH00016")
    assert text.match_count == 1 and text.records[0].message == "AH00016: Configuration Failed"
    assert text.notes and "1 lines read are not in their log format" in text.notes[0]


@pytest.mark.parametrize(
    ("fmt", "name"),
    [
        ("apache_access", "apache_access_common.log"),
        ("apache_access", "apache_access_combined.log"),
        ("nginx_access", "nginx_access.log"),
    ],
)
def test_access_logs_common_and_combined(tmp_path: Path, fmt: str, name: str) -> None:
    found = read(tmp_path, fmt, name, "http_status:>=400")
    assert not found.unparsed_lines
    statuses = sorted(r.fields["http_status"] for r in found.records)
    assert statuses in ([400, 404], [404, 502])
    missing = next(r for r in found.records if r.fields["http_status"] == 404)
    assert (missing.level, missing.fields["uri"], missing.fields["method"]) == (
        "WARN",
        "/missing.html",
        "GET",
    )
    if "combined" in name or fmt == "nginx_access":
        assert missing.fields["user_agent"] == "curl/7.88.1"
    assert missing.timestamp.startswith("2026-12-04T11:32:")


def test_nginx_error_log(tmp_path: Path) -> None:
    found = read(tmp_path, "nginx_error", "nginx_error.log", "level:ERROR")
    assert found.match_count == 2 and not found.unparsed_lines
    refused = next(r for r in found.records if "refused" in r.message)
    # `31117#31117`: the thread id too (before: dropped; `thread:31117` is a query's field)
    assert refused.fields == {
        "pid": "31117", "thread": "31117", "connection": "3", "client": "127.0.0.1",
    }  # fmt: skip
    assert refused.message.startswith("connect() failed (111: Connection refused)")
    every = read(tmp_path, "nginx_error", "nginx_error.log")
    assert every.match_count == 18


def test_klog_from_kubectl(tmp_path: Path) -> None:
    found = read(tmp_path, "klog", "klog_kubectl.log", "level:E")
    assert found.match_count == 5 and found.unparsed_lines == 1
    record = found.records[0]
    assert record.fields["source"] == "memcache.go:265" and record.level == "ERROR"
    assert record.timestamp.startswith("2026-12-04T11:33:34.808")
    text = read(tmp_path, "klog", "klog_kubectl.log", '"did you specify the right host"')
    assert text.match_count == 1  # kubectl's own last line, not klog: matched as text


def test_oslo_log_with_traceback_and_request_id(tmp_path: Path) -> None:
    found = read(tmp_path, "oslo", "oslo_nova.log", "level:ERROR")
    assert found.match_count == 8 and not found.unparsed_lines
    request = read(tmp_path, "oslo", "oslo_nova.log", "network")
    record = request.records[0]
    assert record.fields["request_id"] == "req-38101a0b-2096-447d-96ea-a692162415ae"
    assert record.fields["logger"] == "nova.compute.manager" and record.message.startswith("Failed")
    warn = read(tmp_path, "oslo", "oslo_nova.log", "level:warning")
    assert warn.match_count == 1 and warn.records[0].fields["level_name"] == "WARNING"


def test_plain_text_with_a_leading_time_mariadb_error_log(tmp_path: Path) -> None:
    found = read(tmp_path, "plain", "plain_mariadb.err")
    assert found.match_count == 25 and found.unparsed_lines == 1
    assert {r.level for r in found.records} == {"INFO"}
    ready = read(tmp_path, "plain", "plain_mariadb.err", '"ready for connections"')
    assert ready.records[0].timestamp == "2026-12-04T11:33:57.000Z"
    version = read(tmp_path, "plain", "plain_mariadb.err", "socket")
    assert version.match_count == 1 and version.records[0].message.startswith("Version:")


LATER = datetime(2026, 12, 4, 18, 0, tzinfo=UTC).timestamp()  # postgresql.log, redis.log: 17:0x


def read_later(tmp_path: Path, fmt: str, name: str, query: str = "") -> LogsUpstream:
    sample(tmp_path, name)
    return search(file_source(tmp_path, fmt, [name], now=LATER), query, lookback=1440)


def test_postgresql_reports_join_their_detail_and_statement(tmp_path: Path) -> None:
    # Debian's `%m [%p] %q%u@%d `: an ERROR and its DETAIL and STATEMENT are one record, a
    # multi-line statement included; the zone written (`UTC`) is read whatever the topic's.
    every = read_later(tmp_path, "postgresql", "postgresql.log")
    assert every.match_count == 17 and not every.unparsed_lines  # 28 lines
    found = read_later(tmp_path, "postgresql", "postgresql.log", "level:error")
    assert found.match_count == 5
    dup = next(r for r in found.records if "duplicate key" in r.message)
    assert dup.message.splitlines() == [
        'duplicate key value violates unique constraint "aci_pg_sample_pkey"',
        "DETAIL:  Key (id)=(1) already exists.",
        "STATEMENT:  INSERT INTO aci_pg_sample VALUES (1,'dup')",
    ]
    assert dup.fields == {"pid": "16762", "user": "postgres", "database": "test"}
    assert dup.timestamp == "2026-12-04T17:01:20.970Z"
    column = read_later(tmp_path, "postgresql", "postgresql.log", "missing_column")
    assert column.match_count == 1 and column.records[0].message.endswith("\tWHERE false")
    assert "HINT:  Perhaps" in column.records[0].message
    fatal = read_later(tmp_path, "postgresql", "postgresql.log", "level:FATAL database:nope")
    assert [r.message for r in fatal.records] == ['database "nope" does not exist']
    log = read_later(tmp_path, "postgresql", "postgresql.log", "level:LOG checkpoint")
    assert log.match_count == 4 and {r.level for r in log.records} == {"INFO"}
    warning = read_later(tmp_path, "postgresql", "postgresql.log", "level:warn lagging")
    assert warning.records[0].message.splitlines()[1].startswith("CONTEXT:  PL/pgSQL")


def test_postgresql_zone_and_prefix_variants(tmp_path: Path) -> None:
    # `%t [%p]: [%l-1] user=%u,db=%d ` (pgBadger's), a numeric zone, a DETAIL with no report
    # before it (a file cut there) as a record of its own.
    (tmp_path / "pg.log").write_text(
        "2026-12-04 19:51:20 +08 [77]: [3-1] user=app,db=shop ERROR:  deadlock detected\n"
        "2026-12-04 19:51:20 +08 [77]: [4-1] user=app,db=shop DETAIL:  Process 77 waits\n"
    )
    (tmp_path / "cut.log").write_text(
        "2026-12-04 11:00:00.000 UTC [5] app@shop DETAIL:  Key (id)=(1) already exists.\n"
    )
    os.utime(tmp_path / "pg.log", (NOW, NOW))
    os.utime(tmp_path / "cut.log", (NOW, NOW))
    source = file_source(tmp_path, "postgresql", ["pg.log"], now=NOW)
    (deadlock,) = search(source, "deadlock", lookback=1440).records
    assert deadlock.timestamp == "2026-12-04T11:51:20.000Z"  # +08, whatever the topic's zone
    # `[3-1]`: `%l`, the session's line number (before 2026-12-05, dropped)
    assert deadlock.fields == {
        "pid": "77", "session_line_num": "3", "user": "app", "database": "shop",
    }  # fmt: skip
    assert deadlock.message == "deadlock detected\nDETAIL:  Process 77 waits"
    cut = search(file_source(tmp_path, "postgresql", ["cut.log"], now=NOW), "", lookback=1440)
    (alone,) = cut.records
    assert alone.message == "DETAIL:  Key (id)=(1) already exists." and alone.level == ""


def test_redis_server_log(tmp_path: Path) -> None:
    # Redis 7.0 `--loglevel verbose`: `#` warning, `*` notice, `-` verbose; the role letter.
    every = read_later(tmp_path, "redis", "redis.log")
    assert every.match_count == 17 and not every.unparsed_lines
    warn = read_later(tmp_path, "redis", "redis.log", "level:WARNING overcommit")
    (record,) = warn.records
    assert record.level == "WARN" and record.fields == {
        "pid": "16934", "role": "master", "level_name": "warning"
    }  # fmt: skip
    assert record.timestamp == "2026-12-04T17:01:29.057Z"
    assert read_later(tmp_path, "redis", "redis.log", "role:child").match_count == 3
    assert read_later(tmp_path, "redis", "redis.log", "level:debug").match_count == 5
    assert read_later(tmp_path, "redis", "redis.log", "notice").match_count == 5


HDFS_PATTERN = (
    r"(?P<time>\d{6} \d{6}) (?P<pid>\d+) (?P<level>\w+) (?P<component>[^:]+): (?P<message>.*)"
)


def test_user_regex_with_time_format(tmp_path: Path) -> None:
    # The acceptance test's keys, exactly: backend, paths, timezone, format, pattern, time_format
    (tmp_path / "hdfs.log").write_text(
        "261204 113000 148 INFO dfs.DataNode$PacketResponder: PacketResponder 1 terminating\n"
        "261204 113001 26 WARN dfs.FSNamesystem: BLOCK* NameSystem.addStoredBlock: blk_-12 lost\n"
        "not a line of this layout\n"
    )
    config = parse_logs_config(
        f'roots = ["{tmp_path}"]\n[topics.APPLICATION]\nbackend = "file"\n'
        f'paths = ["{tmp_path}/hdfs.log"]\ntimezone = "+08:00"\nformat = "regex"\n'
        f"pattern = '''{HDFS_PATTERN}'''\ntime_format = \"%y%m%d %H%M%S\"\n"
    )
    source = FileLogSource(Topic.APPLICATION, config.topics[Topic.APPLICATION], config,  # type: ignore[arg-type]
                           clock=lambda: NOW)  # fmt: skip
    assert "component" in source.extra_fields and "pid" in source.extra_fields
    found = search(source, "component:FSNamesystem level:WARN", lookback=1440)
    assert found.match_count == 1
    record = found.records[0]
    assert record.timestamp == "2026-12-04T11:30:01.000+08:00"  # read in the topic's zone
    assert record.fields == {"pid": "26", "component": "dfs.FSNamesystem"}
    every = search(source, "", lookback=1440)
    assert every.match_count == 2 and every.unparsed_lines == 1


def test_user_regex_without_time_format_reads_iso_and_epoch(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text(
        "2026-12-04T11:00:00Z|E|disk full\n1796382000|W|disk almost full\n"
    )
    extra = "pattern = '(?P<time>[^|]+)\\|(?P<level>\\w)\\|(?P<message>.*)'\n"
    source = file_source(tmp_path, "regex", ["a.log"], now=NOW, extra=extra)
    found = search(source, "disk", lookback=1440)
    assert [(r.level, r.message, r.timestamp) for r in found.records] == [
        ("WARN", "disk almost full", "2026-12-04T11:00:00.000Z"),  # epoch seconds
        ("ERROR", "disk full", "2026-12-04T11:00:00.000Z"),
    ]


NATS_PATTERN = r"\[(?P<pid>\d+)\] (?P<time>\S+ \S+) \[(?P<level>\w+)\] (?P<message>.*)"


def test_three_letter_levels_of_go_loggers(tmp_path: Path) -> None:
    # nats-server 2.9 as Debian runs it (zerolog and Serilog write the same three letters):
    # `level:error` and `level:warn` find `[ERR]`/`[WRN]`, and `INF` still finds its word.
    (tmp_path / "nats.log").write_text(
        "[2983] 2026/12/04 11:46:15.733437 [INF] Starting nats-server\n"
        "[2983] 2026/12/04 11:46:16.100000 [WRN] Plaintext passwords detected\n"
        "[2983] 2026/12/04 11:46:17.200000 [ERR] Error listening on port: 4222\n"
    )
    (tmp_path / "app.log").write_text("2026-12-04 11:46:18 [FTL] zerolog's console layout\n")
    extra = f"pattern = '''{NATS_PATTERN}'''\ntime_format = \"%Y/%m/%d %H:%M:%S.%f\"\n"
    source = file_source(tmp_path, "regex", ["nats.log"], now=NOW, extra=extra)
    assert [r.message for r in search(source, "level:error", lookback=1440).records] == [
        "Error listening on port: 4222"
    ]
    assert search(source, "level:WRN", lookback=1440).match_count == 1
    (info,) = search(source, "level:info", lookback=1440).records
    assert info.level == "INFO" and info.fields["level_name"] == "INF"
    assert search(source, "INF", lookback=1440).match_count == 1
    plain = file_source(tmp_path, "plain", ["app.log"], now=NOW)
    (fatal,) = search(plain, "level:fatal", lookback=1440).records
    assert fatal.message == "zerolog's console layout"


def test_query_level_words_of_go_loggers() -> None:
    from workers.sources.logs.source import parse_log_query

    words = "level:INF level:WRN level:ERR level:DBG level:TRC level:FTL level:EROR level:DBUG"
    levels = [c.value for c in parse_log_query(words).clauses]
    assert levels == ["info", "warn", "error", "debug", "trace", "fatal", "error", "debug"]


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ("", 'pattern: missing key (format = "regex"'),
        ("pattern = '(?P<message>.*)'\n", "needs a named group (?P<time>"),
        ("pattern = '(?P<time>'\n", "pattern: not a Python regular expression"),
    ],
)
def test_regex_config_errors_name_the_key(tmp_path: Path, extra: str, says: str) -> None:
    from workers.sources.logs.config import LogsConfigError

    with pytest.raises(LogsConfigError, match=r"topics\.APPLICATION\.pattern") as caught:
        file_source(tmp_path, "regex", ["a.log"], now=NOW, extra=extra)
    assert says in str(caught.value)


def _mixed_folder(tmp_path: Path) -> None:
    sample(tmp_path, "apache_error.log", "log4j_iso.log", "plain_mariadb.err")
    (tmp_path / "messages").write_text(
        "Dec  4 11:35:01 web1 sshd[2411]: Failed password for root from 203.0.113.9 port 4022\n"
        "Dec  4 11:35:02 web1 syslogd 1.4.1: restart.\n"
        "Dec  4 11:35:03 web1  -- root[2421]: ROOT LOGIN ON tty2\n"
    )
    os.utime(tmp_path / "messages", (NOW - 60, NOW - 60))


def test_a_mixed_folder_with_a_source_per_format_drops_no_file(tmp_path: Path) -> None:
    _mixed_folder(tmp_path)
    root = str(tmp_path)
    config = parse_logs_config(
        f'roots = ["{root}"]\n[topics.SYSTEM_EVENTS]\nbackend = "file"\n'
        f'paths = ["{root}/messages"]\nformat = "syslog"\n'
        f'[[topics.SYSTEM_EVENTS.sources]]\npaths = ["{root}/apache_error*"]\nformat = "apache_error"\n'
        f'[[topics.SYSTEM_EVENTS.sources]]\npaths = ["{root}/*.log"]\nformat = "log4j"\n'
        f'[[topics.SYSTEM_EVENTS.sources]]\npaths = ["{root}/*.err"]\nformat = "plain"\n'
    )
    source = FileLogSource(Topic.SYSTEM_EVENTS, config.topics[Topic.SYSTEM_EVENTS], config,  # type: ignore[arg-type]
                           clock=lambda: NOW)  # fmt: skip
    every = search(source, "", lookback=1440)
    # syslog 3 + apache 8 + java 6 + mariadb 25; apache_error.log is read by its own source
    # (listed first), not again as log4j
    assert every.match_count == 3 + 8 + 6 + 25
    assert every.unparsed_lines == 2  # apache's AH00016 line, MariaDB's Version: line
    root_login = search(source, "ROOT LOGIN", lookback=1440)
    assert root_login.match_count == 1 and root_login.records[0].fields["host"] == "web1"
    assert search(source, "root LOGIN", lookback=1440).match_count == 1
    failed = search(source, "failed", lookback=1440)
    services = {r.message.split()[0] for r in failed.records}
    assert failed.match_count == 3 and "Payment" in services and "Failed" in services


def test_one_glob_over_a_mixed_folder_counts_the_other_formats(tmp_path: Path) -> None:
    _mixed_folder(tmp_path)
    source = file_source(tmp_path, "syslog", ["*"], now=NOW, topic=Topic.SYSTEM_EVENTS)
    found = search(source, "error", lookback=1440)
    # The Apache error log under a syslog glob: its error lines are not silently lost
    assert found.match_count >= 2 and found.unparsed_lines
    assert found.notes and "files had no line in their format" in found.notes[0]
    result = project(found)
    assert result.evidence_status is EvidenceStatus.EVIDENCE_FOUND
    assert result.unparsed_lines == found.unparsed_lines and result.notes == found.notes
    meta = InvocationMeta(tool="query_logs", session_id="s", status=LifecycleStatus.READY)
    assert control_view(result, meta).unparsed_lines == found.unparsed_lines
    assert observe(result, DEFAULT_BOUNDS).notes == found.notes  # type: ignore[union-attr]
    # a field query cannot match an unparsed line: the model hears so
    fielded = search(source, "level:ERROR", lookback=1440)
    assert fielded.match_count == 0 and fielded.notes
    assert "plain words alone also matches them" in fielded.notes[0]


def test_a_file_of_no_line_in_format_and_no_text_match_is_an_error(tmp_path: Path) -> None:
    sample(tmp_path, "nginx_access.log")
    source = file_source(tmp_path, "klog", ["nginx_access.log"], now=NOW)
    with pytest.raises(SourceError, match=r"not in the configured format \(klog\)"):
        search(source, "level:ERROR", lookback=1440)


def test_crlf_files_leave_no_carriage_return(tmp_path: Path) -> None:
    text = (SAMPLES / "log4j_iso.log").read_bytes().replace(b"\n", b"\r\n")
    (tmp_path / "win.log").write_bytes(text)
    os.utime(tmp_path / "win.log", (NOW, NOW))
    found = search(file_source(tmp_path, "log4j", ["win.log"], now=NOW), "", lookback=1440)
    assert found.match_count == 6
    assert not any("\r" in r.message or "\r" in (r.template or "") for r in found.records)
    assert not any("\r" in p.template for p in found.patterns)


def test_a_quote_inside_a_phrase_and_level_synonyms_in_queries() -> None:
    from workers.sources.logs.source import parse_log_query

    (phrase,) = parse_log_query(r'"say \"hi\" now"').clauses
    assert phrase.value == 'say "hi" now'
    (slash,) = parse_log_query(r'"C:\\tmp\x"').clauses
    assert slash.value == r"c:\tmp\x"
    levels = [
        c.value for c in parse_log_query("level:WARNING level:notice level:crit level:E").clauses
    ]
    assert levels == ["warn", "info", "fatal", "error"]


def test_a_phrase_with_an_escaped_quote_finds_the_record(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text('2026-12-04 11:50:00 ERROR key "tenant" missing\n')
    os.utime(tmp_path / "a.log", (NOW, NOW))
    source = file_source(tmp_path, "plain", ["a.log"], now=NOW)
    assert search(source, r'"key \"tenant\" missing"').match_count == 1


FORMAT_OF = {
    "log4j_iso.log": "log4j",
    "logback.log": "log4j",
    "apache_error.log": "apache_error",
    "apache_access_combined.log": "apache_access",
    "nginx_access.log": "nginx_access",
    "nginx_error.log": "nginx_error",
    "klog_kubectl.log": "klog",
    "oslo_nova.log": "oslo",
    "plain_mariadb.err": "plain",
    "postgresql.log": "postgresql",
    "redis.log": "redis",
}
WRITTEN_LATER = ("postgresql.log", "redis.log")


@pytest.mark.parametrize("name", sorted(FORMAT_OF))
def test_the_record_prefilter_never_hides_a_match(tmp_path: Path, name: str) -> None:
    """Every word of the file, and phrases of two words, answer as a full parse does."""
    from datetime import UTC as utc

    from workers.sources.logs.formats import make_parser
    from workers.sources.logs.records import entry_matches
    from workers.sources.logs.source import parse_log_query

    fmt, now = FORMAT_OF[name], LATER if name in WRITTEN_LATER else NOW
    text = (SAMPLES / name).read_text()
    parser = make_parser(fmt, {}, utc, "", "auto", int(now * 1000))
    records = [e for line in text.splitlines(True) for e in parser.feed(line)] + parser.flush()
    words = sorted({w for w in text.split() if '"' not in w and "\\" not in w})[:120]
    pairs = [
        " ".join(p)
        for line in text.splitlines()[:12]
        for p in zip(line.split(), line.split()[1:], strict=False)
    ]
    queries = [*words, *(f'"{p}"' for p in pairs if '"' not in p and "\\" not in p)]
    levels = ("ERROR", "warn", "WARNING", "info", "notice", "E", "debug", "fatal", "trace", "r")
    queries += [f"level:{level}" for level in levels] + ["level:error -level:warn"]
    sample(tmp_path, name)
    source = file_source(tmp_path, fmt, [name], now=now)
    for query in queries:
        try:
            parsed = parse_log_query(query)
        except SourceError:
            continue  # refused forms (a glued comma, parentheses): nothing to compare
        if any(c.field not in (None, "level") for c in parsed.clauses):
            continue  # `host:` words would name fields
        expected = sum(entry_matches(parsed, r) for r in records)
        found = search(source, query, lookback=1440)
        extra = found.match_count - expected  # lines no record, matched as text
        assert 0 <= extra <= (found.unparsed_lines or 0), query


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ('paths = ["/var/log/a"]\nformat = "json"\n', "sources[0].format: Invalid enum value"),
        ('paths = ["/var/log/a"]\nformat = "regex"\n', "sources[0].pattern: missing key"),
        ('paths = ["/var/log/a"]\nformat = "plain"\nbogus = 1\n', "sources[0].bogus: unknown key"),
        ('format = "plain"\n', "sources[0].paths: missing key"),
        ('paths = ["/etc/a"]\nformat = "plain"\n', "sources[0].paths[0]: not under any of roots"),
    ],
)
def test_a_mistake_in_a_source_names_its_key(source: str, says: str) -> None:
    from workers.sources.logs.config import LogsConfigError

    text = (
        'roots = ["/var/log"]\n[topics.APPLICATION]\nbackend = "file"\n'
        f"[[topics.APPLICATION.sources]]\n{source}"
    )
    with pytest.raises(LogsConfigError) as caught:
        parse_logs_config(text)
    assert f"ACI_LOGS_CONFIG: topics.APPLICATION.{says}" in str(caught.value)


def test_oslo_lines_prefixed_by_their_file_name_as_concatenated_files_are(tmp_path: Path) -> None:
    lines = (SAMPLES / "oslo_nova.log").read_text().splitlines(True)
    (tmp_path / "all.log").write_text("".join(f"nova-compute.log.1 {line}" for line in lines))
    os.utime(tmp_path / "all.log", (NOW, NOW))
    found = search(file_source(tmp_path, "oslo", ["all.log"], now=NOW), "level:ERROR", 1440)
    assert found.match_count == 8 and not found.unparsed_lines


def test_postgresql_parts_of_another_backends_report_join_no_other_report(tmp_path: Path) -> None:
    # Lines of two backends interleaved (stderr with no logging collector): backend 5's
    # STATEMENT after backend 6's LOG is no part of that LOG; its DETAIL then joins it.
    (tmp_path / "pg.log").write_text(
        "2026-12-04 11:00:00.000 UTC [5] ERROR:  division by zero\n"
        "2026-12-04 11:00:00.000 UTC [6] LOG:  checkpoint starting: time\n"
        "2026-12-04 11:00:00.000 UTC [5] STATEMENT:  SELECT 1/0\n"
        "2026-12-04 11:00:00.000 UTC [5] DETAIL:  in a function\n"
    )
    os.utime(tmp_path / "pg.log", (NOW, NOW))
    found = search(file_source(tmp_path, "postgresql", ["pg.log"], now=NOW), "", lookback=1440)
    assert sorted(r.message for r in found.records) == [
        "STATEMENT:  SELECT 1/0\nDETAIL:  in a function",
        "checkpoint starting: time",
        "division by zero",
    ]


@pytest.mark.parametrize(
    ("written", "topic_zone", "expected"),
    [
        # an abbreviation of one offset (in tzdata) is read as that offset, whatever the
        # topic's `timezone` (here the default UTC): before, as the topic's zone, 7 h off
        ("PDT", "UTC", "2026-08-13T08:46:12.212Z"),
        ("EDT", "UTC", "2026-08-13T05:46:12.212Z"),
        ("CEST", "UTC", "2026-08-12T23:46:12.212Z"),
        ("JST", "Europe/Berlin", "2026-08-12T16:46:12.212Z"),
        # one that names several offsets (CST: US Central, China) is the topic's zone's
        ("CST", "Asia/Shanghai", "2026-08-12T17:46:12.212Z"),
        ("CST", "America/Chicago", "2026-08-13T06:46:12.212Z"),
    ],
)
def test_postgresql_zone_abbreviations(
    tmp_path: Path, written: str, topic_zone: str, expected: str
) -> None:
    (tmp_path / "pg.log").write_text(
        f'2026-08-13 01:46:12.212 {written} [12389] ERROR:  relation "t" does not exist\n'
    )
    later = datetime(2026, 8, 14, tzinfo=UTC).timestamp()
    os.utime(tmp_path / "pg.log", (later, later))
    source = file_source(
        tmp_path, "postgresql", ["pg.log"], now=later, top=f'timezone = "{topic_zone}"'
    )
    (record,) = search(source, "relation", lookback=1440 * 2).records
    zone = ZoneInfo(topic_zone)
    assert datetime.fromisoformat(record.timestamp) == datetime.fromisoformat(expected)
    assert (
        datetime.fromisoformat(record.timestamp).utcoffset()
        == datetime.fromisoformat(expected).astimezone(zone).utcoffset()
    )


MONOLOG = (  # Monolog's LineFormatter as Laravel writes storage/logs/laravel.log (the shape)
    '[2026-12-04 11:19:06] local.INFO: Page Access {"path":"/","method":"GET"} \n'
    "[2026-12-04 11:19:07] production.ERROR: Target class [Cors] does not exist. "
    '{"exception":"[object] (Illuminate\\\\Contracts\\\\Container\\\\BindingResolutionException'
    "(code: 0): Target class [Cors] does not exist. at /var/www/app/Container.php:914)\n"
    "[stacktrace]\n"
    "#0 /var/www/app/Container.php(795): Illuminate\\\\Container\\\\Container->build('Cors')\n"
    "#1 [internal function]: Illuminate\\\\Pipeline\\\\Pipeline->then(Object(Closure))\n"
    "#2 {main}\n"
    "\n"
    '[previous exception] [object] (ReflectionException(code: -1): Class \\"Cors\\" does '
    "not exist at /var/www/app/Container.php:912)\n"
    "[stacktrace]\n"
    "#0 {main}\n"
    '"} \n'
    "[2026-12-04 11:19:08] local.EMERGENCY: Unable to create configured logger. [] []\n"
    "[2026-12-04 11:19:09] local.WARNING: Disk almost full [] []\n"
)


def test_monolog_lines_have_their_level_and_channel_and_a_trace_joins_its_record(
    tmp_path: Path,
) -> None:
    # Laravel's and Symfony's default: `[%datetime%] %channel%.%level_name%: %message% ...`;
    # before, under `plain`, no record had a level (`level:ERROR` found nothing) and every
    # line of a stack trace was a line not in the format
    (tmp_path / "laravel.log").write_text(MONOLOG)
    os.utime(tmp_path / "laravel.log", (NOW - 60, NOW - 60))
    source = file_source(tmp_path, "plain", ["laravel.log"], now=NOW)
    every = search(source, "", lookback=1440)
    assert every.match_count == 4 and not every.unparsed_lines
    levels = [(r.level, r.fields.get("logger"), r.fields.get("level_name")) for r in every.records]
    assert sorted(levels, key=str) == sorted(
        [("INFO", "local", None), ("ERROR", "production", None), ("FATAL", "local", "EMERGENCY"),
         ("WARN", "local", "WARNING")], key=str,
    )  # fmt: skip
    (error,) = search(source, "level:ERROR", lookback=1440).records
    assert error.message.startswith("Target class [Cors] does not exist.")
    assert "#2 {main}" in error.message and error.message.rstrip().endswith('"}')
    assert search(source, "level:FATAL", lookback=1440).match_count == 1


def test_postgresql_statement_durations_are_duration_ms(tmp_path: Path) -> None:
    # `log_min_duration_statement` writes a statement's time in the server log (the shape of
    # Debian's 9.6 with `%m [%p] %q%u@%d `); before, no record had `duration_ms`, so
    # `duration_ms:>30` over a slow-query topic answered NO_EVIDENCE beside a 37 ms statement
    (tmp_path / "pg.log").write_text(
        "2026-12-04 11:36:42.616 UTC [4973] LOG:  database system is ready to accept connections\n"
        "2026-12-04 11:36:43.557 UTC [4983] postgres@shop LOG:  duration: 37.118 ms  statement: "
        'SELECT d.datname as "Name",\n'
        '\t       pg_catalog.pg_get_userbyid(d.datdba) as "Owner"\n'
        "\tFROM pg_catalog.pg_database d;\n"
        "2026-12-04 11:39:40.147 UTC [5502] postgres@shop LOG:  duration: 0.765 ms  statement: "
        "select id from clients;\n"
        "2026-12-04 11:40:02.001 UTC [5502] postgres@shop LOG:  duration: 1204.5 ms  execute "
        "<unnamed>: SELECT * FROM orders WHERE id = $1\n"
        "2026-12-04 11:40:03.001 UTC [5502] postgres@shop LOG:  duration: 3.2 ms\n"
    )
    os.utime(tmp_path / "pg.log", (NOW - 60, NOW - 60))
    source = file_source(
        tmp_path, "postgresql", ["pg.log"], now=NOW, topic=Topic.DATABASE_SLOW_QUERY
    )
    slow = search(source, "duration_ms:>30", lookback=1440)
    assert sorted(r.fields["duration_ms"] for r in slow.records) == [37.118, 1204.5]
    assert search(source, "duration_ms:<1", lookback=1440).match_count == 1
    assert search(source, "duration_ms:*", lookback=1440).match_count == 4
    app = file_source(tmp_path, "postgresql", ["pg.log"], now=NOW)  # APPLICATION names it too
    assert search(app, "duration_ms:>=1000", lookback=1440).match_count == 1


def test_colour_codes_in_a_text_log_are_not_part_of_its_lines(tmp_path: Path) -> None:
    # A program that colours its lines (SGR escapes) when it writes a file, or whose terminal
    # output was captured: before, no line was in its format (a syslog line starting with an
    # escape) and a word split by an escape (`dis<ESC>[41mconnect`) was not found
    (tmp_path / "colour.log").write_bytes(
        b"\x1b[0m\x1b[32mDec  4 \x1b[0m\x1b[1m\x1b[33m11:24:04\x1b[0m\x1b[31m mac \x1b[0m"
        b"\x1b[1m\x1b[31mAMPDeviceDiscoveryAgent\x1b[0m\x1b[1m\x1b[34m[17600]\x1b[0m: Can't "
        b"handle dis\x1b[0m\x1b[41mconnect\x1b[0m with invalid ecid\x1b[0m\n"
        b"\x1b[32m2026-12-04 11:25:00\x1b[0m \x1b[31mERROR\x1b[0m payment failed\n"
    )
    os.utime(tmp_path / "colour.log", (NOW - 60, NOW - 60))
    syslog = search(file_source(tmp_path, "syslog", ["colour.log"], now=NOW), "disconnect")
    (found,) = syslog.records
    assert found.message == "Can't handle disconnect with invalid ecid"
    assert found.fields["app"] == "AMPDeviceDiscoveryAgent" and found.fields["pid"] == "17600"
    plain = search(file_source(tmp_path, "plain", ["colour.log"], now=NOW), "level:ERROR")
    assert [r.message for r in plain.records] == ["payment failed"]


def test_a_coloured_file_last_written_before_the_window_is_chosen_by_its_records(
    tmp_path: Path,
) -> None:
    # the peek that chooses files reads the records' times as the scan does: a coloured
    # file copied with an old mtime over records in the window is read
    (tmp_path / "colour.log").write_bytes(
        b"\x1b[32m2026-12-04 11:50:00\x1b[0m \x1b[31mERROR\x1b[0m payment failed\n"
    )
    os.utime(tmp_path / "colour.log", (NOW - 86_400, NOW - 86_400))
    source = file_source(tmp_path, "plain", ["colour.log"], now=NOW)
    assert search(source, "level:ERROR").match_count == 1


def test_plain_reads_a_level_written_after_the_time_and_a_colon(tmp_path: Path) -> None:
    # Python's `%(asctime)s:%(levelname)s:%(name)s:%(message)s` and its kin; before, no level
    # (`level:WARN` found nothing beside the WARN line)
    (tmp_path / "app.log").write_text(
        "2026-12-04 11:22:40,672:DEBUG:foo bar baz\n"
        "2026-12-04 11:56:38,344:WARN:shop.orders:pool at 90%\n"
        "2026-12-04T11:57:52.071:ERROR:com.root:Response refused\n"
    )
    os.utime(tmp_path / "app.log", (NOW - 60, NOW - 60))
    source = file_source(tmp_path, "plain", ["app.log"], now=NOW)
    levels = [(r.level, r.message) for r in search(source, "").records]
    assert sorted(levels) == [
        ("DEBUG", "foo bar baz"),
        ("ERROR", "com.root:Response refused"),
        ("WARN", "shop.orders:pool at 90%"),
    ]


def test_an_access_lines_fields_beyond_combined_are_kept_as_text(tmp_path: Path) -> None:
    # Common variants of the combined format (the shapes): Apache's `%D` between the size and
    # the referer, lighttpd's extra byte counts, nginx's `"$http_x_forwarded_for"
    # $request_time $upstream_response_time` after the user agent. Before, the referer and
    # user agent were lost when anything stood before them and everything after the combined
    # part was dropped uncounted: a query for the agent answered NO_EVIDENCE
    (tmp_path / "access.log").write_text(
        '192.0.2.9 - - [04/Dec/2026:11:28:24 +0000] "GET /prefix HTTP/1.1" 304 - 3551 "-" '
        '"Mozilla/5.0"\n'
        '198.51.100.71 192.0.2.5 - [04/Dec/2026:11:43:02 +0000] "GET /group.cache.asc '
        'HTTP/1.0" 200 191 367 464 1 "-" "nsscache_0.12"\n'
        '203.0.113.7 - - [04/Dec/2026:11:50:00 +0000] "POST /api/pay HTTP/1.1" 504 167 "-" '
        '"okhttp/4.9" "10.1.2.3" 60.001 60.000\n'
        '203.0.113.8 - - [04/Dec/2026:11:51:00 +0000] "GET / HTTP/1.1" 200 5 "-" "curl/8"\n'
    )
    os.utime(tmp_path / "access.log", (NOW - 60, NOW - 60))
    source = file_source(tmp_path, "nginx_access", ["access.log"], now=NOW)
    assert search(source, "Mozilla").match_count == 1
    (lighttpd,) = search(source, "nsscache").records
    assert lighttpd.fields["user_agent"] == "nsscache_0.12"
    assert lighttpd.fields["extra"] == "367 464 1"
    (slow,) = search(source, '"60.001"').records
    assert slow.fields["user_agent"] == "okhttp/4.9" and slow.fields["http_status"] == 504
    assert slow.fields["extra"] == '"10.1.2.3" 60.001 60.000'
    (plain,) = search(source, "curl").records
    assert "extra" not in plain.fields


def test_hashicorp_agents_indented_lines_are_records(tmp_path: Path) -> None:
    # Nomad's agent (Consul's before 1.7) indents every line by four spaces: each was a
    # continuation of the record before, a whole log one record
    path = tmp_path / "nomad.log"
    path.write_text(
        "==> Nomad agent started! Log data will stream in below:\n"
        "    2026-12-04T11:50:00.000Z [INFO]  agent: started\n"
        '    2026-12-04T11:50:02.000Z [WARN]  client.driver_mgr.docker: failed: error="ctx"\n'
        "    2026/12/04 11:50:03 [ERROR] agent: Coordinate update error: No cluster leader\n"
        "    not a head: an indented line continues its record\n"
    )
    os.utime(path, (NOW - 60, NOW - 60))
    found = search(file_source(tmp_path, "plain", ["nomad.log"], now=NOW), "")
    assert [(r.level, r.message.split(":")[0]) for r in found.records] == [
        ("INFO", "agent"), ("WARN", "client.driver_mgr.docker"), ("ERROR", "agent"),
    ]  # fmt: skip
    assert found.records[2].message.endswith(
        "\n    not a head: an indented line continues its record"
    )
