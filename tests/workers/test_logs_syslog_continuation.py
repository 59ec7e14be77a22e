"""Syslog's continuation lines: a line that starts with a space or a tab directly after a
syslog record, and the lines of a Python traceback the record starts, are that record's
(Filebeat's syslog input joins `^\\s`). macOS's syslog writes an object's description over
tab-indented lines (Filebeat's `system/syslog` darwin sample, in this shape); a Python app
logging through syslog-ng or rsyslog (control characters not escaped) writes its traceback's
frames indented and the exception unindented. Before, each of those lines was a line not in
the format: counted, matched as level-less text, the record's message cut at its first line.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
from logs_helpers import file_source, search

from contracts import Topic
from workers.sources.base import SourceError
from workers.sources.logs.file_source import FileLogSource
from workers.sources.logs.multiline import MAX_JOINED_LINES

NOW = datetime(2026, 12, 13, 12, 0, tzinfo=UTC).timestamp()

MAC = [
    "Dec 13 11:35:28 a-mac GoogleSoftwareUpdateAgent[21412]: 2016-12-13 11:35:28.420 "
    "GoogleSoftwareUpdateAgent[21412/0x700007399000] [lvl=2] -[KSAgentApp updateProduct] "
    'Checking for updates for "All Products" using engine <KSUpdateEngine:0x100341a00',
    "\t\tticketStore=<KSPersistentTicketStore:0x100204520 store=<KSKeyedPersistentStore:0x1",
    '\t\t\tpath="/Users/tsg/Library/Google/GoogleSoftwareUpdate/TicketStore/Keystone.ticketstore"',
    "\t\t\tlockFile=<KSLockFile:0x1002160e0",
]
TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/srv/billing/worker.py", line 31, in <module>',
    "    total = amount / count",
    "ZeroDivisionError: division by zero",
]


def write(tmp_path: Path, lines: list[str]) -> None:
    path = tmp_path / "messages"
    path.write_text("".join(line + "\n" for line in lines))
    os.utime(path, (NOW - 60, NOW - 60))


def syslog(tmp_path: Path) -> FileLogSource:
    return file_source(tmp_path, "syslog", ["messages"], now=NOW, topic=Topic.SYSTEM_EVENTS)


def test_macos_indented_lines_join_their_record(tmp_path: Path) -> None:
    write(tmp_path, [*MAC, "Dec 13 11:35:29 a-mac kernel[0]: Sandbox: deny file-read-data"])
    source = syslog(tmp_path)
    every = search(source, "")
    assert every.match_count == 2 and every.unparsed_lines is msgspec.UNSET
    assert every.notes is msgspec.UNSET
    # a term only a continuation line holds finds the whole record (the prefilter's superset)
    (found,) = search(source, "Keystone.ticketstore").records
    assert found.message.split("\n") == [MAC[0].split(": ", 1)[1], *MAC[1:]]
    assert found.fields["app"] == "GoogleSoftwareUpdateAgent" and found.fields["pid"] == "21412"
    # ... and a term of its head shows it whole
    (head,) = search(source, '"All Products"').records
    assert head.message == found.message
    assert search(source, '"lockFile=<KSLockFile"').match_count == 1
    assert search(source, "Sandbox").records[0].message == "Sandbox: deny file-read-data"


def test_a_python_traceback_through_rsyslog_is_one_error_record(tmp_path: Path) -> None:
    lines = [
        "Dec 13 11:50:01 web1 billing[812]: charging order o-17",
        f"Dec 13 11:50:02 web1 billing[812]: {TRACEBACK[0]}",
        *TRACEBACK[1:],
        "Dec 13 11:50:03 web1 systemd[1]: billing.service: Main process exited, status=1",
    ]
    write(tmp_path, lines)
    source = syslog(tmp_path)
    every = search(source, "")
    assert every.match_count == 3 and every.unparsed_lines is msgspec.UNSET
    (crash,) = search(source, "level:ERROR ZeroDivisionError").records
    assert crash.message.split("\n") == TRACEBACK and crash.level == "ERROR"
    assert crash.fields["exception"] == "ZeroDivisionError" and crash.fields["app"] == "billing"
    assert crash.timestamp == "2026-12-13T11:50:02.000Z"
    assert search(source, "exception:ZeroDivisionError").match_count == 1
    assert search(source, "worker.py").match_count == 1
    assert search(source, "level:ERROR").match_count == 1


def test_a_logged_exception_and_a_chained_traceback_join_their_record(tmp_path: Path) -> None:
    """`logger.exception("charge failed")` through `SysLogHandler`: the message, then the
    traceback from its own unindented first line; a chained one goes on after its sentence."""
    chained = [
        "Traceback (most recent call last):",
        '  File "/srv/billing/db.py", line 5, in connect',
        "socket.timeout: timed out",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        *TRACEBACK,
    ]
    lines = ["<11>Dec 13 11:50:02 web1 billing[812]: charge failed", *chained]
    write(tmp_path, [*lines, "Dec 13 11:50:03 web1 billing[812]: retrying"])
    source = syslog(tmp_path)
    every = search(source, "")
    assert every.match_count == 2 and every.unparsed_lines is msgspec.UNSET
    (crash,) = search(source, "socket.timeout").records
    assert crash.message.split("\n") == ["charge failed", *(c for c in chained if c)]
    assert crash.level == "ERROR" and crash.fields["exception"] == "ZeroDivisionError"


# Python prints an exception's message as it is (`raise ValueError("bad config:\n...")`): its
# lines after the first, unindented, end the traceback
MESSAGE = [
    "ValueError: bad config:",
    "key 'region' missing",
    "Hint: set AWS_REGION or region in /etc/billing.toml",  # no exception of its own
]


def test_an_exceptions_message_over_lines_joins_its_record(tmp_path: Path) -> None:
    lines = [
        "Dec 13 11:50:01 web1 billing[812]: loading config",
        f"Dec 13 11:50:02 web1 billing[812]: {TRACEBACK[0]}",
        *TRACEBACK[1:3],
        *MESSAGE,
        "Dec 13 11:50:03 web1 systemd[1]: billing.service: Main process exited, status=1",
    ]
    write(tmp_path, lines)
    source = syslog(tmp_path)
    every = search(source, "")
    # before: 3 records and 2 lines not in the format, the message cut at its first line
    assert every.match_count == 3 and every.unparsed_lines is msgspec.UNSET
    (crash,) = search(source, "AWS_REGION").records
    assert crash.message.split("\n") == [*TRACEBACK[:3], *MESSAGE]
    assert crash.level == "ERROR" and crash.fields["exception"] == "ValueError"
    assert search(source, "level:ERROR region").match_count == 1
    assert search(source, "exception:ValueError").match_count == 1
    assert search(source, "exception:Hint").match_count == 0


def test_a_chained_traceback_after_a_message_over_lines_joins_too(tmp_path: Path) -> None:
    chained = [
        *TRACEBACK[:3],
        *MESSAGE,
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        *TRACEBACK[:3],
        "RuntimeError: billing could not start",
    ]
    lines = ["<11>Dec 13 11:50:02 web1 billing[812]: start failed", *chained]
    write(tmp_path, [*lines, "Dec 13 11:50:03 web1 billing[812]: retrying"])
    every = search(syslog(tmp_path), "")
    assert every.match_count == 2 and every.unparsed_lines is msgspec.UNSET
    (crash,) = [r for r in every.records if r.message.startswith("start failed")]
    assert crash.message.split("\n") == ["start failed", *(c for c in chained if c)]
    assert crash.fields["exception"] == "RuntimeError"


def test_a_message_goes_on_only_after_a_traceback_and_within_the_bound(tmp_path: Path) -> None:
    more = [f"line {i} of the message" for i in range(MAX_JOINED_LINES)]
    head = f"Dec 13 11:50:02 web1 billing[812]: {TRACEBACK[0]}"
    write(tmp_path, [head, *TRACEBACK[1:], *more, "Dec 13 11:50:03 web1 billing[812]: next"])
    every = search(syslog(tmp_path), "")
    (crash,) = [r for r in every.records if "Traceback" in r.message]
    assert crash.message.count("\n") == MAX_JOINED_LINES
    assert every.unparsed_lines == len(TRACEBACK) - 1  # past the bound: no record's


def test_rfc5424_records_take_their_continuation_lines(tmp_path: Path) -> None:
    lines = [
        "<14>1 2026-12-13T11:40:00.000Z web1 billing 812 - - Traceback (most recent call last):",
        *TRACEBACK[1:],
        "<14>1 2026-12-13T11:40:01.000Z web1 billing 812 - - config:",
        "    retries = 3",
    ]
    write(tmp_path, lines)
    source = syslog(tmp_path)
    every = search(source, "")
    assert every.match_count == 2 and every.unparsed_lines is msgspec.UNSET
    (crash,) = search(source, "ZeroDivisionError").records
    assert crash.level == "INFO"  # its PRI says so: the record's own level stands
    assert crash.fields["exception"] == "ZeroDivisionError"
    (config,) = search(source, "retries").records
    assert config.message == "config:\n    retries = 3"


def test_lines_not_after_a_record_stay_lines_not_in_the_format(tmp_path: Path) -> None:
    lines = [
        "    an indented line before any record",
        "Dec 13 11:50:01 web1 billing[812]: started",
        "ZeroDivisionError: not in a traceback",  # unindented, not syslog: as before
        "    indented after a line not in the format",
        "Dec 13 11:50:02 web1 billing[812]: stopped",
    ]
    write(tmp_path, lines)
    source = syslog(tmp_path)
    every = search(source, "")
    assert every.match_count == 2 and every.unparsed_lines == 3
    # each is matched as text, level-less
    found = search(source, "indented")
    assert found.match_count == 2 and found.unparsed_lines == 2
    assert {r.message for r in found.records} == {lines[0].strip(), lines[3].strip()}
    assert search(source, "ZeroDivisionError").records[0].level == ""
    # a query that matches none of them counts none of them, as before (per line)
    stopped = search(source, "stopped")
    assert stopped.match_count == 1 and stopped.unparsed_lines is msgspec.UNSET


def test_a_record_takes_at_most_the_bounded_lines(tmp_path: Path) -> None:
    more = [f"    frame {i}" for i in range(MAX_JOINED_LINES + 5)]
    write(tmp_path, ["Dec 13 11:50:01 web1 app[1]: dump", *more])
    source = syslog(tmp_path)
    every = search(source, "")
    (record,) = [r for r in every.records if r.message.startswith("dump")]
    assert record.message.count("\n") == MAX_JOINED_LINES
    assert every.unparsed_lines == 5  # past the bound: lines of no record, never dropped
    assert search(source, '"frame 1004"').match_count == 1
    assert search(source, '"frame 999"').match_count == 1


def test_the_prefilter_never_hides_a_continuation_line(tmp_path: Path) -> None:
    """Every word of a file of every shape above, and phrases of two words, answer as a full
    parse does (the prefilter runs on a record's lines joined: a superset)."""
    from datetime import UTC as utc

    from workers.sources.logs.formats import make_parser
    from workers.sources.logs.records import entry_matches
    from workers.sources.logs.source import parse_log_query

    lines = [
        "    an indented line before any record",
        *MAC,
        "orphan: not in the format",  # after a record without a traceback
        "    indented after a line not in the format",
        f"Dec 13 11:50:02 web1 billing[812]: {TRACEBACK[0]}",
        *TRACEBACK[1:],
        "<11>Dec 13 11:50:03 web1 billing[812]: charge failed",
        *TRACEBACK[:3],
        *MESSAGE,  # an exception's message over lines
        "<14>1 2026-12-13T11:50:04.000Z web1 billing 812 - - config:",
        "    retries = 3",
    ]
    write(tmp_path, lines)
    parser = make_parser("syslog", {}, utc, "", "auto", int(NOW * 1000))
    records = [e for line in lines for e in parser.feed(line + "\n")] + parser.flush()
    assert len(records) == 4 and parser.failed == 3
    words = sorted({w for line in lines for w in line.split() if '"' not in w})
    pairs = [
        " ".join(p) for line in lines for p in zip(line.split(), line.split()[1:], strict=False)
    ]
    queries = [*words, *(f'"{p}"' for p in pairs if '"' not in p), "level:ERROR", "-level:ERROR"]
    source = syslog(tmp_path)
    compared = 0
    for query in queries:
        try:
            parsed = parse_log_query(query)
        except SourceError:
            continue  # refused forms (a glued comma, parentheses): nothing to compare
        if any(c.field not in (None, "level") for c in parsed.clauses):
            continue  # `host:` words would name fields
        expected = sum(entry_matches(parsed, r) for r in records)
        found = search(source, query)
        extra = found.match_count - expected  # lines no record, matched as text
        assert 0 <= extra <= (found.unparsed_lines or 0), query
        compared += 1
    assert compared > 100


PEM_BODY = "MIIEpAIBAAKCAQEA7key79"


@pytest.mark.parametrize("query", ["", "MIIEpAIB", "key", "generated"])
@pytest.mark.parametrize("indented", [False, True])
def test_a_private_key_over_records_or_continuation_lines_shows_no_line_of_its_body(
    tmp_path: Path, query: str, indented: bool
) -> None:
    # Each line its own record (the prefilter skips the key's opening record for a guess at
    # its body: the source still follows the key), or the key's lines indented in one record.
    key = [
        "-----BEGIN RSA PRIVATE KEY-----",
        PEM_BODY,
        PEM_BODY[::-1],
        "-----END RSA PRIVATE KEY-----",
    ]
    stamp = "Dec 13 11:50:01 web1 keygen[7]: "
    body = [f"  {line}" if indented else f"{stamp}{line}" for line in key]
    write(tmp_path, [f"{stamp}generated a key:", *body, f"{stamp}key done"])
    found = search(syslog(tmp_path), query)
    shown = msgspec.json.encode(found).decode()
    assert PEM_BODY not in shown and PEM_BODY[::-1] not in shown
    assert found.unparsed_lines is msgspec.UNSET
    assert query != "" or found.match_count == (2 if indented else 6)


@pytest.mark.parametrize("guess", ['"S3cretPw-55"', "S3cretPw", "S3cretPx"])
def test_a_guess_at_a_secret_in_a_line_not_in_the_format_tells_nothing(
    tmp_path: Path, guess: str
) -> None:
    # as per line before: a line not in the format that passes the prefilter only by its
    # secret is skipped, not counted (a count would tell a right guess from a wrong one)
    record = "Dec 13 11:50:01 web1 api[7]: hi"
    write(tmp_path, [record, record, "starting with password=S3cretPw-55 now", record])
    found = search(syslog(tmp_path), guess)
    assert found.match_count == 0 and not found.notes


def test_a_lowercase_word_after_a_cut_traceback_is_no_exception_of_it(tmp_path: Path) -> None:
    # a traceback whose exception line was lost (the process killed), then a line of the
    # program's own output, unprefixed: 'done' is no exception class Python would print
    head = "Dec 13 11:40:00 web1 billing[88]: Traceback (most recent call last):"
    write(tmp_path, [head, *TRACEBACK[1:3], "done", "Dec 13 11:40:01 web1 billing[88]: next"])
    every = search(syslog(tmp_path), "")
    assert every.match_count == 2 and every.unparsed_lines == 1  # 'done', counted
    crashed = next(r for r in every.records if "Traceback" in r.message)
    assert "done" not in crashed.message and "exception" not in crashed.fields
    assert crashed.level == "ERROR"  # before: 'done' joined it, its exception 'done'


def test_every_line_the_format_reads_as_a_record_ends_an_exceptions_message(
    tmp_path: Path,
) -> None:
    # a line a user wrote (`Traceback ...` then `ValueError: x`) opens an exception's message;
    # RFC 5424 lines written without a PRI (`1 2026-...`) are records the parser reads, but
    # were taken as the rest of that message: five real records counted as one
    fake = [f"Dec 13 11:40:00 web1 app[1]: user said: {TRACEBACK[0]}", "ValueError: x"]
    real = [f"1 2026-12-13T11:50:{i:02}Z web1 app 1 - - real failure {i}" for i in range(4)]
    real.append(f"1 {int(NOW) - 60} web1 app 1 - - real failure 4")  # epoch seconds
    write(tmp_path, [*fake, *real])
    found = search(syslog(tmp_path), "failure")
    assert found.match_count == 5 and found.unparsed_lines is msgspec.UNSET
