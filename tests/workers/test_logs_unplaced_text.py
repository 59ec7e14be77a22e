"""Text a format's layout does not place is kept, never dropped silently (issue 31).

`log4j` read the time, the level, a thread and a logger; any other text between the time and
the level (Sidekiq's `pid=3480 tid=1ps class=ChargeJob jid=...`, BIND's category, a user and
database) was dropped: a query for a word that stood only there answered NO_EVIDENCE while the
line held it, and `check` said nothing (the levels read fine). Samples are byte-exact output of
the programs (tests/workers/logs_samples/README.md); the others are layouts written here."""

from __future__ import annotations

import os
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

from logs_helpers import file_source, search

from contracts import LogsUpstream
from workers.sources.logs.check import check_logs
from workers.sources.logs.config import parse_logs_config

SAMPLES = Path(__file__).parent / "logs_samples"
NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC).timestamp()


def read(tmp_path: Path, fmt: str, name: str, query: str = "", text: str = "") -> LogsUpstream:
    if text:
        (tmp_path / name).write_text(text)
    else:
        shutil.copy(SAMPLES / name, tmp_path / name)
    os.utime(tmp_path / name, (NOW - 300, NOW - 300))
    return search(file_source(tmp_path, fmt, [name], now=NOW), query, lookback=1440 * 3)


def test_log4j_keeps_sidekiqs_context_before_the_level(tmp_path: Path) -> None:
    # before: 0 matches; the job id stood only between the time and the level
    found = read(tmp_path, "log4j", "sidekiq.log", "60a238974935593333b16e06 o-1042")
    # `charging o-1042`, `gateway slow for o-1042`, the failed job's context (its JSON)
    assert found.match_count == 3
    slow = next(r for r in found.records if r.level == "WARN")
    assert slow.message == "gateway slow for o-1042"
    assert slow.fields["prefix"] == "pid=3480 tid=1ps class=ChargeJob jid=60a238974935593333b16e06"
    assert read(tmp_path, "log4j", "sidekiq.log", "1ps").match_count == 11
    # `pid` is a log4j field: a query naming it finds Sidekiq's `pid=3480` (not NO_EVIDENCE)
    assert slow.fields["pid"] == "3480"
    assert read(tmp_path, "log4j", "sidekiq.log", "pid:3480 level:warn").match_count == 5


def test_log4j_keeps_binds_category(tmp_path: Path) -> None:
    # before: `zoneload` found nothing under log4j, though 16 lines begin with it
    found = read(tmp_path, "log4j", "named.log", "zoneload level:error")
    assert found.match_count == 2
    assert {r.fields["prefix"] for r in found.records} == {"zoneload:"}


def test_log4j_reads_a_dotted_name_before_the_level_as_the_logger(tmp_path: Path) -> None:
    # Python's logging cookbook `%(asctime)s - %(name)s - %(levelname)s - %(message)s`: before,
    # `shop.orders` was dropped
    (error,) = read(tmp_path, "log4j", "python_logging.log", "level:error shop.orders").records
    assert error.message.startswith("charge failed for order o-1042")
    assert error.fields["logger"] == "shop.orders"


def test_log4j_keeps_a_user_and_database_and_spring_boots_pid(tmp_path: Path) -> None:
    (duplicate,) = read(tmp_path, "log4j", "postgresql.log", "postgres@test duplicate").records
    assert duplicate.fields["prefix"] == "UTC postgres@test"  # `[16762]` read as the thread
    spring = (
        "2026-12-05 11:33:29.676 ERROR 12345 --- [nio-8080-exec-1] c.s.o.OrderService"
        "               : charge failed for o-1042\n"
    )
    (failed,) = read(tmp_path, "log4j", "spring.log", "12345", text=spring).records
    assert failed.message == "charge failed for o-1042"
    assert failed.fields == {
        "pid": "12345", "thread": "nio-8080-exec-1", "logger": "c.s.o.OrderService",
    }  # fmt: skip


def test_log4j_layouts_it_places_carry_no_prefix(tmp_path: Path) -> None:
    for name in ("log4j_iso.log", "log4j2_default.log", "logback.log", "logback_level_first.log"):
        found = read(tmp_path, "log4j", name)
        assert found.match_count and not any("prefix" in r.fields for r in found.records), name


def test_oslo_keeps_the_request_context_beyond_its_request_id(tmp_path: Path) -> None:
    # `[None req-38101a0b-... 113d3a99 54fadb41 - - - -]`: the user and project ids were dropped
    (failed,) = read(tmp_path, "oslo", "oslo_nova.log", "113d3a99").records
    assert failed.fields["request_id"] == "req-38101a0b-2096-447d-96ea-a692162415ae"
    assert failed.fields["context"] == (
        "None req-38101a0b-2096-447d-96ea-a692162415ae 113d3a99 54fadb41 - - - -"
    )


def test_check_says_log4j_lines_carry_text_it_does_not_place_and_what_reads_them(
    tmp_path: Path,
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(SAMPLES / "sidekiq.log", logs / "sidekiq.log")
    shutil.copy(SAMPLES / "named.log", logs / "named.log")
    shutil.copy(SAMPLES / "logback.log", logs / "logback.log")  # a layout log4j places: quiet
    config = parse_logs_config(
        f'roots = ["{logs}"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "log4j"\n'
        f'paths = ["{logs}/*.log"]\n'
    )
    (topic,) = check_logs(config, time.time())
    problems = [p for p in topic.problems() if "does not place" in p]
    assert sorted(problems) == [
        f"APPLICATION: {logs}/named.log: 20 of 20 records carry text format log4j does not "
        'place (kept in field prefix; the first: "zoneload:"): format = "plain" reads them',
        f"APPLICATION: {logs}/sidekiq.log: 19 of 19 records carry text format log4j does not "
        'place (kept in field prefix; the first: "pid=3480 tid=1ts"): format = "plain" reads '
        "them",
    ]


def test_postgresql_keeps_a_prefix_beyond_its_user_and_database(tmp_path: Path) -> None:
    # pgBadger's recommended `log_line_prefix = '%t [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h '`:
    # before, the application and client were dropped (`10.0.0.7` found nothing)
    text = (
        "2026-12-04 17:01:20 UTC [16762]: [3-1] user=app,db=orders,app=psql,client=10.0.0.7 "
        'ERROR:  duplicate key value violates unique constraint "orders_pkey"\n'
    )
    (failed,) = read(tmp_path, "postgresql", "pg.log", "10.0.0.7", text=text).records
    assert failed.message.startswith("duplicate key value")
    assert failed.fields == {
        "pid": "16762", "user": "app", "database": "orders", "application_name": "psql",
        "connection_from": "10.0.0.7", "session_line_num": "3",
    }  # fmt: skip
    # `%m [%p] %q%u@%d %a `: the application name unnamed, kept as written
    text = (
        "2026-12-04 17:01:21.011 UTC [16764] postgres@test psql ERROR:  syntax error at or "
        'near "SELEC" at character 1\n'
    )
    (failed,) = read(tmp_path, "postgresql", "pg2.log", "psql", text=text).records
    assert failed.fields["prefix"] == "postgres@test psql"
    # Debian's default `%m [%p] %q%u@%d `: all of it placed, no prefix
    every = read(tmp_path, "postgresql", "postgresql.log")
    assert every.match_count and not any("prefix" in r.fields for r in every.records)


def test_syslog_keeps_rfc5424s_msgid(tmp_path: Path) -> None:
    # RFC 5424's own example: before, `ID47` (the MSGID) was dropped
    text = (
        "<34>1 2026-12-05T11:14:15.003Z mymachine.example.com su - ID47 - "
        "'su root' failed for lonvick on /dev/pts/8\n"
    )
    (failed,) = read(tmp_path, "syslog", "messages", "ID47", text=text).records
    assert failed.message == "'su root' failed for lonvick on /dev/pts/8"
    assert failed.fields["msgid"] == "ID47"


def test_plain_keeps_the_number_after_the_time(tmp_path: Path) -> None:
    # MariaDB's thread id (`2026-12-04 11:33:56 0 [Note] ...`), oslo's pid read as plain: before,
    # dropped (`574` found nothing in oslo_nova.log under plain)
    found = read(tmp_path, "plain", "oslo_nova.log", "574 level:error")
    assert found.match_count == 8 and {r.fields["thread"] for r in found.records} == {"574"}
    note = read(tmp_path, "plain", "plain_mariadb.err", "InnoDB").records[0]
    assert note.fields["thread"] == "0"


def test_apache_and_nginx_error_logs_keep_the_thread_id(tmp_path: Path) -> None:
    # `[pid 31503:tid 140234567]` and nginx's `pid#tid`: before, the thread id was dropped
    apache = (
        "[Fri Dec 04 11:32:48.028515 2026] [proxy:error] [pid 31503:tid 140234567] "
        "[client 10.0.0.7:5123] AH00957: HTTP: attempt to connect to 127.0.0.1:1 failed\n"
    )
    (failed,) = read(tmp_path, "apache_error", "error_log", "140234567", text=apache).records
    assert failed.fields["thread"] == "140234567" and failed.fields["pid"] == "31503"
    nginx = "2026/12/04 11:32:57 [error] 31850#31851: *1 connect() failed (111: refused)\n"
    (refused,) = read(tmp_path, "nginx_error", "error.log", "31851", text=nginx).records
    assert refused.fields["thread"] == "31851" and refused.fields["pid"] == "31850"


def test_an_access_logs_identd_user_is_kept(tmp_path: Path) -> None:
    # `%h %l %u`: the RFC 1413 identity (`%l`, Apache's IdentityCheck) was read past, dropped
    text = (
        '10.0.0.7 orders-svc frank [05/Dec/2026:11:40:00 +0000] "GET /api/charge HTTP/1.1" '
        "503 236\n"
    )
    (failed,) = read(tmp_path, "apache_access", "access.log", "orders-svc", text=text).records
    assert failed.fields["ident"] == "orders-svc" and failed.fields["user"] == "frank"


def test_check_says_postgresql_prefix_text_it_does_not_place(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "pg.log").write_text(
        "2026-12-04 17:01:21.011 UTC [16764] postgres@test psql ERROR:  syntax error at or "
        'near "SELEC" at character 1\n'
    )
    config = parse_logs_config(
        f'roots = ["{logs}"]\n[topics.DATABASE_SLOW_QUERY]\nbackend = "file"\n'
        f'format = "postgresql"\npaths = ["{logs}/*.log"]\n'
    )
    (topic,) = check_logs(config, time.time())
    assert topic.problems() == [  # no named format places it: said, none proposed
        f"DATABASE_SLOW_QUERY: {logs}/pg.log: 1 of 1 records carry text format postgresql does "
        'not place (kept in field prefix; the first: "postgres@test psql")'
    ]
