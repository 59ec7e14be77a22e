"""Shapes of real logs that Elastic's Filebeat modules parse and a named format must read too.

The lines are written here in the shapes of the samples Filebeat's modules ship and parse
(elastic/beats, `filebeat/module/<module>/<fileset>/test/*.log`, Apache-2.0), with our own
hosts, times and messages; a few are byte-exact and say so beside them. Each test compares
what `query_logs` reads with what Filebeat's ingest pipeline makes of the same shape: the
number of records (no line dropped or split), their time in UTC, their level and message.
The databases' own logs are in `test_logs_filebeat_databases.py`."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from logs_helpers import search_written

from contracts import LogsUpstream

NOW = datetime(2026, 12, 4, 20, 0, tzinfo=UTC).timestamp()


def read(tmp_path: Path, fmt: str, text: str, query: str = "") -> LogsUpstream:
    return search_written(tmp_path, fmt, text, query, now=NOW)


# nginx writes what a FastCGI backend sent on its stderr as it came, newlines included; every
# line of nginx's error log that does not start with its `yyyy/mm/dd hh:mm:ss [level]` is the
# rest of the entry before it (Filebeat's nginx error fileset joins them so: `log.flags`
# `multiline`). Shape of filebeat/module/nginx/error/test/error.log (elastic/beats, Apache-2.0).
NGINX_FASTCGI = (
    '2026/12/04 19:26:34 [error] 2058#2058: *1802 FastCGI sent in stderr: "PHP message: PHP'
    " Warning:  Undefined variable $order in /var/www/shop/checkout.php on line 12\n"
    "PHP message: PHP Fatal error:  Uncaught TypeError: charge(): Argument #1 must be of type"
    " int in /var/www/shop/pay.php:40\n"
    'PHP message: PHP Warning:  Undefined index tenant in /var/www/shop/pay.php on line 7" while'
    ' reading response header from upstream, client: 10.0.0.7, server: shop, request: "POST'
    ' /checkout HTTP/1.1", upstream: "fastcgi://unix:/run/php/php8.2-fpm.sock:", host: "shop"\n'
    "2026/12/04 19:27:01 [warn] 2058#2058: *1803 an upstream response is buffered to a temporary"
    " file /var/cache/nginx/fastcgi_temp/1/00/0000000001 while reading upstream\n"
)


def test_an_nginx_error_entry_spans_the_lines_its_fastcgi_backend_sent(tmp_path: Path) -> None:
    every = read(tmp_path, "nginx_error", NGINX_FASTCGI)
    assert every.match_count == 2 and not every.unparsed_lines  # before: 2 lines not read
    error = next(r for r in every.records if r.level == "ERROR")
    assert error.timestamp == "2026-12-04T19:26:34.000Z"
    assert error.message.count("PHP message:") == 3 and error.message.endswith('host: "shop"')
    assert error.fields["client"] == "10.0.0.7"  # named on the entry's last line
    found = read(tmp_path, "nginx_error", NGINX_FASTCGI, '"Uncaught TypeError" level:error')
    assert found.match_count == 1  # before: the line was no record, a level matched none of it


def test_a_line_before_any_nginx_error_entry_stays_a_line_not_in_the_format(
    tmp_path: Path,
) -> None:
    found = read(tmp_path, "nginx_error", "PHP message: orphan\n" + NGINX_FASTCGI)
    assert found.match_count == 2 and found.unparsed_lines == 1  # counted, no record's time
    assert (
        read(tmp_path, "nginx_error", "PHP message: orphan\n" + NGINX_FASTCGI, "orphan").match_count
        == 1
    )


# Access logs behind proxies and of virtual hosts: nginx's `$proxy_add_x_forwarded_for` (or a
# `"$http_x_forwarded_for"` quoted) where `$remote_addr` goes, and Apache's `vhost_combined`
# (`%v:%p %h %l %u %t ...`: Debian's `other_vhosts_access.log`) or nginx's `$host` first.
# Shapes of filebeat/module/nginx/access/test/test.log, test-with-host.log and
# filebeat/module/apache/access/test/test-vhost.log (elastic/beats, Apache-2.0).
ACCESS_BEHIND_PROXIES = (
    '10.0.0.2, 10.0.0.1, 203.0.113.9 - - [04/Dec/2026:19:05:07 +0100] "GET /cart HTTP/1.1"'
    ' 200 571 "-" "curl/8.5.0"\n'
    '"10.5.102.222, 198.51.100.4, 204.246.1.1" 10.2.1.185 - - [04/Dec/2026:19:18:29 +0000]'
    ' "GET /assets/app.js HTTP/1.1" 200 25507 "-" "Amazon CloudFront"\n'
    'shop.example.com:443 203.0.113.7 - - [04/Dec/2026:19:20:46 +0000] "POST /checkout'
    ' HTTP/1.1" 502 157 "https://shop.example.com/cart" "Mozilla/5.0 (X11; Linux x86_64)"\n'
    'shop.example.com 10.0.0.2, 203.0.113.8 - alice [04/Dec/2026:19:21:02 +0000] "GET /orders'
    ' HTTP/1.1" 404 0 "-" "curl/8.5.0"\n'
    '2001:db8:10ff::8000, 10.225.192.17 10.2.2.121 - - [04/Dec/2026:19:23:09 +0000] "GET'
    ' /test.html HTTP/1.1" 404 8571 "-" "Facebot"\n'
    '2001:db8::1 - bob [04/Dec/2026:19:22:13 +0000] "GET /health HTTP/1.1" 200 2 "-" "kube-probe"\n'
)


def test_access_lines_behind_proxies_and_of_virtual_hosts_are_records(tmp_path: Path) -> None:
    every = read(tmp_path, "nginx_access", ACCESS_BEHIND_PROXIES)
    assert every.match_count == 6 and not every.unparsed_lines  # before: 5 lines not read
    times = sorted(r.timestamp for r in every.records)
    assert times == [
        "2026-12-04T18:05:07.000Z", "2026-12-04T19:18:29.000Z", "2026-12-04T19:20:46.000Z",
        "2026-12-04T19:21:02.000Z", "2026-12-04T19:22:13.000Z", "2026-12-04T19:23:09.000Z",
    ]  # fmt: skip
    by_uri = {r.fields["uri"]: r for r in every.records}
    assert by_uri["/cart"].fields["client"] == "10.0.0.2, 10.0.0.1, 203.0.113.9"
    assert (
        by_uri["/assets/app.js"].fields["client"]
        == "10.5.102.222, 198.51.100.4, 204.246.1.1, 10.2.1.185"
    )
    checkout = by_uri["/checkout"]
    assert checkout.level == "ERROR" and checkout.fields["client"] == "203.0.113.7"
    assert checkout.fields["vhost"] == "shop.example.com:443"
    assert checkout.fields["referer"] == "https://shop.example.com/cart"
    chain = "2001:db8:10ff::8000, 10.225.192.17, 10.2.2.121"
    assert by_uri["/test.html"].fields["client"] == chain
    orders = by_uri["/orders"]
    assert (orders.fields["vhost"], orders.fields["user"]) == ("shop.example.com", "alice")
    assert orders.fields["client"] == "10.0.0.2, 203.0.113.8"
    assert by_uri["/health"].fields == {
        "client": "2001:db8::1", "user": "bob", "method": "GET", "uri": "/health",
        "protocol": "HTTP/1.1", "http_status": 200, "bytes": 2, "user_agent": "kube-probe",
    }  # fmt: skip
    assert (
        read(tmp_path, "apache_access", ACCESS_BEHIND_PROXIES, "client:203.0.113.9").match_count
        == 1
    )
    assert read(tmp_path, "apache_access", ACCESS_BEHIND_PROXIES, "vhost:shop").match_count == 2


# Logstash's plain log (and Elasticsearch's before 7): `[%d{ISO8601}][%-5p][%-25c]` and the
# pipeline, no space between; MongoDB before 4.4: `<time> <severity letter> <COMPONENT>
# [<context>] message`. Shapes of filebeat/module/logstash/log/test/logstash-plain-7.4.log and
# filebeat/module/mongodb/log/test/mongodb-debian-3.2.11.log (elastic/beats, Apache-2.0).
LOGSTASH = (
    "[2026-12-04T19:04:48,468][WARN ][org.logstash.dissect.Dissector][main] Dissector mapping,"
    ' pattern not found {"field"=>"message"}\n'
    "[2026-12-04T19:04:49,001][ERROR][logstash.outputs.elasticsearch][main] Encountered a"
    " retryable error. Will Retry with exponential backoff...\n"
    "[2026-12-04T19:05:02,243][INFO ][logstash.pipeline        ] Starting pipeline"
    ' {"id"=>"main"}\n'
)
MONGODB_42 = (
    "2026-12-04T20:44:56.744+0100 I NETWORK  [initandlisten] waiting for connections on port"
    " 27017\n"
    "2026-12-04T20:49:45.605+0100 W CONTROL  [signalProcessingThread] got signal 15 (Terminated)\n"
    "2026-12-04T19:19:46.942+0000 E WRITE    [conn12] E11000 duplicate key error index:"
    " shop.orders.$_id_ dup key: { : 1042 }\n"
    '2026-12-04T19:19:47.001+0000 D2 QUERY    [conn12] Running query: { find: "orders" }\n'
    "2026-12-04T19:19:48.420+0000 F -        [main] Fatal assertion 28595\n"
)


def test_logstash_plain_log_levels_and_loggers(tmp_path: Path) -> None:
    every = read(tmp_path, "log4j", LOGSTASH)
    assert every.match_count == 3 and not every.unparsed_lines  # before: an EXECUTION error
    by_level = {r.level: r for r in every.records}
    assert set(by_level) == {"WARN", "ERROR", "INFO"}
    error = by_level["ERROR"]
    assert error.timestamp == "2026-12-04T19:04:49.001Z"
    assert error.fields["logger"] == "logstash.outputs.elasticsearch"
    assert (
        error.message
        == "[main] Encountered a retryable error. Will Retry with exponential backoff..."
    )
    assert by_level["INFO"].fields["logger"] == "logstash.pipeline"


def test_mongodb_legacy_log_severity_letters(tmp_path: Path) -> None:
    every = read(tmp_path, "plain", MONGODB_42)
    assert every.match_count == 5 and not every.unparsed_lines
    levels = sorted((r.timestamp, r.level, r.fields.get("logger")) for r in every.records)
    assert levels == [
        ("2026-12-04T19:19:46.942Z", "ERROR", "WRITE"), ("2026-12-04T19:19:47.001Z", "DEBUG", "QUERY"),
        ("2026-12-04T19:19:48.420Z", "FATAL", None), ("2026-12-04T19:44:56.744Z", "INFO", "NETWORK"),
        ("2026-12-04T19:49:45.605Z", "WARN", "CONTROL"),
    ]  # fmt: skip
    (dup,) = read(tmp_path, "plain", MONGODB_42, "level:error E11000").records
    assert dup.message.startswith("E11000 duplicate key") and dup.fields["thread"] == "conn12"
    for level, count in (("warn", 1), ("info", 1), ("debug", 1), ("fatal", 1), ("error", 1)):
        assert read(tmp_path, "plain", MONGODB_42, f"level:{level}").match_count == count


# Icinga 2's main log: `[time zone] severity/Facility: message`, its severities `debug`,
# `notice`, `information`, `warning`, `critical`. Shape of filebeat/module/icinga/main/test/
# test.log (elastic/beats, Apache-2.0), our own messages.
ICINGA = (
    "[2026-12-04 20:16:34 +0100] information/Notification: Sending 'Problem' notification"
    " 'shop!http' for user 'on-call'\n"
    "[2026-12-04 20:16:48 +0100] warning/PluginNotificationTask: Notification command for"
    " object 'shop!http' terminated with exit code 127\n"
    "[2026-12-04 20:17:01 +0100] critical/ApiListener: Cannot connect to host 'satellite'\n"
)


def test_icinga_information_is_info(tmp_path: Path) -> None:
    every = read(tmp_path, "plain", ICINGA)
    assert every.match_count == 3 and not every.unparsed_lines
    levels = sorted((r.timestamp, r.level, r.fields.get("process")) for r in every.records)
    assert levels == [
        ("2026-12-04T19:16:34.000Z", "INFO", "Notification"),  # before: no level
        ("2026-12-04T19:16:48.000Z", "WARN", "PluginNotificationTask"),
        ("2026-12-04T19:17:01.000Z", "FATAL", "ApiListener"),
    ]
    assert read(tmp_path, "plain", ICINGA, "level:info notification").match_count == 1


# Kibana's JSON log before 8 (6.x, 7.x) names its level only among its `tags`. Shape of
# filebeat/module/kibana/log/test/log.624.log (elastic/beats, Apache-2.0), our own messages.
KIBANA_7 = (
    '{"type":"log","@timestamp":"2026-12-04T19:57:32Z","tags":["security","warning"],'
    '"pid":7,"message":"Session cookies will be transmitted over insecure connections."}\n'
    '{"type":"log","@timestamp":"2026-12-04T19:57:34Z","tags":["listening","info"],"pid":7,'
    '"message":"Server running at http://localhost:5601"}\n'
    '{"type":"log","@timestamp":"2026-12-04T19:58:01Z","tags":["error","plugins","taskManager"],'
    '"pid":7,"message":"Failed to poll for work: [cluster_block_exception] index blocked"}\n'
    '{"type":"response","@timestamp":"2026-12-04T19:58:02Z","tags":[],"pid":7,"method":"get",'
    '"statusCode":200,"message":"GET /app/kibana 200 224ms - 9.0B"}\n'
)


def test_kibana_levels_from_its_tags(tmp_path: Path) -> None:
    every = read(tmp_path, "jsonl", KIBANA_7)
    assert every.match_count == 4 and not every.unparsed_lines
    levels = sorted((r.timestamp, r.level) for r in every.records)
    assert levels == [
        ("2026-12-04T19:57:32.000Z", "WARN"), ("2026-12-04T19:57:34.000Z", "INFO"),
        ("2026-12-04T19:58:01.000Z", "ERROR"), ("2026-12-04T19:58:02.000Z", ""),
    ]  # fmt: skip
    assert read(tmp_path, "jsonl", KIBANA_7, "level:error poll").match_count == 1


# A syslog line whose sender did not pad a one-digit day (`Apr 4`, RFC 3164 says `Apr  4`):
# macOS's syslogd and some network devices write so. Shape of filebeat/module/system/syslog/
# test/darwin-syslog-sample.log (elastic/beats, Apache-2.0).
SYSLOG_UNPADDED = (
    "Dec  4 19:39:57 edge-1 sshd[2211]: Accepted publickey for deploy from 10.0.0.9 port 50122\n"
    "Dec 4 19:40:02 edge-1 --- last message repeated 1 time ---\n"
    "Dec 4 19:41:13 edge-1 kernel: eth0: link down\n"
)


def test_a_syslog_day_without_its_padding_is_read(tmp_path: Path) -> None:
    every = read(tmp_path, "syslog", SYSLOG_UNPADDED)
    assert every.match_count == 3 and not every.unparsed_lines  # before: 2 lines not read
    (down,) = read(tmp_path, "syslog", SYSLOG_UNPADDED, '"link down"').records
    assert down.timestamp == "2026-12-04T19:41:13.000Z" and down.fields["app"] == "kernel"


# A log4j layout with the level in brackets too, `[%d] [%-5p] [%t] [%c] - %m%n` (Kafka's
# state-change log as configured in Filebeat's sample). Shape of filebeat/module/kafka/log/
# test/state-change-2.2.2.log (elastic/beats, Apache-2.0), our own messages.
LOG4J_BRACKETED_LEVEL = (
    "[2026-12-04 19:28:21,796] [WARN ] [kafka-request-handler-7] [state.change.logger] -"
    " [Broker id=1] Ignoring LeaderAndIsr request from controller 1\n"
    "[2026-12-04 19:32:00,705] [ERROR] [controller-event-thread] [state.change.logger] -"
    " [Controller id=1 epoch=25] failed to change state for partition orders-0\n"
    "kafka.common.StateChangeFailedException: Failed to elect leader for partition orders-0\n"
    "    at kafka.utils.ShutdownableThread.run(ShutdownableThread.scala:82)\n"
)


def test_a_log4j_level_in_brackets_leaves_thread_logger_and_message_clean(tmp_path: Path) -> None:
    every = read(tmp_path, "log4j", LOG4J_BRACKETED_LEVEL)
    assert every.match_count == 2 and not every.unparsed_lines
    error = next(r for r in every.records if r.level == "ERROR")
    assert error.fields["thread"] == "controller-event-thread"  # before: ""
    assert error.fields["logger"] == "state.change.logger"  # before: none
    assert error.message.startswith("[Controller id=1 epoch=25] failed")  # before: "] [contr..."
    assert error.fields["exception"] == "kafka.common.StateChangeFailedException"
    found = read(tmp_path, "log4j", LOG4J_BRACKETED_LEVEL, "thread:kafka-request-handler")
    assert found.match_count == 1
