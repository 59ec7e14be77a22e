"""HAProxy's log through syslog (`format = "syslog"`): its HTTP and TCP log lines and its
server-state lines read as HAProxy writes them (docs/logs.md, "syslog").

`logs_samples/haproxy.log` is HAProxy 2.6.12's own output on this project's machine, in the
file layout rsyslog writes (logs_samples/README.md). Before, every line was a record with no
level and no field: `level:error` over a backend down answered NO_EVIDENCE, and the status,
the backend and HAProxy's termination state (`SC--`, `sH--`: the signal) could only be
searched as words."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from logs_helpers import cpu_seconds, file_source, search, search_written

from contracts import LogsUpstream, Topic
from workers.sources.base import SourceError

SAMPLES = Path(__file__).parent / "logs_samples"
NOW = datetime(2026, 12, 5, 9, 30, tzinfo=UTC).timestamp()
EVENTS = Topic.SYSTEM_EVENTS


def read(tmp_path: Path, query: str = "") -> LogsUpstream:
    if not (tmp_path / "haproxy.log").exists():
        shutil.copy(SAMPLES / "haproxy.log", tmp_path / "haproxy.log")
    source = file_source(tmp_path, "syslog", ["haproxy.log"], now=NOW, topic=EVENTS)
    return search(source, query, lookback=120)


def test_haproxy_http_lines_have_a_level_from_their_status_and_fields(tmp_path: Path) -> None:
    every = read(tmp_path)
    assert every.match_count == 10 and not every.unparsed_lines
    by_message = {r.message[:40]: r for r in every.records}
    down = next(r for r in every.records if "/pay/charge" in r.message)
    assert down.level == "ERROR" and down.message == (  # as written
        "127.0.0.1:53796 [05/Dec/2026:09:17:14.621] fe_shop be_down/pay1 0/0/-1/-1/3003 503"
        ' 217 - - SC-- 1/1/0/0/3 0/0 "GET /pay/charge HTTP/1.1"'
    )
    assert down.fields == {
        "host": "vm-shop-lb1", "app": "haproxy", "pid": "23596", "client": "127.0.0.1",
        "frontend": "fe_shop", "backend": "be_down", "server": "pay1", "http_status": 503,
        "bytes": 217, "duration_ms": 3003, "termination_state": "SC--", "retries": 3,
        "method": "GET", "uri": "/pay/charge", "protocol": "HTTP/1.1",
    }  # fmt: skip
    assert len(by_message) == 10
    levels = sorted(r.level for r in every.records)
    assert levels == ["ERROR"] * 3 + ["FATAL"] * 2 + ["INFO"] * 3 + ["WARN"] * 2


def test_haproxy_levels_statuses_and_termination_states_are_queryable(tmp_path: Path) -> None:
    # 503 (a refused server), 504 (sH--: the server timed out), 503 <NOSRV>; the server DOWN
    # is HAProxy's alert, `has no server available!` its emergency (a PRI's FATAL, both)
    assert read(tmp_path, "level:error").match_count == 3  # before: 0
    down, emergency = sorted(read(tmp_path, "level:fatal").records, key=lambda r: r.message)
    assert emergency.message.startswith("backend be_orders has no server available!")
    assert down.message.startswith("Server be_orders/orders1 is DOWN, reason: Layer4")
    assert (down.fields["level_name"], emergency.fields["level_name"]) == ("alert", "emerg")
    assert read(tmp_path, "level:warn").match_count == 2  # the two 404s
    assert read(tmp_path, "http_status:>=500").match_count == 3
    assert read(tmp_path, "termination_state:sH--").match_count == 1
    assert read(tmp_path, "backend:be_orders server:NOSRV").match_count == 1
    assert read(tmp_path, "duration_ms:>2000").match_count == 2
    (up,) = read(tmp_path, '"is UP"').records
    assert up.level == "INFO"


def test_haproxy_query_strings_are_masked(tmp_path: Path) -> None:
    (line,) = read(tmp_path, "token").records
    assert "abc123secret" not in line.message and "token=***" in line.message
    assert line.fields["uri"] == "/?token=***&user=bob"


TCP_AND_SHAPES = (
    # `option tcplog`: no status; the termination state says how it ended
    "Dec  5 09:20:01 lb1 haproxy[7]: 10.0.0.9:41234 [05/Dec/2026:09:20:00.100] fe_db be_db/db1"
    " 0/0/1001 0 sC 3/3/2/1/0 0/0\n"
    "Dec  5 09:20:02 lb1 haproxy[7]: 10.0.0.9:41236 [05/Dec/2026:09:20:01.100] fe_db be_db/db1"
    " 0/1/900 5120 -- 3/3/2/1/0 0/0\n"
    # HTTPS frontend (`~`), captured headers, a request cut at its length limit (no quote)
    "Dec  5 09:20:03 lb1 haproxy[7]: 10.0.0.9:41240 [05/Dec/2026:09:20:03.100] fe_web~"
    ' be_web/web1 0/0/1/2/3 200 512 - - ---- 1/1/0/0/0 0/0 {shop.example|Mozilla} {} "GET'
    ' /search?q=aaaa HTTP/1.1"\n'
    "Dec  5 09:20:04 lb1 haproxy[7]: 10.0.0.9:41242 [05/Dec/2026:09:20:04.100] fe_web~"
    ' be_web/web1 0/0/1/2/3 200 512 - - ---- 1/1/0/0/0 0/0 "GET /very/long\n'
    # a client that went away before the response: status -1, CD--
    "Dec  5 09:20:05 lb1 haproxy[7]: 10.0.0.9:41244 [05/Dec/2026:09:20:05.100] fe_web~"
    ' be_web/web1 0/0/1/-1/5 -1 0 - - CD-- 1/1/0/0/0 0/0 "GET /x HTTP/1.1"\n'
    # another program's line of the same shape: not HAProxy's, left as it was
    "Dec  5 09:20:06 lb1 myapp[8]: 10.0.0.9:1 [05/Dec/2026:09:20:06.100] a b/c 0/0/1/2/3 503 1"
    ' - - ---- 1/1/0/0/0 0/0 "GET / HTTP/1.1"\n'
)


def test_haproxy_tcp_lines_https_frontends_and_cut_requests(tmp_path: Path) -> None:
    every = search_written(tmp_path, "syslog", TCP_AND_SHAPES, "", now=NOW, topic=EVENTS)
    records = sorted(every.records, key=lambda r: r.timestamp)
    assert [r.level for r in records] == ["ERROR", "INFO", "INFO", "INFO", "WARN", ""]
    timeout, done, https, cut, gone, other = records
    assert timeout.fields["termination_state"] == "sC" and timeout.fields["duration_ms"] == 1001
    assert done.fields["bytes"] == 5120 and "http_status" not in done.fields
    assert https.fields["frontend"] == "fe_web" and https.fields["uri"] == "/search?q=aaaa"
    assert cut.fields["uri"] == "/very/long" and "protocol" not in cut.fields
    assert gone.fields["http_status"] == -1 and gone.fields["termination_state"] == "CD--"
    assert "frontend" not in other.fields


def test_a_field_of_haproxy_is_a_known_syslog_field(tmp_path: Path) -> None:
    assert read(tmp_path, "frontend:fe_shop").match_count == 7
    with pytest.raises(SourceError):
        read(tmp_path, "not_a_field:x")


@pytest.mark.parametrize(
    "unit", ["a", "1.2.3.4:5 ", "1.2.3.4:5 [x] f b/s ", "{", '"', "0/0/0/0/", ":1"]
)
def test_reading_haproxys_lines_is_linear_on_a_1mb_message(unit: str) -> None:
    from workers.sources.logs.haproxy import read_haproxy
    from workers.sources.logs.records import Entry

    def seconds(count: int) -> float:
        message = unit * count
        return cpu_seconds(lambda: read_haproxy(Entry(0, "", "", message, {})))

    count = 1_000_000 // len(unit)
    quarter, whole = seconds(count // 4), seconds(count)
    assert whole < 8 * quarter + 0.05 and whole < 2.0, (quarter, whole)


# A server that failed after its status line was sent: HAProxy logs the status it forwarded
# (200) and says the failure in its termination state, `SD--` (the server's connection died
# during the data transfer: the client got a body cut short) or `sD--` (the server stopped
# sending for `timeout server` in the data phase). Before, the status alone gave the level:
# both were INFO, and `level:error` over a backend dying mid-response found none of them.
SERVER_FAILED_MID_RESPONSE = (
    "Dec  5 09:21:01 lb1 haproxy[7]: 10.0.0.9:41250 [05/Dec/2026:09:21:00.100] fe_web~"
    ' be_files/files1 0/0/1/2/4012 200 1048576 - - SD-- 1/1/0/0/0 0/0 "GET /export.csv HTTP/1.1"\n'
    "Dec  5 09:21:02 lb1 haproxy[7]: 10.0.0.9:41252 [05/Dec/2026:09:21:01.100] fe_web~"
    ' be_files/files1 0/0/1/2/30001 200 65536 - - sD-- 1/1/0/0/0 0/0 "GET /export.csv HTTP/1.1"\n'
    # a client that went away mid-body (CD--), and a whole answer (----): as before
    "Dec  5 09:21:03 lb1 haproxy[7]: 10.0.0.9:41254 [05/Dec/2026:09:21:02.100] fe_web~"
    ' be_files/files1 0/0/1/2/50 200 4096 - - CD-- 1/1/0/0/0 0/0 "GET /export.csv HTTP/1.1"\n'
    "Dec  5 09:21:04 lb1 haproxy[7]: 10.0.0.9:41256 [05/Dec/2026:09:21:03.100] fe_web~"
    ' be_files/files1 0/0/1/2/50 200 4096 - - ---- 1/1/0/0/0 0/0 "GET /export.csv HTTP/1.1"\n'
)


def test_a_server_failing_after_its_status_is_an_error(tmp_path: Path) -> None:
    every = search_written(
        tmp_path, "syslog", SERVER_FAILED_MID_RESPONSE, "", now=NOW, topic=EVENTS
    )
    records = sorted(every.records, key=lambda r: r.timestamp)
    assert [r.level for r in records] == ["ERROR", "ERROR", "INFO", "INFO"]
    failed = search_written(
        tmp_path, "syslog", SERVER_FAILED_MID_RESPONSE, "level:error", now=NOW, topic=EVENTS
    )
    assert failed.match_count == 2
    assert {r.fields["termination_state"] for r in failed.records} == {"SD--", "sD--"}
