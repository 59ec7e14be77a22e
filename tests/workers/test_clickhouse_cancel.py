"""A cancelled `query_logs` call on ClickHouse stops its statement in the engine (issue 32):
through the whole pipeline (client → request stream → admission → the worker's poll of the
cancel mark → the source's `KILL QUERY` from a second chDB handle), on the real Redis and the
real engine in-process (chDB)."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from typing import Any

import anyio
import pytest
from logs_helpers import chdb_client, chdb_other_client

from contracts import QueryLogsRequest, Topic
from pipeline.client import EvidenceClient, ToolCall
from pipeline.settings import Settings
from tests.pipeline.helpers import assert_exactly_once, books, loads, running_worker
from workers.sources import SourceError
from workers.sources.logs.clickhouse import ClickhouseLogSource
from workers.sources.logs.config import ClickhouseTopic, parse_logs_config
from workers.sources.logs.router import LogRouter

pytestmark = [pytest.mark.redis]
# Seconds within which a cancel must have ended the statement in the engine: a tenth of the
# 30 s deadline that would otherwise end it (the waits below give up at 3 s).
PROMPT_S = 3.0

# A view with the `otel_logs` columns over 10^11 generated rows: a word no row holds makes
# the newest-rows statement scan for far longer than the test (until `max_execution_time`).
ENDLESS_VIEW = """CREATE VIEW {table} AS SELECT
  now64(9) - INTERVAL 1 MINUTE AS Timestamp, toDateTime(now() - 60) AS TimestampTime, 'INFO' AS SeverityText,
  toUInt8(9) AS SeverityNumber, 'shop' AS ServiceName, concat('line ', toString(number)) AS Body,
  map('k', 'v') AS LogAttributes, map('k', 'v') AS ResourceAttributes
FROM numbers(100000000000)"""


def running(monitor: Any) -> int:
    """How many statements of the source (`log_comment` aci-…) the engine runs now."""
    rows = monitor.query(
        "SELECT count() FROM system.processes WHERE startsWith(Settings['log_comment'], 'aci-')"
    ).result_rows
    return int(rows[0][0])


def endless_source(stopper: Any) -> ClickhouseLogSource:
    table = f"otel_endless_{uuid.uuid4().hex[:12]}"
    chdb_client().command(ENDLESS_VIEW.format(table=table))
    config = parse_logs_config(
        '[scan]\nmax_seconds = 30\n[clickhouse]\ndsn = "chdb://memory"\n'
        f'[topics.APPLICATION]\nbackend = "clickhouse"\ntable = "{table}"\n'
    )
    entry = config.topics[Topic.APPLICATION]
    assert isinstance(entry, ClickhouseTopic) and config.clickhouse is not None
    return ClickhouseLogSource(
        config.clickhouse, {Topic.APPLICATION: entry}, config, {},
        client=chdb_client(), stop_client=stopper,
    )  # fmt: skip


async def wait_running(monitor: Any, want: int, within: float) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < within:
        if running(monitor) == want:
            return time.monotonic() - started
        await anyio.sleep(0.02)
    return None


@pytest.mark.serial
async def test_a_cancelled_scan_stops_in_the_engine_long_before_its_deadline(
    redis: Any, prefix: str
) -> None:
    monitor = chdb_other_client()
    source = endless_source(chdb_other_client())
    settings = Settings(prefix=prefix, deadline_s=30.0, visibility_timeout_s=35.0)
    call = ToolCall(
        tool="query_logs",
        tool_call_id="call_ch_1",
        arguments=json.dumps({"topic": "APPLICATION", "query": "nowhere-to-be-found"}),
    )
    router = LogRouter({Topic.APPLICATION: source})
    async with (
        EvidenceClient(redis, settings) as client,
        running_worker(redis, settings, {"query_logs": router}),
    ):
        await client.submit_many("s-ch", [call])
        assert await wait_running(monitor, 1, 10) is not None  # the engine runs it
        await anyio.sleep(0.5)
        assert running(monitor) == 1
        started = time.monotonic()
        assert await client.cancel("s-ch", "call_ch_1")
        stopped = await wait_running(monitor, 0, 3)
        final = await client.wait("s-ch", ["call_ch_1"], timeout=5)
        ended = time.monotonic() - started
    print(f"\nClickHouse statement gone {stopped} s after the cancel was sent; final at {ended} s")
    # The cancel, not the call's 30 s deadline, ends the statement. How soon is the machine's
    # figure (printed above; under 1 s on a quiet VM, 1.32 s on a 2 GHz one in a CI run), so
    # the bound is a tenth of the deadline, not a speed.
    assert stopped is not None and stopped < PROMPT_S
    assert ended < PROMPT_S + 0.5
    model = loads(final["call_ch_1"].model)
    assert model["error"]["code"] == "CANCELLED"
    assert_exactly_once(await books(redis, prefix, "s-ch"), ["call_ch_1"])


@pytest.mark.serial
async def test_a_cancelled_fetch_returns_at_once_and_kills_its_statement() -> None:
    """The source alone: cancelling `fetch` frees the caller at once (the thread is
    abandoned) and the engine no longer runs the statement."""
    monitor = chdb_other_client()
    source = endless_source(chdb_other_client())
    request = QueryLogsRequest(topic=Topic.APPLICATION, query="nowhere-to-be-found")
    async with anyio.create_task_group() as tg:
        tg.start_soon(source.fetch, request)
        assert await wait_running(monitor, 1, 10) is not None
        started = time.monotonic()
        tg.cancel_scope.cancel()
    returned = time.monotonic() - started
    stopped = await wait_running(monitor, 0, 3)
    print(f"\nfetch returned {returned:.3f} s after the cancel; statement gone {stopped} s later")
    assert returned < 0.5
    assert stopped is not None and stopped < PROMPT_S


async def test_without_a_stop_client_the_cancel_still_frees_the_caller() -> None:
    monitor = chdb_other_client()
    source = endless_source(None)
    assert source.stop("aci-none") is False  # an injected client without a stop client
    request = QueryLogsRequest(topic=Topic.APPLICATION, query="nowhere-to-be-found")
    # (the engine may give up first on its own estimate: a TIMEOUT, not what this checks)
    with anyio.move_on_after(1.0), contextlib.suppress(SourceError):
        await source.fetch(request)
    assert running(monitor) <= 1
    # Leave the engine clean for the next test.
    monitor.query("KILL QUERY WHERE startsWith(Settings['log_comment'], 'aci-') ASYNC")
    assert await wait_running(monitor, 0, 3) is not None
