"""A CLICKHOUSE backend that is down is said once at the default log level, and back up once
at the same level (a log read at WARNING shows both ends: before, the recovery was INFO, so at
the default level an outage never ended), while every call still answers ERROR/UNAVAILABLE
(never NO_EVIDENCE) and no line names the server, the password or a request's query string."""

from __future__ import annotations

import contextlib
import io
import logging
import socket
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from logs_helpers import chdb_client

from contracts import ErrorCode, LogsUpstream, QueryLogsRequest, Topic
from tests.logging_capture import root_restored
from workers.logging_setup import configure_logging
from workers.sources import SourceError
from workers.sources.logs.clickhouse import OTEL_LOGS_DDL, ClickhouseLogSource
from workers.sources.logs.config import parse_logs_config
from workers.sources.logs.router import LogRouter
from workers.sources.logs.source import parse_log_query
from workers.sources.registry import warm_up

SECRET = "s3cret-ch-pw"
NOW = 1_796_000_000.0
REQUEST = QueryLogsRequest(topic=Topic.APPLICATION, query="timeout", lookback_minutes=5)


@contextlib.contextmanager
def captured(level: str) -> Iterator[io.StringIO]:
    """The worker's own logging setup at `level`, into a buffer; the root logger restored."""
    with root_restored() as buffer:
        configure_logging(level, stream=buffer)
        yield buffer


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _router(dsn: str, table: str = "otel_logs", client: Any = None) -> LogRouter:
    config = parse_logs_config(
        f'[scan]\nmax_seconds = 1\n[clickhouse]\ndsn = "{dsn}"\npassword_env = "CH_PW"\n'
        'connect_timeout_s = 1\n[topics.APPLICATION]\nbackend = "clickhouse"\n'
        f'table = "{table}"\n[topics.SYSTEM_EVENTS]\nbackend = "clickhouse"\n'
        f'table = "{table}"\n'
    )
    assert config.clickhouse is not None
    shared = ClickhouseLogSource(
        config.clickhouse, dict(config.topics), config, {"CH_PW": SECRET},  # type: ignore[arg-type]
        client=client, clock=lambda: NOW,
    )  # fmt: skip
    return LogRouter(dict.fromkeys(config.topics, shared))


async def _unavailable(router: LogRouter, topic: Topic = Topic.APPLICATION) -> None:
    request = QueryLogsRequest(topic=topic, query="timeout", lookback_minutes=5)
    with pytest.raises(SourceError) as caught:
        await router.fetch(request)
    assert caught.value.code is ErrorCode.UNAVAILABLE


async def test_an_unreachable_server_is_one_warning_at_the_default_level() -> None:
    port = _closed_port()
    router = _router(f"http://reader@127.0.0.1:{port}/otel")
    with captured("WARNING") as out:
        await warm_up({"query_logs": router}, 10.0)  # type: ignore[dict-item]
        for topic in (Topic.APPLICATION, Topic.SYSTEM_EVENTS, Topic.APPLICATION):
            await _unavailable(router, topic)
    await router.aclose()
    lines = out.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert " WARNING aci.sources.clickhouse " in lines[0] and "unreachable" in lines[0]
    assert "APPLICATION" in lines[0] and "SYSTEM_EVENTS" in lines[0]
    for secret in (SECRET, str(port), "127.0.0.1", "query_id", "?", "reader"):
        assert secret not in lines[0]


async def test_at_info_the_driver_lines_show_but_name_no_server_or_query_string() -> None:
    port = _closed_port()
    router = _router(f"http://reader@127.0.0.1:{port}/otel")
    with captured("INFO") as out:
        for _ in range(2):
            await _unavailable(router)
    await router.aclose()
    text = out.getvalue()
    assert "urllib3" in text and text.count(" WARNING aci.sources.clickhouse ") == 1, text
    for secret in (SECRET, str(port), "127.0.0.1", "query_id"):
        assert secret not in text


class _Flaky:
    """A client that refuses connections while `down`, otherwise the in-process engine."""

    def __init__(self) -> None:
        self.inner, self.down = chdb_client(), True

    def query(self, *args: Any, **kwargs: Any) -> Any:
        if self.down:
            raise ConnectionRefusedError(111, "Connection refused")
        return self.inner.query(*args, **kwargs)


async def test_each_change_of_state_is_one_line_and_every_call_is_still_told() -> None:
    table = f"otel_logs_{uuid.uuid4().hex[:12]}"
    chdb_client().command(OTEL_LOGS_DDL.format(table=table))
    chdb_client().insert(
        table,
        [[datetime.fromtimestamp(NOW - 30, UTC), "ERROR", 17, "shop", "timeout", {}, {}]],
        column_names=["Timestamp", "SeverityText", "SeverityNumber", "ServiceName", "Body",
                      "LogAttributes", "ResourceAttributes"],
    )  # fmt: skip
    client = _Flaky()
    router = _router("http://reader@ch.internal:8123/otel", table, client)
    with captured("WARNING") as out:  # the default level shows both ends of each outage
        for down in (True, True, False, False, True, True, False):
            client.down = down
            if down:
                await _unavailable(router)
            else:
                found = await router.fetch(REQUEST)
                assert isinstance(found, LogsUpstream) and found.match_count == 1
    levels = [line.split()[2:4] for line in out.getvalue().splitlines()]
    assert levels == [["WARNING", "aci.sources.clickhouse"]] * 4, out.getvalue()
    said = out.getvalue().splitlines()
    assert "unreachable" in said[0] and "answers again" in said[1], said
    assert SECRET not in out.getvalue() and "ch.internal" not in out.getvalue()


class _ByThread:
    """A client that refuses connections in the thread named `down`, and otherwise answers
    at once with no rows: two calls racing, one failing and one succeeding."""

    def query(self, sql: str, **_: Any) -> Any:
        if threading.current_thread().name == "down":
            raise ConnectionRefusedError(111, "Connection refused")
        rows = [[1]] if "system.columns" in sql or "count()" in sql else []
        return type("Result", (), {"result_rows": rows})()


class _Gate(logging.Filter):
    """Holds the first "answers again" line before any handler sees it, until `go`: the
    thread that saw the store answer is preempted between its change of state and its line."""

    def __init__(self) -> None:
        super().__init__()
        self.said: list[str] = []
        self.holding, self.go = threading.Event(), threading.Event()

    def filter(self, record: logging.LogRecord) -> bool:
        up = "is unreachable" not in record.getMessage()
        if up and not self.holding.is_set():
            self.holding.set()
            self.go.wait(10)
        self.said.append("up" if up else "down")
        return True


def test_racing_calls_say_the_changes_in_the_order_they_happened() -> None:
    # Before: the line was logged after the lock: a call that saw the store answer changed
    # the state, a call that saw it down changed it back and said so, then the first said
    # "answers again": the last line told the operator the store was up while every call
    # failed, and no later failure warned again (the state was already "down").
    router = _router("http://reader@ch.internal:8123/otel", client=_ByThread())
    source: Any = router.backends[Topic.APPLICATION]
    gate, logger = _Gate(), logging.getLogger("aci.sources.clickhouse")
    old_level = logger.level
    logger.addFilter(gate)
    logger.setLevel(logging.INFO)

    def call() -> None:
        with contextlib.suppress(SourceError):
            source.search(REQUEST, parse_log_query(REQUEST.query), 1.0)

    try:
        threads = {n: threading.Thread(target=call, name=n) for n in ("down", "up", "down again")}
        threads["down"].start()
        threads["down"].join(10)  # down, said
        threads["up"].start()
        assert gate.holding.wait(10)  # up: its state is set, its line not yet out
        threads["down again"] = threading.Thread(target=call, name="down")
        threads["down again"].start()
        threads["down again"].join(0.5)  # down again, meanwhile
        gate.go.set()
        for thread in threads.values():
            thread.join(10)
    finally:
        gate.go.set()
        logger.removeFilter(gate)
        logger.setLevel(old_level)
    assert gate.said == ["down", "up", "down"]  # the last line says it is down
