"""`format = "w3c"`: the W3C extended log format of IIS and CloudFront, its columns named by
each `#Fields:` directive (which may change mid-file), times in UTC, `-` empty."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from logs_helpers import file_source, search, search_written

from workers.sources.logs.check import check_logs
from workers.sources.logs.config import parse_logs_config
from workers.sources.logs.formats import make_parser

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC).timestamp()

IIS_HEAD = (
    "#Software: Microsoft Internet Information Services 10.0\n#Version: 1.0\n"
    "#Date: 2026-12-04 11:30:00\n"
)
DEFAULT_FIELDS = (
    "#Fields: date time s-ip cs-method cs-uri-stem cs-uri-query s-port cs-username c-ip "
    "cs(User-Agent) cs(Referer) sc-status sc-substatus sc-win32-status time-taken\n"
)
FULL_FIELDS = (
    "#Fields: date time s-sitename s-computername s-ip cs-method cs-uri-stem cs-uri-query "
    "s-port cs-username c-ip cs-version cs(User-Agent) cs(Cookie) cs(Referer) cs-host "
    "sc-status sc-substatus sc-win32-status sc-bytes cs-bytes time-taken\n"
)
IIS = (
    IIS_HEAD + DEFAULT_FIELDS + "2026-12-04 11:30:01 10.0.0.5 GET /orders q=1 443 - 203.0.113.9 "
    "Mozilla/5.0+(Windows+NT+10.0;+Win64;+x64) - 200 0 0 15\n"
    "2026-12-04 11:30:02 10.0.0.5 POST /orders/pay - 443 alice 203.0.113.9 "
    "Mozilla/5.0+(Windows+NT+10.0;+Win64;+x64) https://shop.example/cart 500 0 0 1834\n"
    # IIS restarted: a new header, other columns
    + IIS_HEAD
    + FULL_FIELDS
    + "2026-12-04 11:31:00 W3SVC1 WEB01 10.0.0.5 GET /missing - 80 - 198.51.100.7 HTTP/1.1 "
    "curl/8.5.0 ASP.NET_SessionId=abc123secret - shop.example 404 0 2 1234 210 7\n"
)


def test_iis_columns_follow_each_fields_directive(tmp_path: Path) -> None:
    found = search_written(tmp_path, "w3c", IIS, now=NOW)
    assert found.match_count == 3 and not found.unparsed_lines  # directives are no lines
    ok, failed, missing = sorted(found.records, key=lambda r: r.timestamp)
    assert ok.timestamp == "2026-12-04T11:30:01.000Z"
    assert ok.level == "INFO" and ok.message == "GET /orders?q=1 200 -"
    assert ok.fields == {
        "server_ip": "10.0.0.5", "method": "GET", "uri": "/orders", "uri_query": "q=1",
        "server_port": "443", "client": "203.0.113.9",
        "user_agent": "Mozilla/5.0+(Windows+NT+10.0;+Win64;+x64)", "http_status": 200,
        "substatus": "0", "win32_status": "0", "duration_ms": 15,
    }  # fmt: skip
    assert failed.level == "ERROR" and failed.fields["user"] == "alice"
    assert failed.fields["referer"] == "https://shop.example/cart"
    assert failed.fields["duration_ms"] == 1834
    assert missing.level == "WARN" and missing.message == "GET /missing HTTP/1.1 404 1234"
    assert missing.fields["site"] == "W3SVC1" and missing.fields["server"] == "WEB01"
    assert missing.fields["protocol"] == "HTTP/1.1" and missing.fields["host"] == "shop.example"
    assert missing.fields["bytes"] == 1234 and missing.fields["bytes_received"] == 210
    assert missing.fields["cookie"] == "***"  # a session cookie is a secret
    assert "abc123secret" not in repr(found)


def test_iis_fields_are_queried_like_the_access_formats(tmp_path: Path) -> None:
    assert search_written(tmp_path, "w3c", IIS, "http_status:>=400", now=NOW).match_count == 2
    assert search_written(tmp_path, "w3c", IIS, "duration_ms:>1000", now=NOW).match_count == 1
    assert search_written(tmp_path, "w3c", IIS, "method:POST uri:pay", now=NOW).match_count == 1
    assert search_written(tmp_path, "w3c", IIS, "client:198.51.100.7", now=NOW).match_count == 1
    assert search_written(tmp_path, "w3c", IIS, "level:error", now=NOW).match_count == 1
    assert search_written(tmp_path, "w3c", IIS, "abc123secret", now=NOW).match_count == 0


def test_times_are_utc_whatever_the_topic_timezone(tmp_path: Path) -> None:
    (tmp_path / "sample.log").write_text(IIS)
    source = file_source(tmp_path, "w3c", ["sample.log"], now=NOW, extra='timezone = "+08:00"')
    found = search(source, "uri:missing", 1440)
    assert found.records[0].timestamp == "2026-12-04T19:31:00.000+08:00"  # 11:31 UTC


def test_cloudfront_tab_separated_time_taken_in_seconds(tmp_path: Path) -> None:
    cloudfront = (
        "#Version: 1.0\n#Fields: date time x-edge-location sc-bytes c-ip cs-method cs(Host) "
        "cs-uri-stem sc-status cs(Referer) cs(User-Agent) cs-uri-query cs(Cookie) "
        "x-edge-result-type x-edge-request-id x-host-header cs-protocol cs-bytes time-taken\n"
        + "\t".join(
            [
                "2026-12-04",
                "11:40:12",
                "FRA56-C2",
                "2390",
                "192.0.2.100",
                "GET",
                "d111111abcdef8.cloudfront.net",
                "/index.html",
                "503",
                "-",
                "Mozilla/5.0%20(Windows%20NT%2010.0)",
                "-",
                "-",
                "Error",
                "SOX4xwn4XV6Q4rgb7XiVGOHms_BGlTAC4KyHmureZmBNrjGdRLiNIQ==",
                "www.example.com",
                "https",
                "322",
                "0.082",
            ]
        )
        + "\n"
    )
    found = search_written(tmp_path, "w3c", cloudfront, now=NOW)
    (record,) = found.records
    assert record.timestamp == "2026-12-04T11:40:12.000Z" and record.level == "ERROR"
    assert record.message == "GET /index.html 503 2390"
    assert record.fields["duration_ms"] == 82.0  # the spec's seconds: CloudFront's 0.082
    assert record.fields["x_edge_location"] == "FRA56-C2"
    assert record.fields["host"] == "d111111abcdef8.cloudfront.net"
    assert record.fields["user_agent"] == "Mozilla/5.0%20(Windows%20NT%2010.0)"


def test_a_line_before_any_fields_directive_is_not_in_the_format(tmp_path: Path) -> None:
    cut = (  # a file cut at rotation: its header is in the file before it
        "2026-12-04 11:29:59 10.0.0.5 GET /orders - 443 - 203.0.113.9 curl/8.5.0 - 200 0 0 9 x\n"
        + IIS
    )
    found = search_written(tmp_path, "w3c", cut, now=NOW)
    assert found.match_count == 3 and found.unparsed_lines == 1
    notes = " ".join(found.notes or [])
    assert "before any #Fields: directive" in notes


def test_iis_default_fields_read_a_headerless_line() -> None:
    parser = make_parser("w3c", {}, UTC, "", "auto", int(NOW * 1000))
    (entry,) = parser.feed(
        "2026-12-04 11:29:59 10.0.0.5 GET /orders - 443 - 203.0.113.9 curl/8.5.0 - 503 0 0 9\n"
    )
    assert entry.level == "ERROR" and entry.fields["duration_ms"] == 9
    assert entry.message == "GET /orders 503 -" and parser.failed == 0


def test_a_line_with_another_number_of_columns_is_not_in_the_format() -> None:
    parser = make_parser("w3c", {}, UTC, "", "auto", int(NOW * 1000))
    for line in (IIS_HEAD + DEFAULT_FIELDS).splitlines():
        assert parser.feed(line + "\n") == []
    assert parser.feed("2026-12-04 11:30:01 10.0.0.5 GET / - 443\n") == []
    assert parser.feed("2026-13-04 11:30:01 10.0.0.5 GET / - 443 - c - - 200 0 0 1\n") == []
    assert parser.failed == 2


def test_check_suggests_w3c_for_an_iis_log_read_as_plain(tmp_path: Path) -> None:
    (tmp_path / "u_ex261204.log").write_text(IIS)
    config = parse_logs_config(
        f'roots = ["{tmp_path}"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "plain"\n'
        f'paths = ["{tmp_path}/u_ex*.log"]\n'
    )
    (topic,) = check_logs(config, time.time())
    (file,) = topic.sources[0].files
    assert file.better == "w3c"
    assert any('format = "w3c"' in problem for problem in topic.problems())


def test_iis_own_layouts_read_headerless_and_concatenated_lines() -> None:
    # The layouts Filebeat's IIS module reads without a header: the default with a custom
    # X-Forwarded-For column last, and a default line after another header (files concatenated)
    parser = make_parser("w3c", {}, UTC, "", "auto", int(NOW * 1000))
    (forwarded,) = parser.feed(
        "2026-12-04 11:29:59 10.0.0.5 POST /api/pay - 443 - 10.0.0.9 curl/8.5.0 - 200 0 0 26 "
        "192.0.2.44\n"
    )
    assert (
        forwarded.fields["forwarded_for"] == "192.0.2.44"
        and forwarded.fields["client"] == "10.0.0.9"
    )
    for line in (IIS_HEAD + FULL_FIELDS).splitlines():
        parser.feed(line + "\n")
    (after,) = parser.feed(
        "2026-12-04 11:30:00 10.0.0.5 GET / - 443 - 10.0.0.9 curl/8.5.0 - 401 2 5 0\n"
    )
    assert after.level == "WARN" and after.fields["substatus"] == "2"
    assert parser.feed("2026-12-04 11:30:00 a b c\n") == [] and parser.failed == 1
    assert parser.headless == 0  # after a header: not in the format, but not headless


def test_a_secret_in_the_query_string_is_masked_in_message_and_field(tmp_path: Path) -> None:
    text = (
        IIS_HEAD + "#Fields: date time cs-method cs-uri-stem cs-uri-query c-ip sc-status "
        "time-taken\n2026-12-04 11:00:00 GET /login user=bob&password=hunter2xyz 10.0.0.1 302 5\n"
    )
    found = search_written(tmp_path, "w3c", text, "uri:login", now=NOW)
    (record,) = found.records
    assert record.message == "GET /login?user=bob&password=*** 302 -"
    assert record.fields["uri_query"] == "user=bob&password=***"
    assert "hunter2xyz" not in repr(found)
    assert search_written(tmp_path, "w3c", text, "hunter2xyz", now=NOW).match_count == 0


def test_a_time_without_a_date_column_takes_the_date_directive_s_day() -> None:
    parser = make_parser("w3c", {}, UTC, "", "auto", int(NOW * 1000))
    for line in (
        "#Version: 1.0",
        "#Date: 2026-12-04 11:00:00",
        "#Fields: time c-ip cs-method cs-uri-stem sc-status",
    ):
        assert parser.feed(line + "\n") == []
    (entry,) = parser.feed("11:05:09.250 10.0.0.1 GET /a 200\n")
    assert entry.epoch_ms == int(
        datetime(2026, 12, 4, 11, 5, 9, 250_000, tzinfo=UTC).timestamp() * 1000
    )


def test_a_secret_column_of_a_log_without_requests_is_masked_in_the_message(
    tmp_path: Path,
) -> None:
    # a W3C log of no requests (a firewall's, a VPN's) shows its columns as the message:
    # the message carries no column names, so a value under a secret's name was shown there
    # while its field was masked
    text = (
        "#Fields: date time x-user x-password x-session-token s-action\n"
        "2026-12-04 11:00:00 bob hunter2xyz tok9c8b7a6z ALLOW\n"
    )
    found = search_written(tmp_path, "w3c", text, "ALLOW", now=NOW)
    (record,) = found.records
    assert record.message == "bob *** *** ALLOW"
    assert record.fields["x_password"] == "***" and record.fields["x_user"] == "bob"
    assert "hunter2xyz" not in repr(found) and "tok9c8b7a6z" not in repr(found)
    assert search_written(tmp_path, "w3c", text, "hunter2xyz", now=NOW).match_count == 0


def test_the_date_column_wins_over_the_date_directive() -> None:
    # `#Date:` is when the header was written (IIS: the file's first request, or a restart);
    # each line's own `date` is its day
    parser = make_parser("w3c", {}, UTC, "", "auto", int(NOW * 1000))
    parser.feed("#Date: 2026-12-03 23:59:59\n")
    parser.feed("#Fields: date time c-ip cs-method cs-uri-stem sc-status\n")
    (entry,) = parser.feed("2026-12-04 00:00:01 10.0.0.1 GET /a 200\n")
    assert entry.epoch_ms == int(datetime(2026, 12, 4, 0, 0, 1, tzinfo=UTC).timestamp() * 1000)


def test_a_time_without_a_date_column_goes_on_past_midnight() -> None:
    # the `#Date:` directive's day is the file's first: a file without a `date` column that
    # goes on past midnight (no new header) has its later lines on the next day; before, they
    # were dated a day early (out of the window of a call after midnight)
    parser = make_parser("w3c", {}, UTC, "", "auto", int(NOW * 1000))
    parser.feed("#Date: 2026-12-03 23:55:00\n")
    parser.feed("#Fields: time c-ip cs-method cs-uri-stem sc-status\n")
    clocks = ["23:58:00", "23:59:59.500", "23:59:58", "00:00:05", "00:01:00", "00:00:59"]
    times = [parser.feed(f"{c} 10.0.0.1 GET /a 200\n")[0].epoch_ms for c in clocks]
    day = datetime(2026, 12, 3, tzinfo=UTC).timestamp() * 1000
    assert [round((t - day) / 1000, 1) for t in times] == [
        86280.0, 86399.5, 86398.0, 86405.0, 86460.0, 86459.0,  # a second back is no new day
    ]  # fmt: skip
    # a new `#Date:` (a restart's header) is the day again
    parser.feed("#Date: 2026-12-04 08:00:00\n")
    parser.feed("#Fields: time c-ip cs-method cs-uri-stem sc-status\n")
    (entry,) = parser.feed("08:00:01 10.0.0.1 GET /a 200\n")
    assert entry.epoch_ms == int(datetime(2026, 12, 4, 8, 0, 1, tzinfo=UTC).timestamp() * 1000)


def test_a_call_after_midnight_finds_the_lines_written_after_it(tmp_path: Path) -> None:
    text = (
        "#Date: 2026-12-04 23:50:00\n#Fields: time c-ip cs-method cs-uri-stem sc-status\n"
        "23:59:00 10.0.0.1 GET /a 200\n00:00:30 10.0.0.1 GET /b 503\n"
    )
    after_midnight = datetime(2026, 12, 5, 0, 10, tzinfo=UTC).timestamp()
    found = search_written(tmp_path, "w3c", text, "level:ERROR", now=after_midnight)
    assert found.match_count == 1 and found.records[0].timestamp == "2026-12-05T00:00:30.000Z"


def test_the_first_line_after_a_header_written_before_midnight_is_the_next_day(
    tmp_path: Path,
) -> None:
    # IIS writes a header when it starts (a recycle at 23:59:50): the first line after it,
    # at 00:00:05, was dated on the header's day (a day early, out of the window of a call
    # after midnight: `level:ERROR` found nothing); the header's own time is the line before
    text = (
        "#Date: 2026-12-04 23:59:50\n#Fields: time c-ip cs-method cs-uri-stem sc-status\n"
        "00:00:05 10.0.0.1 GET /b 503\n00:00:06 10.0.0.1 GET /c 503\n"
    )
    after_midnight = datetime(2026, 12, 5, 0, 10, tzinfo=UTC).timestamp()
    found = search_written(tmp_path, "w3c", text, "level:ERROR", now=after_midnight)
    assert found.match_count == 2
    assert sorted(r.timestamp for r in found.records) == [
        "2026-12-05T00:00:05.000Z", "2026-12-05T00:00:06.000Z",
    ]  # fmt: skip


def test_one_line_of_a_later_time_does_not_move_the_lines_after_it_a_day_on(
    tmp_path: Path,
) -> None:
    # without a `date` column, a line more than 12 hours after the one before (a clock that
    # jumped, a request logged with its start hours earlier) made the next real line "the
    # next day's": every line after it was dated a day on, in the future, out of the window
    text = (
        "#Date: 2026-12-04 08:00:00\n#Fields: time c-ip cs-method cs-uri-stem sc-status\n"
        "10:00:00 10.0.0.1 GET /a 503\n23:30:00 10.0.0.1 GET /b 503\n"
        "10:00:05 10.0.0.1 GET /c 503\n10:00:06 10.0.0.1 GET /d 503\n"
    )
    found = search_written(tmp_path, "w3c", text, "level:ERROR", now=NOW)  # 12:00 that day
    assert sorted(r.timestamp for r in found.records) == [
        "2026-12-04T10:00:00.000Z", "2026-12-04T10:00:05.000Z", "2026-12-04T10:00:06.000Z",
    ]  # fmt: skip
