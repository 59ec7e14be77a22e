"""`format = "postgresql_csv"`: PostgreSQL's `log_destination = 'csvlog'`, 23 columns
(9.0 to 12), 24 (13: backend_type) or 26 (14+: leader_pid, query_id); a quoted value may span
lines; read as the `postgresql` text format reads its reports (level, duration_ms, zones)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from logs_helpers import file_source, search, search_written

from workers.sources.logs.check import check_logs
from workers.sources.logs.config import parse_logs_config
from workers.sources.logs.formats import make_parser

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC).timestamp()

PG11 = (  # 23 columns
    '2026-12-04 11:33:20.123 UTC,"app","shop",4321,"10.0.0.7:51234",656d8f10.10e1,3,"SELECT",'
    '2026-12-04 11:30:00 UTC,3/17,0,LOG,00000,"duration: 1837.118 ms  statement: SELECT * FROM '
    'orders WHERE id = 7",,,,,,,,,"psql"\n'
    '2026-12-04 11:33:21.004 UTC,"app","shop",4321,"10.0.0.7:51234",656d8f10.10e1,4,"INSERT",'
    '2026-12-04 11:30:00 UTC,3/18,0,ERROR,23505,"duplicate key value violates unique constraint '
    '""orders_pkey""","Key (id)=(7) already exists.",,,,,"INSERT INTO orders (id) VALUES (7);",'
    ',,"psql"\n'
)
PG13 = (  # 24 columns: backend_type; a statement over three lines
    '2026-12-04 11:34:00.500 CET,"app","shop",5000,"[local]",656d9000.1388,1,"UPDATE",'
    '2026-12-04 11:33:59 CET,4/2,0,LOG,00000,"duration: 12.5 ms  statement: UPDATE orders\n'
    "   SET paid = true\n"
    '   WHERE id = 7",,,,,,,,,"worker","client backend"\n'
)
PG14 = (  # 26 columns: leader_pid, query_id
    "2026-12-04 11:35:00.000 UTC,,,77,,656d9100.4d,1,,2026-12-04 11:00:00 UTC,,0,FATAL,57P01,"
    '"terminating connection due to administrator command",,,,,,,,,"","autovacuum worker",,'
    "-4090236453281329000\n"
)


def test_csvlog_columns_of_three_versions(tmp_path: Path) -> None:
    found = search_written(tmp_path, "postgresql_csv", PG11 + PG13 + PG14, now=NOW)
    assert found.match_count == 4 and not found.unparsed_lines
    update, slow, dup, fatal = sorted(found.records, key=lambda r: r.timestamp)  # CET first
    assert slow.timestamp == "2026-12-04T11:33:20.123Z" and slow.level == "INFO"
    assert slow.message == "duration: 1837.118 ms  statement: SELECT * FROM orders WHERE id = 7"
    assert slow.fields["duration_ms"] == 1837.118
    assert (slow.fields["user"], slow.fields["database"], slow.fields["pid"]) == (
        "app",
        "shop",
        "4321",
    )
    assert slow.fields["application_name"] == "psql" and slow.fields["command_tag"] == "SELECT"
    assert slow.fields["connection_from"] == "10.0.0.7:51234"
    assert dup.level == "ERROR" and dup.fields["sql_state"] == "23505"
    assert dup.message == (
        'duplicate key value violates unique constraint "orders_pkey"\n'
        "DETAIL:  Key (id)=(7) already exists.\n"
        "STATEMENT:  INSERT INTO orders (id) VALUES (7);"
    )  # as the `postgresql` text format joins a report's parts
    assert update.timestamp == "2026-12-04T10:34:00.500Z"  # CET: +01:00
    assert update.message.endswith("UPDATE orders\n   SET paid = true\n   WHERE id = 7")
    assert update.fields["duration_ms"] == 12.5
    assert update.fields["backend_type"] == "client backend"
    assert fatal.level == "FATAL" and fatal.fields["backend_type"] == "autovacuum worker"
    assert fatal.fields["query_id"] == "-4090236453281329000" and "user" not in fatal.fields


def test_csvlog_fields_are_queried_as_the_text_formats(tmp_path: Path) -> None:
    text = PG11 + PG13 + PG14
    assert (
        search_written(tmp_path, "postgresql_csv", text, "duration_ms:>1000", now=NOW).match_count
        == 1
    )
    assert (
        search_written(tmp_path, "postgresql_csv", text, "sql_state:23505", now=NOW).match_count
        == 1
    )
    assert (
        search_written(tmp_path, "postgresql_csv", text, "already exists", now=NOW).match_count == 1
    )
    assert search_written(tmp_path, "postgresql_csv", text, "level:fatal", now=NOW).match_count == 1
    assert search_written(tmp_path, "postgresql_csv", text, "paid", now=NOW).match_count == 1


def test_an_ambiguous_zone_is_the_topic_timezone(tmp_path: Path) -> None:
    line = PG14.replace("UTC,", "CST,")  # US Central, China or Cuba: the topic says which
    (tmp_path / "sample.log").write_text(line)
    extra = 'timezone = "Asia/Shanghai"'
    source = file_source(tmp_path, "postgresql_csv", ["sample.log"], now=NOW, extra=extra)
    (record,) = search(source, "", 1440).records
    assert record.timestamp == "2026-12-04T11:35:00.000+08:00"


def test_a_password_in_a_statement_is_masked(tmp_path: Path) -> None:
    line = (
        '2026-12-04 11:36:00.000 UTC,"postgres","postgres",90,"[local]",656d9200.5a,2,'
        '"ALTER ROLE",2026-12-04 11:35:00 UTC,5/3,0,LOG,00000,"statement: ALTER ROLE app '
        'PASSWORD \'hunter2secret\'",,,,,,,,,"psql"\n'
    )
    found = search_written(tmp_path, "postgresql_csv", line, "ALTER ROLE", now=NOW)
    assert found.match_count == 1 and "hunter2secret" not in repr(found)


def test_lines_not_in_the_format_are_counted() -> None:
    parser = make_parser("postgresql_csv", {}, UTC, "", "auto", int(NOW * 1000))
    assert parser.feed("2026-12-04 11:33:20.123 UTC [4321] LOG:  a text log line\n") == []
    assert parser.feed("not,a,csvlog,line\n") == []
    assert parser.feed('2026-12-04 11:33:20 UTC,"a","b",1,"x",s,1,"",t,v,0,LOG,00000,"m"\n') == []
    assert parser.failed == 3
    # an unclosed quote: the record ends at the file's end, its lines counted
    assert parser.feed('2026-12-04 11:33:20.123 UTC,"app","shop",4321,"[local]",s,1,"x\n') == []
    assert parser.feed("never closed\n") == []
    assert parser.flush() == [] and parser.failed == 5
    # and the parser reads on after a bad record
    (entry,) = parser.feed(PG14) + parser.flush()
    assert entry.level == "FATAL"


def test_check_suggests_postgresql_csv_for_a_csvlog_read_as_postgresql(tmp_path: Path) -> None:
    (tmp_path / "postgresql.csv").write_text(PG11 + PG13 + PG14)
    config = parse_logs_config(
        f'roots = ["{tmp_path}"]\n[topics.DATABASE_SLOW_QUERY]\nbackend = "file"\n'
        f'format = "postgresql"\npaths = ["{tmp_path}/*.csv"]\n'
    )
    (topic,) = check_logs(config, time.time())
    (file,) = topic.sources[0].files
    assert file.better == "postgresql_csv"
    assert any('format = "postgresql_csv"' in problem for problem in topic.problems())


def test_check_names_an_ambiguous_zone_the_topic_does_not_call_itself(tmp_path: Path) -> None:
    (tmp_path / "postgresql.csv").write_text(PG14.replace("UTC,", "CST,"))
    config = parse_logs_config(
        f'roots = ["{tmp_path}"]\n[topics.DATABASE_SLOW_QUERY]\nbackend = "file"\n'
        f'format = "postgresql_csv"\npaths = ["{tmp_path}/*.csv"]\n'
    )
    (topic,) = check_logs(config, time.time())
    assert topic.sources[0].files[0].foreign_zone == "CST"
    assert any("times written in zone CST" in problem for problem in topic.problems())


def test_a_statement_longer_than_the_csv_modules_default_field_limit_is_read() -> None:
    statement = "SELECT " + ", ".join(f"c{i}" for i in range(40_000)) + " FROM wide"  # 300 kB
    line = PG11.splitlines()[0].replace("SELECT * FROM orders WHERE id = 7", statement) + "\n"
    parser = make_parser("postgresql_csv", {}, UTC, "", "auto", int(NOW * 1000))
    (entry,) = parser.feed(line)
    assert entry.message.endswith("c39999 FROM wide") and entry.fields["duration_ms"] == 1837.118


def test_each_line_of_a_row_not_in_the_format_is_matched_as_text(tmp_path: Path) -> None:
    # a row over three lines of another number of columns (a csvlog of an unknown version, a
    # row cut short and its quote closed by a later one), and a quote left open to the end:
    # each line is counted as not in the format, and so each must be matched as text as the
    # answer's note says; before, only the line that ended the row was (kaboom found nothing)
    text = (
        '2026-12-04 11:33:20.123 UTC,"app","shop",4321,"[local]",s,1,"x",t,v,0,ERROR,XX000,"kaboom'
        ' one\n   two\n   three",,,\n' + PG14 + '2026-12-04 11:36:00.000 UTC,"app","shop",1,"x,'
        "\nzapped at the end\n"
    )
    every = search_written(tmp_path, "postgresql_csv", text, "", now=NOW)
    assert every.match_count == 1 and every.unparsed_lines == 5
    assert search_written(tmp_path, "postgresql_csv", text, "kaboom", now=NOW).match_count == 1
    assert search_written(tmp_path, "postgresql_csv", text, "two", now=NOW).match_count == 1
    assert search_written(tmp_path, "postgresql_csv", text, "zapped", now=NOW).match_count == 1


def test_a_row_cut_short_by_a_crash_takes_no_rows_after_it(tmp_path: Path) -> None:
    # the server killed mid-write leaves a row's quote open; the rows written after the restart
    # each close their own quotes: they are records, only the cut line is not in the format.
    # Before, every line to the file's end (or 1,000 lines, 64 KiB) was the open row's, no
    # record: the restart's FATAL was no record (level:fatal found nothing)
    cut = '2026-12-04 11:34:59.000 UTC,"app","shop",4321,"[local]",s,1,"x",t,v,0,LOG,00000,"stat'
    for after in (PG14 + PG11, (PG14 + PG11) * 400):
        every = search_written(tmp_path, "postgresql_csv", cut + "\n" + after, "", now=NOW)
        assert every.match_count == after.count("\n") and every.unparsed_lines == 1
        fatal = search_written(
            tmp_path, "postgresql_csv", cut + "\n" + after, "level:fatal", now=NOW
        )
        assert fatal.match_count == after.count("\n") // 3
