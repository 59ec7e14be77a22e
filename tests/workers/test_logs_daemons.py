"""Text logs of programs a new user runs, read under `format = "plain"` without more keys:
Ruby's stdlib `Logger` (Rails, Sidekiq), PHP's `error_log`, PHP-FPM's log and slow log, BIND 9's
`named` and CUPS's `error_log`. Each sample is the byte-exact output of the program, written on
this machine (tests/workers/logs_samples/README.md)."""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

from logs_helpers import file_source, search

from contracts import LogsUpstream

SAMPLES = Path(__file__).parent / "logs_samples"
NOW = datetime(2026, 12, 5, 11, 50, tzinfo=UTC).timestamp()  # written at 11:20 to 11:44


def read(tmp_path: Path, name: str, query: str = "", lookback: int = 1440) -> LogsUpstream:
    if not (tmp_path / name).exists():
        shutil.copy(SAMPLES / name, tmp_path / name)
    os.utime(tmp_path / name, (NOW - 300, NOW - 300))
    return search(file_source(tmp_path, "plain", [name], now=NOW), query, lookback=lookback)


def test_ruby_logger_levels_pid_progname_and_backtraces(tmp_path: Path) -> None:
    # `E, [2026-12-05T11:20:11.876973 #17958] ERROR -- orders: bad amount ... (ArgumentError)`:
    # before, no line was a record (`check`: "no line is in format plain"), `level:error` was
    # an EXECUTION error and a word matched the lines as text, with no level.
    every = read(tmp_path, "ruby_logger.log")
    assert every.match_count == 9 and not every.unparsed_lines  # its header and 8 entries
    first, second, _ = read(tmp_path, "ruby_logger.log", "level:error").records
    assert first.timestamp == "2026-12-05T11:20:11.876Z"
    assert first.message == "bad amount for o-1042 (ArgumentError)\napp.rb:6:in `<main>'"
    assert first.fields == {"pid": "17958", "logger": "orders", "exception": "ArgumentError"}
    assert second.message == "charge failed for order o-1042: connection refused"
    assert second.fields == {"pid": "17958"}
    (raised,) = read(tmp_path, "ruby_logger.log", '"invalid value"').records
    assert raised.level == "ERROR" and raised.message.splitlines()[1:] == [
        "app.rb:16:in `Integer'",
        "app.rb:16:in `<main>'",
    ]
    (fatal,) = read(tmp_path, "ruby_logger.log", "level:fatal").records
    assert fatal.message == "cannot reach database at postgres://app:***@db/orders"
    (slow,) = read(tmp_path, "ruby_logger.log", "level:warn logger:orders").records
    assert slow.message == "payment gateway slow: 2300 ms for o-1042"
    (unknown,) = read(tmp_path, "ruby_logger.log", "ANY").records  # Logger#unknown: no level
    assert unknown.level == "" and unknown.fields == {"pid": "17958", "level_name": "ANY"}
    assert read(tmp_path, "ruby_logger.log", "level:debug").match_count == 1
    (header,) = read(tmp_path, "ruby_logger.log", "logger.rb").records
    assert header.timestamp == "2026-12-05T11:20:11.000Z" and header.level == ""


def test_php_error_log_levels_zones_and_stack_traces(tmp_path: Path) -> None:
    # `[05-Dec-2026 11:20:30 UTC] PHP Fatal error:  Uncaught RuntimeException: ...` then its
    # trace: before, every record was level-less (`level:error` found nothing), the message
    # began with `UTC] `, and a zone other than UTC was not read (Berlin's lines an hour ahead).
    every = read(tmp_path, "php_error.log")
    assert every.match_count == 6 and not every.unparsed_lines
    (fatal,) = read(tmp_path, "php_error.log", "level:fatal").records
    assert fatal.timestamp == "2026-12-05T11:20:30.000Z"
    assert fatal.message.splitlines() == [
        "PHP Fatal error:  Uncaught RuntimeException: cannot reach database for o-1042 in "
        "/tmp/f5/php/err.php:11",
        "Stack trace:",
        "#0 /tmp/f5/php/err.php(12): charge()",
        "#1 /tmp/f5/php/err.php(13): handle()",
        "#2 {main}",
        "  thrown in /tmp/f5/php/err.php on line 11",
    ]
    assert fatal.fields == {"level_name": "Fatal error", "exception": "RuntimeException"}
    warnings = read(tmp_path, "php_error.log", "level:warn")
    assert warnings.match_count == 2 and all(
        r.message.startswith("PHP Warning:") for r in warnings.records
    )
    assert read(tmp_path, "php_error.log", "level:info").match_count == 2  # Notice, Deprecated
    (logged,) = read(tmp_path, "php_error.log", '"connection refused"').records
    assert logged.message == "charge failed for order o-1042: connection refused"
    assert logged.level == ""
    zones = read(tmp_path, "php_error_zones.log")
    assert [r.timestamp for r in zones.records] == ["2026-12-05T11:20:33.000Z"] * 4
    (parse,) = read(tmp_path, "php_error_zones.log", "level:fatal").records
    assert parse.message.startswith("PHP Parse error:  syntax error")
    assert read(tmp_path, "php_error_zones.log", "berlin", lookback=30).match_count == 2


def test_php_fpm_log_the_php_message_level_and_its_trace_joined(tmp_path: Path) -> None:
    # `[05-Dec-2026 11:21:39] WARNING: [pool www] child 21095 said into stderr: "NOTICE: PHP
    # message: PHP Fatal error:  Uncaught ..."`, then a line per trace line: before, the fatal
    # error was a WARN record (`level:error` and `level:fatal` found nothing) and each trace
    # line a record of its own.
    every = read(tmp_path, "php-fpm.log")
    assert every.match_count == 16 and not every.unparsed_lines
    (fatal,) = read(tmp_path, "php-fpm.log", "level:fatal").records
    assert fatal.message.splitlines() == [
        '[pool www] child 21095 said into stderr: "NOTICE: PHP message: PHP Fatal error:  '
        'Uncaught RuntimeException: cannot reach database for o-1042 in /tmp/f5/fpm/www/bad.php:3"',
        "Stack trace:",
        "#0 {main}",
        "  thrown in /tmp/f5/fpm/www/bad.php on line 3",
    ]
    assert fatal.fields == {
        "pid": "21095", "level_name": "Fatal error", "exception": "RuntimeException"
    }  # fmt: skip
    assert fatal.timestamp == "2026-12-05T11:21:39.000Z"
    warned = read(tmp_path, "php-fpm.log", "level:warn pid:21003")
    assert warned.match_count == 5  # its stderr lines, too slow, timed out, SIGTERM
    assert read(tmp_path, "php-fpm.log", '"Undefined variable" level:warn').match_count == 1
    assert read(tmp_path, "php-fpm.log", "level:info").match_count == 9


def test_php_fpm_slow_log_one_record_per_request(tmp_path: Path) -> None:
    every = read(tmp_path, "php-fpm_slow.log")
    assert every.match_count == 1 and not every.unparsed_lines
    (slow,) = every.records
    assert slow.message.splitlines() == [
        "[pool www] pid 21003",
        "script_filename = /tmp/f5/fpm/www/slow.php",
        "[0x00007f40fe6150c0] sleep() /tmp/f5/fpm/www/slow.php:2",
        "[0x00007f40fe615070] charge() /tmp/f5/fpm/www/slow.php:5",
    ]
    assert slow.level == "WARN" and slow.fields == {"pid": "21003"}
    assert read(tmp_path, "php-fpm_slow.log", '"charge()"').match_count == 1


def test_bind_named_categories_and_severities(tmp_path: Path) -> None:
    # `05-Dec-2026 11:22:17.676 zoneload: error: zone broken.test/IN: ...`: before, no level
    # (`check` offered `log4j`, which read the level and dropped the category).
    every = read(tmp_path, "named.log")
    assert every.match_count == 20 and not every.unparsed_lines
    errors = read(tmp_path, "named.log", "level:error")
    assert errors.match_count == 3
    assert errors.records[0].timestamp == "2026-12-05T11:22:17.676Z"
    assert {r.fields["logger"] for r in errors.records} == {"general", "zoneload"}
    (failed,) = read(tmp_path, "named.log", "logger:query-errors").records
    assert failed.message.startswith("client @0x7f53e04af098 127.0.0.1#57248 (example.com): query")
    assert failed.level == "INFO"
    assert read(tmp_path, "named.log", "level:warn dnssec").match_count == 2


def test_cups_error_log_level_letters(tmp_path: Path) -> None:
    # `E [05/Dec/2026:11:22:34 +0000] File ... not available`: before, no line was a record
    every = read(tmp_path, "cups_error_log")
    assert every.match_count == 46 and not every.unparsed_lines
    errors = read(tmp_path, "cups_error_log", "level:error")
    assert errors.match_count == 3 and errors.records[0].fields == {"level_name": "E"}
    assert errors.records[0].timestamp == "2026-12-05T11:22:32.000Z"
    assert errors.records[0].message.startswith("cupsdLoadBanners: Unable to open banner")
    assert read(tmp_path, "cups_error_log", "level:info").match_count == 43


def test_ruby_backtrace_of_absolute_paths_is_the_records(tmp_path: Path) -> None:
    # A script run by its full path (a Rails app, Sidekiq): every frame starts with `/`, none
    # looked like a continuation, and the 16 frames were lines not in the format.
    every = read(tmp_path, "ruby_logger_backtrace.log")
    assert every.match_count == 4 and not every.unparsed_lines
    (error,) = read(tmp_path, "ruby_logger_backtrace.log", "level:error").records
    lines = error.message.splitlines()
    assert len(lines) == 17 and lines[-1] == "/tmp/f5/ruby2/main.rb:6:in `<main>'"
    assert error.fields["exception"] == "Errno::ECONNREFUSED"
    assert read(tmp_path, "ruby_logger_backtrace.log", "connect_nonblock").match_count == 1


def test_squid_native_access_log_as_an_access_log(tmp_path: Path) -> None:
    # `1796470112.938      0 127.0.0.1 TCP_MISS/503 3437 GET http://127.0.0.1:1/charge -
    # HIER_DIRECT/127.0.0.1 text/html`: before, under `apache_access` no line was a record,
    # and under `plain` a record without a level or a field (`level:error` found nothing).
    shutil.copy(SAMPLES / "squid_access.log", tmp_path / "access.log")
    os.utime(tmp_path / "access.log", (NOW - 300, NOW - 300))
    source = file_source(tmp_path, "apache_access", ["access.log"], now=NOW)
    every = search(source, "", lookback=1440)
    assert every.match_count == 5 and not every.unparsed_lines
    errors = search(source, "level:error", lookback=1440)
    assert sorted(r.fields["http_status"] for r in errors.records) == [502, 503]  # type: ignore[type-var]
    (refused,) = search(source, "http_status:503", lookback=1440).records
    assert refused.timestamp == "2026-12-05T11:28:32.938Z"
    assert refused.message == "GET http://127.0.0.1:1/charge 503 3437"
    assert refused.fields == {
        "client": "127.0.0.1", "method": "GET", "uri": "http://127.0.0.1:1/charge",
        "http_status": 503, "bytes": 3437, "duration_ms": 0, "cache_result": "TCP_MISS",
        "hierarchy": "HIER_DIRECT", "upstream": "127.0.0.1", "content_type": "text/html",
    }  # fmt: skip
    assert search(source, "level:warn", lookback=1440).match_count == 2
    assert search(source, "cache_result:TCP_MISS duration_ms:>=2", lookback=1440).match_count == 2


def test_squid_cache_log_levels(tmp_path: Path) -> None:
    # `2026/12/05 11:28:29| WARNING: log name now starts with a module name...`: before, the
    # `| ` after the time hid the level (`level:warn` found nothing)
    every = read(tmp_path, "squid_cache.log")
    # its shutdown's `CPU Usage: ...` lines have no time: 3 lines not in the format, counted
    assert every.match_count == 50 and every.unparsed_lines == 3
    (warning,) = read(tmp_path, "squid_cache.log", "level:warn").records
    assert warning.message == (
        "log name now starts with a module name. Use 'stdio:/tmp/f5/squid/access.log'"
    )
    assert warning.timestamp == "2026-12-05T11:28:29.000Z"


def test_exim_mainlog_delivery_flags_and_message_ids(tmp_path: Path) -> None:
    # `2026-12-05 11:31:56 1xZnzg-0000NN-0v ** nosuchuser@localhost: Unrouteable address`:
    # before, no level (`level:error` found neither bounce) and each message id in the text
    every = read(tmp_path, "exim_mainlog")
    assert every.match_count == 15 and not every.unparsed_lines
    bounced = read(tmp_path, "exim_mainlog", "level:error")
    assert sorted(r.message for r in bounced.records) == [
        "** nosuchuser@localhost: Unrouteable address",
        "** someone@unroutable.invalid R=nonlocal: Mailing to remote domains not supported",
    ]
    assert {r.fields["message_id"] for r in bounced.records} == {
        "1xZnzg-0000NN-0v",
        "1xZnzg-0000NV-10",
    }
    assert read(tmp_path, "exim_mainlog", "message_id:1xZnzg-0000NN-0v").match_count == 3
    assert read(tmp_path, "exim_mainlog", "level:info").match_count == 8  # 5 <=, 3 =>
    assert not any(p.template.startswith("1xZnzg") for p in every.patterns)  # ids out of them


def test_sidekiq_pretty_log_its_context_as_fields(tmp_path: Path) -> None:
    # `2026-12-05T11:33:57.388Z pid=3480 tid=1ps class=ChargeJob jid=60a2... WARN: gateway
    # slow for o-1042`: before, no level under `plain` (`check` proposed `log4j`, which read
    # the level and dropped the pid, thread, class and job id: `60a2...` found nothing)
    every = read(tmp_path, "sidekiq.log")
    assert every.match_count == 19 and every.unparsed_lines == 2  # redis gem's warnings
    warned = read(tmp_path, "sidekiq.log", "level:warn logger:ChargeJob")
    assert sorted(r.message for r in warned.records) == [
        "gateway slow for o-1041",
        "gateway slow for o-1042",
    ]
    (slow,) = read(
        tmp_path, "sidekiq.log", "level:warn o-1042 job_id:60a238974935593333b16e06"
    ).records
    assert slow.fields == {
        "pid": "3480", "thread": "1ps", "logger": "ChargeJob", "job_id": "60a238974935593333b16e06"
    }  # fmt: skip
    assert slow.timestamp == "2026-12-05T11:33:57.388Z"
    (trace,) = read(tmp_path, "sidekiq.log", "execute_job").records
    assert trace.level == "WARN" and trace.message.startswith(
        "/tmp/f5/sidekiq/jobs.rb:10:in `perform'"
    )
    assert read(tmp_path, "sidekiq.log", "job_id:60a238974935593333b16e06").match_count == 4


def test_caddy_json_logs_and_its_access_log_fields(tmp_path: Path) -> None:
    # Caddy's zap JSON: its times and levels were read; its access log's status, URI, method,
    # client and size were fields under Caddy's names (`status`, `request_uri`), so the
    # topic's own `http_status:502` and `uri:/api` answered NO_EVIDENCE over two 502s.
    for name in ("caddy.log", "caddy_access.log"):
        shutil.copy(SAMPLES / name, tmp_path / name)
        os.utime(tmp_path / name, (NOW - 300, NOW - 300))
    errors = search(file_source(tmp_path, "jsonl", ["caddy.log"], now=NOW), "level:error", 1440)
    assert errors.match_count == 2
    assert errors.records[0].message == "dial tcp 127.0.0.1:1: connect: connection refused"
    source = file_source(tmp_path, "jsonl", ["caddy_access.log"], now=NOW)
    failed = search(source, "http_status:502 uri:/api", lookback=1440)
    assert failed.match_count == 2 and all(r.level == "ERROR" for r in failed.records)
    first = min(failed.records, key=lambda r: r.timestamp)
    assert first.timestamp == "2026-12-05T11:31:11.018Z"
    assert {k: first.fields[k] for k in ("method", "uri", "protocol", "client", "bytes")} == {
        "method": "GET", "uri": "/api/charge", "protocol": "HTTP/1.1", "client": "127.0.0.1",
        "bytes": 0,
    }  # fmt: skip
    every = search(source, "", lookback=1440)
    assert every.match_count == 4 and "S3cretTok" not in str(every)
    assert search(source, "http_status:>=400", lookback=1440).match_count == 2


def test_php_fpm_undecorated_fatal_error_is_a_record_of_its_own(tmp_path: Path) -> None:
    # `decorate_workers_output = no`: the child's lines have no time. Before, its fatal error
    # and trace were joined to the NOTICE before them (`systemd monitor interval ...`, INFO):
    # `level:fatal` found nothing.
    every = read(tmp_path, "php-fpm_undecorated.log")
    assert every.match_count == 6 and every.unparsed_lines == 1  # the warning: no time
    (fatal,) = read(tmp_path, "php-fpm_undecorated.log", "level:fatal").records
    assert fatal.message.splitlines() == [
        "NOTICE: PHP message: PHP Fatal error:  Uncaught RuntimeException: cannot reach "
        "database for o-1042 in /tmp/f5/fpm/www/bad.php:3",
        "Stack trace:",
        "#0 {main}",
        "  thrown in /tmp/f5/fpm/www/bad.php on line 3",
    ]
    assert fatal.fields == {"exception": "RuntimeException"}
    assert fatal.timestamp == "2026-12-05T11:43:16.000Z"  # timed by the line after it
    (notice,) = read(tmp_path, "php-fpm_undecorated.log", '"monitor interval"').records
    assert notice.message == "systemd monitor interval set to 10000ms"


def test_a_php_fatal_error_on_a_containers_stderr_is_one_record(tmp_path: Path) -> None:
    # PHP's CLI logs to stderr without a time; in a pod's CRI log its fatal error and trace
    # were four level-less records (`level:fatal` over the worker's crash found nothing).
    err = (SAMPLES / "php_cli_stderr.log").read_text().splitlines()
    lines = [("stdout", "worker started"), *(("stderr", t) for t in err), ("stdout", "restarted")]
    folder = tmp_path / "pods" / "shop_worker-1_0a1b" / "worker"
    folder.mkdir(parents=True)
    (folder / "0.log").write_text(
        "".join(f"2026-12-05T11:40:0{i}.000000001Z {s} F {t}\n" for i, (s, t) in enumerate(lines))
    )
    os.utime(folder / "0.log", (NOW - 60, NOW - 60))
    source = file_source(tmp_path, "cri", ["pods/shop_worker-1_0a1b/worker/*.log"], now=NOW)
    assert search(source, "", lookback=1440).match_count == 3
    (fatal,) = search(source, "level:fatal", lookback=1440).records
    assert fatal.message.splitlines() == err
    assert fatal.fields["exception"] == "RuntimeException"
    assert fatal.timestamp == "2026-12-05T11:40:01.000Z"


def test_postfix_delivery_status_is_the_level(tmp_path: Path) -> None:
    # `postfix/local[19403]: BDC06174167: to=<nosuchuser@localhost>, ..., status=bounced
    # (unknown user: "nosuchuser")`: syslog's file layout has no level, so `level:error` found
    # neither the bounce nor the expired message, and `level:warn` not the deferral.
    shutil.copy(SAMPLES / "postfix.log", tmp_path / "maillog")
    os.utime(tmp_path / "maillog", (NOW - 60, NOW - 60))
    source = file_source(tmp_path, "syslog", ["maillog"], now=NOW)
    every = search(source, "", lookback=1440)
    assert every.match_count == 35 and not every.unparsed_lines
    failed = search(source, "level:error", lookback=1440)
    assert sorted(r.fields["level_name"] for r in failed.records) == ["bounced", "expired"]  # type: ignore[type-var]
    (deferred,) = search(source, "level:warn", lookback=1440).records
    assert deferred.message.endswith(
        "status=deferred (connect to 127.0.0.1[127.0.0.1]:1: Connection refused)"
    )
    assert deferred.fields["queue_id"] == "C17FB174165" and deferred.fields["app"] == "postfix/smtp"
    # its delivery status code (RFC 3463) is no secret: `dsn=***` hid 4.4.1 and 5.1.1
    assert "dsn=4.4.1," in deferred.message
    assert deferred.timestamp == "2026-12-05T11:46:36.000Z"
    assert search(source, "queue_id:C17FB174165", lookback=1440).match_count == 7
    assert search(source, "level:info", lookback=1440).match_count == 2  # status=sent


def test_a_postfix_address_that_names_a_status_does_not_hide_a_bounce(tmp_path: Path) -> None:
    # A sender picks the recipient's name: mail to `"status=sent"@localhost` is logged
    # `to=<status=sent@localhost>, ..., dsn=5.1.1, status=bounced (...)`. The first
    # `status=` was taken, the address's: the bounce was INFO and `level:error` missed it.
    later = NOW + 1800  # written at 12:08
    shutil.copy(SAMPLES / "postfix_status_address.log", tmp_path / "maillog")
    os.utime(tmp_path / "maillog", (later - 60, later - 60))
    source = file_source(tmp_path, "syslog", ["maillog"], now=later)
    (bounce,) = search(source, "level:error", lookback=1440).records
    assert bounce.fields["queue_id"] == "9E2F4174172" and bounce.fields["level_name"] == "bounced"
    (sent,) = search(source, "level:info status=sent", lookback=1440).records  # the report
    assert sent.fields["queue_id"] == "A869317417F"


def test_an_exim_flag_is_one_only_before_a_space(tmp_path: Path) -> None:
    # Exim writes its delivery flag, then a space (`** rcpt: reason`). The parser took `**`
    # or `=>` at the start of any text after the message id as the flag (`**x`: ERROR), where
    # the prefilter of `level:error` looks for ` ** `: the empty query showed an ERROR that
    # `level:error` skipped unparsed (an exact 0 against 1). Now the level needs the space.
    (tmp_path / "mainlog").write_text(
        "2026-12-05 11:31:56 1xZnzg-0000NN-0v **x not a delivery line\n"
        "2026-12-05 11:31:57 1xZnzg-0000NN-0v ** nosuchuser@localhost: Unrouteable address\n"
    )
    every = read(tmp_path, "mainlog")
    errors = read(tmp_path, "mainlog", "level:error")
    assert sum(r.level == "ERROR" for r in every.records) == errors.match_count == 1
