"""Lines over `max_line_bytes` in text formats whose records span lines (`longlines`): a
skipped line whose first bytes are a record's head is that record's, timed by its head; a
source whose fixed service the query excludes cannot match. Each count stays exact only where
the skipped line provably cannot match (issue 31: one request body logged whole made every
call of the topic that matched nothing else an ERROR until the file rotated)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from logs_helpers import file_source, search

from contracts import Topic
from workers.sources import SourceError
from workers.sources.logs.config import parse_logs_config
from workers.sources.logs.file_source import FileLogSource

NOW = 1_796_000_000.0  # 2026-11-30T00:53:20Z
CAP = "[scan]\nmax_line_bytes = 4096\n"
BODY = '{"items": [' + ", ".join(f'{{"sku": "A-{i:05d}", "qty": 1}}' for i in range(2000)) + "]}"
OLD = "2026-11-29 22:10:07,412"  # hours before a 60 minutes' window
NEW = "2026-11-30 00:50:02,918"  # in it


def _write(path: Path, text: str) -> None:
    path.write_text(text)
    os.utime(path, (NOW - 120, NOW - 120))


def _app_log(stamp: str, tail: str = "") -> str:
    return (
        f"{OLD} INFO  [http-nio-8080-exec-1] c.e.shop.OrderController - order 1041 accepted\n"
        f"{stamp} DEBUG [http-nio-8080-exec-3] c.e.shop.RequestLogger - POST /api/orders "
        f"body={BODY}\n{tail}"
        f"{NEW} INFO  [http-nio-8080-exec-4] c.e.shop.OrderController - order 1042 accepted\n"
    )


def test_a_long_head_before_the_window_cannot_match(tmp_path: Path) -> None:
    # Before: `refused` (in no line) was an EXECUTION error "... longer than max_line_bytes
    # ... the count is unknown", and `accepted` a lower bound, though the skipped record is
    # dated two hours before the window.
    _write(tmp_path / "app.log", _app_log(OLD))
    source = file_source(tmp_path, "log4j", ["app.log"], now=NOW, top=CAP)
    nothing = search(source, "refused")
    assert nothing.match_count == 0 and not nothing.match_count_lower_bound
    found = search(source, "accepted")
    assert found.match_count == 1 and not found.match_count_lower_bound
    assert not found.notes or not any("max_line_bytes" in n for n in found.notes)
    everything = search(source, "", lookback=240)  # a window that holds it: it may match
    assert everything.match_count_lower_bound


def test_a_long_head_in_the_window_without_a_term_cannot_match(tmp_path: Path) -> None:
    _write(tmp_path / "app.log", _app_log(NEW))
    source = file_source(tmp_path, "log4j", ["app.log"], now=NOW, top=CAP)
    nothing = search(source, "refused")  # its own record, and not in it
    assert nothing.match_count == 0 and not nothing.match_count_lower_bound
    with pytest.raises(SourceError) as caught:  # in it: it may match, and nothing else did
        search(source, "A-01999")
    assert "max_line_bytes" in caught.value.message


def test_a_long_heads_stack_trace_is_its_own(tmp_path: Path) -> None:
    # The lines after a skipped head continue its record, not the record before it: before,
    # the trace joined `order 1041 accepted` and `SocketTimeoutException` matched that record.
    trace = (
        "java.net.SocketTimeoutException: Read timed out\n"
        "\tat java.base/java.net.SocketInputStream.read(SocketInputStream.java:183)\n"
        "\tat c.e.shop.PaymentClient.charge(PaymentClient.java:88)\n"
    )
    _write(tmp_path / "app.log", _app_log(NEW, trace).replace(OLD, NEW, 1))
    source = file_source(tmp_path, "log4j", ["app.log"], now=NOW, top=CAP)
    with pytest.raises(SourceError) as caught:  # the skipped record holds it: unknown
        search(source, "SocketTimeoutException")
    assert "max_line_bytes" in caught.value.message
    nothing = search(source, "refused")  # in neither its head nor its trace
    assert nothing.match_count == 0 and not nothing.match_count_lower_bound
    _write(tmp_path / "app.log", _app_log(OLD, trace))
    old = search(source, "SocketTimeoutException")  # its record is before the window
    assert old.match_count == 0 and not old.match_count_lower_bound


def test_a_long_line_that_is_no_head_may_match(tmp_path: Path) -> None:
    # A line of a stack trace over the cap: from its first bytes it is not known to be no
    # head (a head may need more bytes; in some formats a head may start with a space), so
    # not known to be timed by the record before it, even one before the window.
    text = (
        f"{OLD} ERROR [http-nio-8080-exec-1] c.e.shop.OrderController - order 1041 failed\n"
        f"java.lang.IllegalStateException: bad cart {BODY}\n"
        f"{NEW} INFO  [http-nio-8080-exec-4] c.e.shop.OrderController - order 1042 accepted\n"
    )
    _write(tmp_path / "app.log", text)
    source = file_source(tmp_path, "log4j", ["app.log"], now=NOW, top=CAP)
    with pytest.raises(SourceError) as caught:
        search(source, "refused")
    assert "max_line_bytes" in caught.value.message
    assert search(source, "accepted").match_count_lower_bound


def test_a_cap_under_4_kib_reads_no_head_from_a_long_line(tmp_path: Path) -> None:
    # A head may need more than the few bytes a low cap reads: such a line may match.
    _write(tmp_path / "app.log", _app_log(OLD))
    top = "[scan]\nmax_line_bytes = 100\n"
    with pytest.raises(SourceError):
        search(file_source(tmp_path, "log4j", ["app.log"], now=NOW, top=top), "refused")


def test_another_services_long_line_leaves_the_count_exact(tmp_path: Path) -> None:
    # Before: `service:payment-service` was a lower bound (an ERROR with nothing else
    # matched) because order-service's file held a long line.
    (tmp_path / "order").mkdir()
    (tmp_path / "payment").mkdir()
    _write(tmp_path / "order" / "app.log", _app_log(NEW))
    _write(
        tmp_path / "payment" / "app.log",
        f"{NEW} WARN  [grpc-default-executor-2] c.e.pay.ChargeService - charge 77 retried\n",
    )
    config = parse_logs_config(
        f'roots = ["{tmp_path}"]\n{CAP}\n[topics.APPLICATION]\nbackend = "file"\n'
        f'format = "log4j"\nservice = "order-service"\npaths = ["{tmp_path}/order/*.log"]\n'
        f'[[topics.APPLICATION.sources]]\nformat = "log4j"\nservice = "payment-service"\n'
        f'paths = ["{tmp_path}/payment/*.log"]\n'
    )
    entry = config.topics[Topic.APPLICATION]
    source = FileLogSource(Topic.APPLICATION, entry, config, clock=lambda: NOW)  # type: ignore[arg-type]
    found = search(source, "service:payment-service retried")
    assert found.match_count == 1 and not found.match_count_lower_bound
    nothing = search(source, "service:payment-service A-01999")
    assert nothing.match_count == 0 and not nothing.match_count_lower_bound
    with pytest.raises(SourceError):  # order-service's own: it may match
        search(source, "service:order-service A-01999")


@pytest.mark.parametrize(
    ("fmt", "old", "new"),
    [
        (
            "plain",
            "2026-11-29 22:10:07 0 [Note] InnoDB: query body ",
            "2026-11-30 00:50:02 0 [Note] InnoDB: buffer pool ready",
        ),
        (
            "apache_error",
            "[Sun Nov 29 22:10:07.412 2026] [php:error] [pid 4121] [client 10.0.0.7:51234] body ",
            "[Mon Nov 30 00:50:02.918 2026] [core:notice] [pid 4121] AH00094: Command line",
        ),
        (
            "nginx_error",
            "2026/11/29 22:10:07 [error] 31#31: *7 upstream sent too big header: ",
            "2026/11/30 00:50:02 [notice] 31#31: signal process started",
        ),
    ],
)
def test_a_long_head_before_the_window_in_other_text_formats(
    tmp_path: Path, fmt: str, old: str, new: str
) -> None:
    _write(tmp_path / "app.log", f"{old}{BODY}\n{new}\n")
    source = file_source(tmp_path, fmt, ["app.log"], now=NOW, top=CAP)
    nothing = search(source, "refused")
    assert nothing.match_count == 0 and not nothing.match_count_lower_bound
    assert search(source, "", lookback=240).match_count_lower_bound  # a window that holds it


def test_a_head_whose_message_stops_before_the_cut_is_not_taken() -> None:
    # The rest of a line read in part is only known to be message when the message runs to the
    # cut; a head whose message stops before it (`log4j`'s pipes: logger and thread after the
    # message) may not be the whole line's.
    from workers.sources.logs.multiline import HeadParser
    from workers.sources.logs.records import Entry

    def head(text: str) -> tuple[object, object]:
        message = text[24:].removesuffix(" | main")
        return (lambda: 1_796_000_000_000), (lambda at: Entry(at, "INFO", "", message))

    parser = HeadParser(head, "shop")  # type: ignore[arg-type]
    text = "2026-11-30 00:50:02.918 " + "x" * 8000
    assert parser.skip(text) == 1_796_000_000_000
    assert parser.skip(text + " | main") is None  # (its message stops 7 characters before)


def test_an_access_logs_long_line_may_match_unless_its_service_is_excluded(
    tmp_path: Path,
) -> None:
    # An access log's message is composed of the whole line (`GET /x HTTP/1.1 414 150`): its
    # head is not known from its first bytes, so a long one may match even outside the
    # window; a `service:` clause its source's service fails still excludes it.
    query = "q=" + "a%20" * 3000
    _write(
        tmp_path / "access.log",
        f'10.0.0.7 - - [29/Nov/2026:22:10:07 +0000] "GET /api/search?{query} HTTP/1.1" 414 150 '
        '"-" "curl/8.5.0"\n'
        '10.0.0.7 - - [30/Nov/2026:00:50:02 +0000] "GET /healthz HTTP/1.1" 200 2 "-" "kube-probe/1.31"\n',
    )
    extra = 'service = "edge"\n'
    source = file_source(tmp_path, "nginx_access", ["access.log"], now=NOW, top=CAP, extra=extra)
    with pytest.raises(SourceError):
        search(source, "refused")
    nothing = search(source, "service:checkout refused")
    assert nothing.match_count == 0 and not nothing.match_count_lower_bound
