"""Shapes of the database servers' own logs that Elastic's Filebeat modules parse (MySQL's
and MariaDB's error and slow logs, PostgreSQL's, Redis's) and a named format must read too.

As in `test_logs_filebeat_shapes.py`: the lines are written here in the shapes of the samples
Filebeat's modules ship (elastic/beats, `filebeat/module/<module>/<fileset>/test/*.log`,
Apache-2.0) with our own hosts, times and statements, and each test compares what `query_logs`
reads with what Filebeat's ingest pipeline makes of the same shape."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from logs_helpers import search_written

from contracts import LogsUpstream, Topic

NOW = datetime(2026, 12, 4, 20, 0, tzinfo=UTC).timestamp()
SLOW = Topic.DATABASE_SLOW_QUERY


def read(
    tmp_path: Path, fmt: str, text: str, query: str = "", topic: Topic = Topic.APPLICATION
) -> LogsUpstream:
    return search_written(tmp_path, fmt, text, query, now=NOW, topic=topic)


# MySQL's error log before 5.7 (5.5, 5.6; MariaDB before 10.1: CentOS 7's `mariadb.log`) stamps
# `yymmdd hh:mm:ss`, the hour padded with a space (`%2d`); MySQL 8's default log sink writes
# `[System]` for its start and shutdown lines. Shapes of filebeat/module/mysql/error/test/
# mysql-ubuntu-5.5.53.log, mariadb-10.4.8.log and mysql-ubuntu-8.0.15.log (elastic/beats,
# Apache-2.0), our own messages.
MYSQL_55 = (
    "261204 19:18:50 [Warning] Using unique option prefix myisam-recover instead of"
    " myisam-recover-options is deprecated\n"
    "261204 19:18:50  InnoDB: Initializing buffer pool, size = 128.0M\n"
    "261204 19:18:53 [ERROR] /usr/libexec/mysqld: Table './shop/orders' is marked as crashed"
    " and should be repaired\n"
    "261204  9:46:45 [Note] /usr/libexec/mysqld: ready for connections.\n"
)
MYSQL_8 = (
    "2026-12-04T19:44:31.085670Z 0 [System] [MY-010116] [Server] /usr/sbin/mysqld (mysqld"
    " 8.0.40) starting as process 1688\n"
    "2026-12-04T19:44:31.533096Z 0 [Warning] [MY-010068] [Server] CA certificate ca.pem is self"
    " signed.\n"
    "2026-12-04T19:44:33.236624Z 7 [ERROR] [MY-013183] [InnoDB] Assertion failure: ibuf0ibuf.cc\n"
)


def test_mysql_5_5_error_log_stamps_are_read(tmp_path: Path) -> None:
    every = read(tmp_path, "plain", MYSQL_55)
    assert every.match_count == 4 and not every.unparsed_lines  # before: an EXECUTION error
    assert sorted((r.timestamp, r.level) for r in every.records) == [
        ("2026-12-04T09:46:45.000Z", "INFO"), ("2026-12-04T19:18:50.000Z", ""),
        ("2026-12-04T19:18:50.000Z", "WARN"), ("2026-12-04T19:18:53.000Z", "ERROR"),
    ]  # fmt: skip
    crashed = read(tmp_path, "plain", MYSQL_55, "crashed level:error")
    assert crashed.match_count == 1


# MariaDB 10.x (Debian 12's 10.11, the default `mysql` there) stamps `%Y-%m-%d %2d:%02d:%02d`:
# before 10:00 the hour is padded with a space, so the night's lines (`2026-12-04  8:52:32`)
# were not in the format and every record of them was level-less text. Shape of the error log
# MariaDB 10.11.19 wrote on this project's own test machine, our own users and hosts.
MARIADB_10 = (
    "2026-12-04  3:46:17 0 [Note] Starting MariaDB 10.11.19-MariaDB-0+deb12u1 as process 3834\n"
    "2026-12-04  3:46:17 0 [Note] /usr/sbin/mariadbd: ready for connections.\n"
    "Version: '10.11.19-MariaDB-0+deb12u1'  socket: '/run/mysqld/mysqld.sock'  port: 3306\n"
    "2026-12-04  8:52:32 18 [Warning] Access denied for user 'shop'@'10.0.0.7' (using password:"
    " YES)\n"
    "2026-12-04 18:52:38 21 [ERROR] Aborted connection 21 to db: 'shop' user: 'shop'\n"
)


def test_mariadb_10_error_log_hours_before_ten_are_read(tmp_path: Path) -> None:
    every = read(tmp_path, "plain", MARIADB_10)
    assert sorted((r.timestamp, r.level) for r in every.records if r.timestamp) == [
        ("2026-12-04T03:46:17.000Z", "INFO"), ("2026-12-04T03:46:17.000Z", "INFO"),
        ("2026-12-04T08:52:32.000Z", "WARN"), ("2026-12-04T18:52:38.000Z", "ERROR"),
    ]  # fmt: skip
    assert every.unparsed_lines == 1  # the `Version:` banner only
    denied = read(tmp_path, "plain", MARIADB_10, '"Access denied" level:warn')
    assert denied.match_count == 1 and denied.records[0].message.startswith("Access denied")


def test_mysql_8_system_lines_are_info(tmp_path: Path) -> None:
    every = read(tmp_path, "plain", MYSQL_8)
    assert every.match_count == 3 and not every.unparsed_lines
    levels = {r.timestamp: (r.level, r.message[:12]) for r in every.records}
    assert levels["2026-12-04T19:44:31.085Z"] == ("INFO", "[MY-010116] ")  # before: no level
    assert levels["2026-12-04T19:44:33.236Z"] == ("ERROR", "[MY-013183] ")
    assert read(tmp_path, "plain", MYSQL_8, "level:info starting").match_count == 1


# MariaDB's slow log with `log_slow_verbosity=explain` (or `query_plan,explain`) writes its
# EXPLAIN between bare `#` lines; every slow log opens with the server's banner. Shape of
# filebeat/module/mysql/slowlog/test/mariadb-explain.log and mariadb-10.3.13.log
# (elastic/beats, Apache-2.0), our own statement.
MARIADB_EXPLAIN = (
    "/usr/sbin/mariadbd, Version: 10.11.6-MariaDB-log (MariaDB Server). started with:\n"
    "Tcp port: 3306  Unix socket: /run/mysqld/mysqld.sock\n"
    "Time\t\t    Id Command\tArgument\n"
    "# Time: 261204 19:03:32\n"
    "# User@Host: shop[shop] @ localhost []\n"
    "# Thread_id: 2  Schema: shop  QC_hit: No\n"
    "# Query_time: 5.524103  Lock_time: 0.000337  Rows_sent: 1  Rows_examined: 65633\n"
    "#\n"
    "# explain: id\tselect_type\ttable\ttype\tpossible_keys\tkey\tkey_len\tref\trows\tExtra\n"
    "# explain: 1\tSIMPLE\torders\tALL\tNULL\tNULL\tNULL\tNULL\t65633\tUsing where\n"
    "#\n"
    "SET timestamp=1796411012;\n"
    "select count(*) from orders\n"
    "  where tenant='t-7';\n"
)


def test_a_mariadb_slow_statement_with_its_explain_is_one_record(tmp_path: Path) -> None:
    every = read(tmp_path, "mysql_slow", MARIADB_EXPLAIN, topic=SLOW)
    assert every.match_count == 1 and not every.unparsed_lines  # before: 2 records, 1 unparsed
    (slow,) = every.records
    assert slow.message == "select count(*) from orders\n  where tenant='t-7';"
    assert slow.timestamp == "2026-12-04T19:03:32.000Z"  # SET timestamp
    assert (slow.fields["duration_ms"], slow.fields["schema"]) == (5524.103, "shop")
    found = read(tmp_path, "mysql_slow", MARIADB_EXPLAIN, "duration_ms:>5000 orders", SLOW)
    assert found.match_count == 1


# PostgreSQL on Debian and Ubuntu before 10 logs with `log_line_prefix = '%t [%p-%l] %q%u@%d '`
# (the session line number after the pid); `log_error_verbosity = verbose` writes the SQLSTATE
# before each message and a `LOCATION:` line after it. Shapes of filebeat/module/postgresql/
# log/test/postgresql-9.6-multi-core.log and postgresql-11.4.log (elastic/beats, Apache-2.0).
POSTGRESQL_96 = (
    "2026-12-04 19:14:01 CEST [12975-1] [unknown]@[unknown] LOG:  incomplete startup packet\n"
    '2026-12-04 19:16:03 CEST [5404-1] shop@orders FATAL:  database "orders" does not exist\n'
    "2026-12-04 19:39:21 CEST [5404-2] shop@shop LOG:  duration: 1237.598 ms  statement: SELECT"
    " n.nspname\n"
    "\t  FROM pg_catalog.pg_class c\n"
    "2026-12-04 19:41:38 CEST [832-1] LOG:  checkpoints are occurring too frequently (25 seconds"
    " apart)\n"
    '2026-12-04 19:41:38 CEST [832-2] HINT:  Consider increasing "max_wal_size".\n'
)
POSTGRESQL_VERBOSE = (
    "2026-12-04 19:06:33.732 UTC [44] ERROR:  42704: unrecognized configuration parameter"
    ' "config_filel"\n'
    "2026-12-04 19:06:33.732 UTC [44] LOCATION:  GetConfigOptionByName, guc.c:8342\n"
    "2026-12-04 19:06:33.732 UTC [44] STATEMENT:  show config_filel;\n"
    "2026-12-04 19:06:34.878 UTC [44] LOG:  00000: duration: 2500.524 ms  statement: select 1\n"
    "2026-12-04 19:06:34.878 UTC [44] LOCATION:  exec_simple_query, postgres.c:1219\n"
)


def test_postgresql_with_debian_s_old_line_prefix(tmp_path: Path) -> None:
    every = read(tmp_path, "postgresql", POSTGRESQL_96)
    assert every.match_count == 4 and not every.unparsed_lines  # before: an EXECUTION error
    times = sorted((r.timestamp, r.level) for r in every.records)
    assert times == [
        ("2026-12-04T17:14:01.000Z", "INFO"), ("2026-12-04T17:16:03.000Z", "FATAL"),
        ("2026-12-04T17:39:21.000Z", "INFO"), ("2026-12-04T17:41:38.000Z", "INFO"),
    ]  # fmt: skip
    slow = read(tmp_path, "postgresql", POSTGRESQL_96, "duration_ms:>1000")
    assert slow.match_count == 1 and slow.records[0].fields["database"] == "shop"
    (checkpoint,) = read(tmp_path, "postgresql", POSTGRESQL_96, "checkpoints").records
    assert checkpoint.message.endswith('HINT:  Consider increasing "max_wal_size".')


def test_postgresql_verbose_errors_keep_their_sqlstate_and_duration(tmp_path: Path) -> None:
    every = read(tmp_path, "postgresql", POSTGRESQL_VERBOSE)
    assert every.match_count == 2 and not every.unparsed_lines
    slow = read(tmp_path, "postgresql", POSTGRESQL_VERBOSE, "duration_ms:>1000")
    assert slow.match_count == 1  # before: no duration_ms after the SQLSTATE
    (error,) = read(tmp_path, "postgresql", POSTGRESQL_VERBOSE, "sql_state:42704").records
    assert error.level == "ERROR" and error.message.startswith("unrecognized configuration")


# Redis before 4.0 (3.0 on Ubuntu 16.04, 3.2 in EPEL for CentOS 7) stamps without a year; every
# Redis up to 7 writes why it stops from its signal handler, timed in epoch seconds; Redis 2.x
# writes `[pid]` first. Shapes of filebeat/module/redis/log/test/redis-darwin-3.0.2.log,
# redis-windows-2.4.6.log and test.log (elastic/beats, Apache-2.0), our own messages.
REDIS_32 = (
    "4961:M 04 Dec 19:50:13.463 # Server started, Redis version 3.2.12\n"
    "4961:M 04 Dec 19:50:13.464 * The server is now ready to accept connections on port 6379\n"
    "4961:signal-handler (1796413961) Received SIGTERM scheduling shutdown...\n"
    "4961:M 04 Dec 19:52:41.448 # User requested shutdown...\n"
    "[2932] 04 Dec 19:53:08.101 * Server started, Redis version 2.8.4\n"
)


def test_redis_before_4_and_its_signal_handler_are_read(tmp_path: Path) -> None:
    every = read(tmp_path, "redis", REDIS_32)
    assert every.match_count == 5 and not every.unparsed_lines  # before: an EXECUTION error
    times = sorted((r.timestamp, r.level) for r in every.records)
    assert times == [
        ("2026-12-04T19:50:13.463Z", "WARN"), ("2026-12-04T19:50:13.464Z", "INFO"),
        ("2026-12-04T19:52:41.000Z", "WARN"), ("2026-12-04T19:52:41.448Z", "WARN"),
        ("2026-12-04T19:53:08.101Z", "INFO"),
    ]  # fmt: skip
    (stop,) = read(tmp_path, "redis", REDIS_32, "SIGTERM").records
    assert stop.message == "Received SIGTERM scheduling shutdown..."
    assert stop.fields["pid"] == "4961"


# Percona Server and MariaDB write `Schema:` with nothing after it when a statement ran in no
# database. Shapes of filebeat/module/mysql/slowlog/test/percona-ubuntu-5.7.19-innodb.log and
# mariadb-10.1.21.log (elastic/beats, Apache-2.0), our own statements.
SLOW_NO_SCHEMA = (
    "# Time: 2026-12-04T19:36:03.868128Z\n"
    "# User@Host: exporter[exporter] @ localhost []  Id: 14367293\n"
    "# Schema:   Last_errno: 1370  Killed: 0\n"
    "# Query_time: 0.050365  Lock_time: 0.010733  Rows_sent: 16  Rows_examined: 3146\n"
    "SET timestamp=1796412963;\n"
    "SELECT table_name FROM information_schema.tables;\n"
    "# Time: 261204 19:37:36\n"
    "# User@Host: root[root] @ localhost [127.0.0.1]\n"
    "# Thread_id: 5  Schema:   QC_hit: No\n"
    "# Query_time: 2.000652  Lock_time: 0.000000  Rows_sent: 1  Rows_examined: 0\n"
    "SET timestamp=1796413056;\n"
    "select sleep(2);\n"
)


def test_an_empty_slow_log_schema_is_no_schema(tmp_path: Path) -> None:
    every = read(tmp_path, "mysql_slow", SLOW_NO_SCHEMA, topic=SLOW)
    assert every.match_count == 2
    assert [r.fields.get("schema") for r in every.records] == [None, None]  # before: the next key
    assert read(tmp_path, "mysql_slow", SLOW_NO_SCHEMA, "schema:QC_hit", SLOW).match_count == 0
