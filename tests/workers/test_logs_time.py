"""Incident time at agent level (issue 31): a post-mortem pinned three days back, a replay
re-executed a day later over the same window, a wrong timezone reported, `--as-of` end to end.

Every call goes through the queue: a submitter appends, a worker admits (deciding the window)
and runs the FILE backend over files written here by Python's `logging` as JSON lines.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.fleet import worker_processes
from contracts import AsOfError, QueryLogsRequest, Topic
from pipeline.client import EvidenceClient, ToolCall
from pipeline.keys import Keys
from pipeline.settings import Settings
from tests.conftest import REDIS_URL
from tests.pipeline.helpers import running_worker
from workers.replay import Selection, load_redis
from workers.replay_diff import reexecute
from workers.sources.logs.config import parse_logs_config
from workers.sources.logs.records import format_ms
from workers.sources.logs.router import LogRouter
from workers.sources.registry import warm_up

pytestmark = pytest.mark.redis
ROOT = Path(__file__).resolve().parents[2]
DAY_S = 86_400


def write_incident(folder: Path, t0: float, *, zone: str = "+00:00") -> None:
    """An hour of app log around `t0` (epoch s) as Python's logging writes JSON lines: routine
    requests every 30 s, pool timeouts in the ten minutes before `t0`. `zone`: the offset the
    writer's times carry (written without it: as a host in that zone writes local time)."""
    folder.mkdir(parents=True, exist_ok=True)
    offset = timedelta(hours=int(zone[:3]), minutes=int(zone[4:]))
    lines = []
    for i in range(120):
        at = t0 - 3600 + i * 30
        local = datetime.fromtimestamp(at, UTC) + offset
        stamp = local.replace(tzinfo=None).isoformat(timespec="milliseconds")
        lines.append({"timestamp": stamp, "level": "INFO", "event": f"GET /orders/{i} 200"})
        if at >= t0 - 600:
            lines.append({"timestamp": stamp, "level": "ERROR",
                          "event": "HikariPool-1 - Connection is not available"})  # fmt: skip
    path = folder / "app.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    os.utime(path, (t0, t0))  # as unpacked from the incident's tarball


def config_text(folder: Path, zone: str = "UTC") -> str:
    return (
        f'roots = ["{folder}"]\n[topics.APPLICATION]\nbackend = "file"\nformat = "jsonl"\n'
        f'paths = ["{folder}/*.jsonl"]\ntimezone = "{zone}"\n'
    )


def router(folder: Path, zone: str = "UTC", clock: Any = None) -> LogRouter:
    config = parse_logs_config(config_text(folder, zone))
    built = LogRouter.from_config(config, {})
    if clock is not None:
        for backend in built.backends.values():
            backend.clock = clock  # type: ignore[attr-defined]
    return built


def logs_call(tool_call_id: str, query: str, lookback: int = 30) -> ToolCall:
    args = {"topic": "APPLICATION", "query": query, "lookback_minutes": lookback}
    return ToolCall(tool="query_logs", tool_call_id=tool_call_id, arguments=args)


def views(result: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    return msgspec.json.decode(result.model), msgspec.json.decode(result.control)


def iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).isoformat()


async def test_a_post_mortem_pinned_three_days_back_finds_the_incident(
    prefix: str, redis: Any, tmp_path: Path
) -> None:
    t0 = time.time() - 3 * DAY_S
    write_incident(tmp_path / "logs", t0)
    settings = Settings(prefix=prefix, redis_url=REDIS_URL)
    sources = {"query_logs": router(tmp_path / "logs")}
    async with running_worker(redis, settings, sources), EvidenceClient(redis, settings) as client:
        pinned = await client.call("pm", logs_call("c1", "level:ERROR"), as_of=iso(t0), timeout=20)
        unpinned = await client.call("pm", logs_call("c2", "level:ERROR"), timeout=20)
        client.pin_as_of("pm-2", iso(t0))  # the whole session at the incident
        session = await client.call("pm-2", logs_call("c3", "Connection"), timeout=20)
    assert pinned is not None and unpinned is not None and session is not None
    model, control = views(pinned)
    assert model["evidence_status"] == "EVIDENCE_FOUND"
    assert control["match_count"] == 20  # every timeout of the ten minutes before t0
    assert model["scope"]["end_time"] == datetime.fromtimestamp(t0, UTC).isoformat(
        timespec="milliseconds"
    ).replace("+00:00", "Z")
    scope = control["scope"]
    assert scope["as_of"] == model["scope"]["end_time"]
    assert (scope["start_time"], scope["end_time"]) == (
        model["scope"]["start_time"], model["scope"]["end_time"],
    )  # fmt: skip
    assert "as_of" not in model["scope"]  # the model sees the window, never a harness knob
    # Unpinned: the window is now; every record was read, none fell in it, and it says where.
    model, control = views(unpinned)
    assert model["evidence_status"] == "NO_EVIDENCE"
    assert control["record_times"]["nearest_before"] <= scope["end_time"]
    assert "nearest_after" not in control["record_times"]
    assert control["scope_fingerprint"] != views(pinned)[1]["scope_fingerprint"]
    assert views(session)[1]["match_count"] == 20


async def test_a_future_as_of_is_refused_before_anything_is_sent(prefix: str, redis: Any) -> None:
    settings = Settings(prefix=prefix, redis_url=REDIS_URL)
    async with EvidenceClient(redis, settings) as client:
        with pytest.raises(AsOfError, match="in the future"):
            await client.call("s", logs_call("c1", "x"), as_of=iso(time.time() + 3600))
        with pytest.raises(AsOfError, match="not an ISO 8601"):
            client.pin_as_of("s", "last tuesday")
    assert await redis.exists(Keys(prefix).for_session("s").requests) == 0


async def test_a_replay_re_executed_a_day_later_reads_the_same_window(
    prefix: str, redis: Any, tmp_path: Path
) -> None:
    now = time.time()
    write_incident(tmp_path / "logs", now - 60)
    settings = Settings(prefix=prefix, redis_url=REDIS_URL)
    sources = {"query_logs": router(tmp_path / "logs")}
    async with running_worker(redis, settings, sources), EvidenceClient(redis, settings) as client:
        found = await client.call("rx", logs_call("c1", "level:ERROR", lookback=15), timeout=20)
    assert found is not None and views(found)[0]["evidence_status"] == "EVIDENCE_FOUND"
    [recording] = await load_redis(redis, settings, Selection(session="rx"))
    a_day_later = {"query_logs": router(tmp_path / "logs", clock=lambda: now + DAY_S)}
    verdict = await reexecute(recording, settings, a_day_later)
    assert verdict.outcome == "identical", verdict.changes  # start/end compared too
    # A window resolved anew (no recorded end: the day-later clock) reads nothing there.
    request = QueryLogsRequest(topic=Topic.APPLICATION, query="level:ERROR", lookback_minutes=15)
    assert (await a_day_later["query_logs"].fetch(request)).match_count == 0


async def test_a_wrong_timezone_is_reported_at_start_and_in_the_control_view(
    prefix: str, redis: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The host wrote local time (+08:00) without a zone; the topic says UTC: every record
    # reads eight hours in the future.
    write_incident(tmp_path / "logs", time.time() - 60, zone="+08:00")
    sources = {"query_logs": router(tmp_path / "logs", zone="UTC")}
    with caplog.at_level(logging.WARNING):
        await warm_up(sources, 10.0)
    warned = [r.getMessage() for r in caplog.records if "in the future" in r.getMessage()]
    assert len(warned) == 1 and "topic APPLICATION" in warned[0] and "timezone" in warned[0]
    assert str(tmp_path) not in warned[0]
    settings = Settings(prefix=prefix, redis_url=REDIS_URL)
    async with running_worker(redis, settings, sources), EvidenceClient(redis, settings) as client:
        result = await client.call("tz", logs_call("c1", "level:ERROR"), timeout=20)
    assert result is not None
    model, control = views(result)
    assert model["evidence_status"] == "NO_EVIDENCE"
    times = control["record_times"]
    assert times["future_records"] == 140 and "nearest_after" in times
    assert "record_times" not in model


def test_cli_as_of_through_the_queue_with_a_real_worker(
    prefix: str, redis: Any, tmp_path: Path
) -> None:
    t0 = time.time() - 3 * DAY_S
    write_incident(tmp_path / "logs", t0)
    config = tmp_path / "logs.toml"
    config.write_text(config_text(tmp_path / "logs"))
    env = dict(os.environ, ACI_REDIS_URL=REDIS_URL, ACI_PREFIX=prefix,
               ACI_LOGS_CONFIG=str(config))  # fmt: skip
    args = json.dumps({"topic": "APPLICATION", "query": "level:ERROR", "lookback_minutes": 30})

    def cli(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "app.cli", "call", "query_logs", "--session", "cli-pm",
             "--args", args, "--timeout", "30", *extra],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=90, check=False,
        )  # fmt: skip

    calls = tmp_path / "calls.jsonl"
    calls.write_text(json.dumps({"id": "s1", "tool": "query_logs", "arguments": args}) + "\n")
    with worker_processes(env, 1, quiet=True):
        pinned = cli("--id", "c1", "--as-of", iso(t0))
        now = cli("--id", "c2")
        naive = cli("--id", "c4", "--as-of", iso(t0).removesuffix("+00:00"))  # read as UTC
        submitted = subprocess.run(
            [sys.executable, "-m", "app.cli", "submit", "--file", str(calls), "--session",
             "cli-sub", "--as-of", iso(t0), "--wait", "--timeout", "30"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=90, check=False,
        )  # fmt: skip
        control = subprocess.run(
            [sys.executable, "-m", "app.cli", "views", "--session", "cli-sub", "--view",
             "control"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=90, check=False,
        )  # fmt: skip
    assert json.loads(submitted.stdout)["ready"] == 1, submitted.stderr
    assert json.loads(control.stdout.splitlines()[0])["match_count"] == 20
    assert pinned.returncode == 0, pinned.stderr
    out = json.loads(pinned.stdout)
    assert out["model"]["evidence_status"] == "EVIDENCE_FOUND"
    assert out["control"]["match_count"] == 20 and "as_of" in out["control"]["scope"]
    assert json.loads(now.stdout)["model"]["evidence_status"] == "NO_EVIDENCE"
    assert json.loads(naive.stdout)["control"]["match_count"] == 20
    assert "no zone: read as UTC" in naive.stderr
    bad = cli("--id", "c3", "--as-of", "2026-03-14 25:00")
    assert bad.returncode == 2 and "not an ISO 8601" in bad.stderr


async def test_mcp_meta_and_server_as_of_pin_calls_and_a_bad_one_is_that_calls_error(
    prefix: str, redis: Any, tmp_path: Path
) -> None:
    from mcp import Client

    from hosts import mcp_server
    from hosts.mcp_time import AS_OF_META_KEY

    t0 = time.time() - 3 * DAY_S
    write_incident(tmp_path / "logs", t0)
    settings = Settings(prefix=prefix, redis_url=REDIS_URL)
    sources = {"query_logs": router(tmp_path / "logs")}
    args = {"topic": "APPLICATION", "query": "level:ERROR", "lookback_minutes": 30}
    id_key = mcp_server.TOOL_CALL_ID_META_KEY
    async with running_worker(redis, settings, sources), EvidenceClient(redis, settings) as ev:
        queued = mcp_server.build_server(mcp_server.queue_runner(ev, 20.0), session="mcp-pm")
        async with Client(queued) as client:
            pinned = await client.call_tool(
                "query_logs", args, meta={id_key: "m1", AS_OF_META_KEY: iso(t0)}
            )
            unpinned = await client.call_tool("query_logs", args, meta={id_key: "m2"})
            bad = await client.call_tool(
                "query_logs", args, meta={id_key: "m3", AS_OF_META_KEY: "last tuesday"}
            )
    assert pinned.structured_content["evidence_status"] == "EVIDENCE_FOUND"
    assert unpinned.structured_content["evidence_status"] == "NO_EVIDENCE"
    assert bad.is_error and bad.structured_content["error"]["code"] == "SCHEMA"
    assert "not an ISO 8601" in bad.structured_content["error"]["message"]
    # The server's --as-of pins every call (here in-process, the stages run locally).
    local = mcp_server.build_server(
        mcp_server.local_runner(sources, settings), session="mcp-local", as_of=iso(t0)
    )
    async with Client(local) as client:
        served = await client.call_tool("query_logs", args, meta={id_key: "m4"})
    assert served.structured_content["evidence_status"] == "EVIDENCE_FOUND"


async def test_adapters_take_as_of_as_a_keyword(prefix: str, redis: Any, tmp_path: Path) -> None:
    from hosts import anthropic, openai_chat
    from hosts.langchain_tools import evidence_tools

    t0 = time.time() - 3 * DAY_S
    write_incident(tmp_path / "logs", t0)
    settings = Settings(prefix=prefix, redis_url=REDIS_URL)
    sources = {"query_logs": router(tmp_path / "logs")}
    args = {"topic": "APPLICATION", "query": "level:ERROR", "lookback_minutes": 30}
    message = {"role": "assistant", "tool_calls": [{
        "id": "oa1", "type": "function",
        "function": {"name": "query_logs", "arguments": json.dumps(args)},
    }]}  # fmt: skip
    claude = {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "query_logs", "input": args},
    ]}  # fmt: skip
    async with running_worker(redis, settings, sources), EvidenceClient(redis, settings) as ev:
        [answer] = await openai_chat.answer_tool_calls(message, ev, "ad-1", as_of=iso(t0))
        reply = await anthropic.answer_tool_calls(claude, ev, "ad-2", as_of=iso(t0))
        tool = {t.name: t for t in evidence_tools(ev, "ad-3", as_of=iso(t0))}["query_logs"]
        lc = await tool.ainvoke({"type": "tool_call", "id": "lc1", "name": "query_logs",
                                 "args": args})  # fmt: skip
    assert json.loads(answer["content"])["evidence_status"] == "EVIDENCE_FOUND"
    assert reply is not None
    text = reply["content"][0]["content"][0]["text"]
    assert json.loads(text)["evidence_status"] == "EVIDENCE_FOUND"
    assert json.loads(lc.content)["evidence_status"] == "EVIDENCE_FOUND"


def _envelope(tool: str, **kw: Any) -> bytes:
    from pipeline.envelope import Invocation, encode_envelope

    args = json.dumps({"topic": "APPLICATION", "query": "x"} if tool == "query_logs" else {})
    inv = Invocation(session_id="s", tool=tool, tool_call_id="c1", arguments=args,
                     submitted_at_ms=1, **kw)  # fmt: skip
    return encode_envelope(inv)


def test_admission_decides_the_window_and_a_submitter_cannot() -> None:
    from pipeline.admission import Admission, judge
    from pipeline.envelope import decode_envelope

    keys = Keys("t")
    now_ms = 1_800_000_000_000

    def admitted(data: bytes) -> Any:
        verdict = judge(keys, keys.parts[0], "1-0", data, argument_max_bytes=65536,
                        default_lookback=60, now_ms=now_ms)  # fmt: skip
        assert isinstance(verdict, Admission)
        return verdict, decode_envelope(verdict.envelope)

    _, inv = admitted(_envelope("query_logs", window_end_ms=5))  # a submitter's own window
    assert inv.window_end_ms == now_ms  # replaced by admission's clock
    pinned, inv = admitted(_envelope("query_logs", as_of_ms=now_ms - DAY_S * 1000))
    assert inv.window_end_ms == now_ms - DAY_S * 1000
    plain, _ = admitted(_envelope("query_logs"))
    assert pinned.fingerprint != plain.fingerprint and pinned.scope_key != plain.scope_key
    _, inv = admitted(_envelope("query_logs", as_of_ms=now_ms + 3_600_000))
    assert inv.window_end_ms == now_ms  # not used: the worker answers SCHEMA (below)
    other = _envelope("lookup_knowledge", window_end_ms=5)
    _, inv = admitted(other)
    assert inv.window_end_ms is msgspec.UNSET  # not a submitter's to set, on any tool
    untouched = _envelope("lookup_knowledge")
    assert admitted(untouched)[0].envelope == untouched  # other envelopes stay byte-identical


async def test_a_future_as_of_that_reached_a_worker_is_a_schema_error(tmp_path: Path) -> None:
    from workers.stage import run_stages

    now_ms = int(time.time() * 1000)
    outcome = await run_stages(
        tool="query_logs", tool_call_id="c1", arguments={"topic": "APPLICATION", "query": "x"},
        session_id="s", sources={}, settings=Settings(), as_of_ms=now_ms + 3_600_000,
        window_end_ms=now_ms,
    )  # fmt: skip
    error = msgspec.to_builtins(outcome.observation)["error"]
    assert error["code"] == "SCHEMA" and "in the future" in error["message"]
    assert msgspec.to_builtins(outcome.control)["scope"]["as_of"]


async def test_clickhouse_says_where_the_records_are_when_none_fell_in_the_window() -> None:
    import uuid

    from logs_helpers import chdb_client  # as the other tests: one chDB engine a process

    from workers.sources.logs.clickhouse import OTEL_LOGS_DDL, ClickhouseLogSource
    from workers.sources.logs.config import ClickhouseTopic

    now = 1_796_000_000.0
    client = chdb_client()
    table = f"otel_logs_{uuid.uuid4().hex[:12]}"
    client.command(OTEL_LOGS_DDL.format(table=table))
    columns = ["Timestamp", "SeverityText", "SeverityNumber", "ServiceName", "Body",
               "LogAttributes", "ResourceAttributes"]  # fmt: skip
    rows = [[datetime.fromtimestamp(now - ago, UTC), "ERROR", 17, "shop", "pool timeout", {}, {}]
            for ago in (3 * DAY_S, 3 * DAY_S + 60, -2 * 3600)]  # fmt: skip
    client.insert(table, rows, column_names=columns)
    config = parse_logs_config(
        f'[clickhouse]\ndsn = "chdb://memory"\n[topics.APPLICATION]\nbackend = "clickhouse"\n'
        f'table = "{table}"\n'
    )
    entry = config.topics[Topic.APPLICATION]
    assert isinstance(entry, ClickhouseTopic) and config.clickhouse is not None
    source = ClickhouseLogSource(config.clickhouse, {Topic.APPLICATION: entry}, config, {},
                                 client=client, clock=lambda: now)  # fmt: skip
    request = QueryLogsRequest(topic=Topic.APPLICATION, query="timeout", lookback_minutes=60)
    found = await source.fetch(request)
    assert found.match_count == 0
    assert found.record_times.nearest_before == datetime.fromtimestamp(
        now - 3 * DAY_S, UTC
    ).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert found.record_times.nearest_after.startswith(
        datetime.fromtimestamp(now + 2 * 3600, UTC).strftime("%Y-%m-%dT%H:%M")
    )
    request = QueryLogsRequest(topic=Topic.APPLICATION, query="nothing", lookback_minutes=60)
    assert (await source.fetch(request)).record_times is msgspec.UNSET


@given(
    st.lists(st.integers(min_value=0, max_value=10_000), max_size=60),
    st.integers(min_value=0, max_value=10_000),
    st.integers(min_value=0, max_value=2_000),
)
def test_the_window_watch_keeps_what_a_plain_scan_would(
    times: list[int], start: int, width: int
) -> None:
    from contracts.window import AS_OF_SKEW_MS
    from workers.sources.logs.filetime import WindowWatch

    end, now = start + width, start + width // 2
    watch = WindowWatch(start, end, now)
    inside = [t for t in times if watch.inside_window(t)]
    assert inside == [t for t in times if start <= t <= end]
    told = watch.times(UTC)
    future = [t for t in times if t > now + AS_OF_SKEW_MS]
    before = [t for t in times if t < start]
    after = [t for t in times if t > end]
    if not future and (inside or not (before or after)):
        assert told is msgspec.UNSET
        return
    assert not isinstance(told, type(msgspec.UNSET))
    assert (told.future_records or 0) == len(future)
    if not inside and before:
        assert told.nearest_before == format_ms(max(before), UTC)
    if not inside and after:
        assert told.nearest_after == format_ms(min(after), UTC)
    if inside:
        assert told.nearest_before is msgspec.UNSET and told.nearest_after is msgspec.UNSET


def test_matches_dated_in_the_future_are_told_to_the_model() -> None:
    # A refunds service in Asia/Tokyo writes local time without a zone, the topic says UTC:
    # its errors read nine hours ahead. The answer was NO_EVIDENCE, the future records only
    # counted in the Control View: an agent concluded "no refund errors" (a new user's
    # on-call pass). Now the model hears that records lie in the future, and why.
    import tempfile

    from logs_helpers import file_source, search

    now = time.time()

    def stamp(at: float) -> str:
        return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S,000")

    ahead = now - 30 + 9 * 3600
    with tempfile.TemporaryDirectory() as folder:
        logs = Path(folder)
        (logs / "refunds.log").write_text(
            f"{stamp(ahead)} ERROR [shop.refunds] refund failed for o-1042\n"
            f"{stamp(ahead)} INFO [shop.refunds] refund queued for o-1043\n"
        )
        (logs / "orders.log").write_text(f"{stamp(now - 60)} INFO [shop.orders] o-1 accepted\n")
        source = file_source(logs, "plain", ["*.log"], now=now)
        found = search(source, "refund failed")  # the file is never read: its first record
        assert found.match_count == 0  # is past the window's end
        said = [n for n in found.notes or [] if "in the future" in n]
        assert said and "timezone" in said[0] and "not in this count" in said[0], found.notes
        assert len(said[0]) <= 240  # a note the model hears whole (`contracts.logs`)
        # a file read (its first record in the window) says how many of them match
        (logs / "refunds.log").write_text(
            f"{stamp(now - 90)} INFO [shop.refunds] refund service started\n"
            f"{stamp(ahead)} ERROR [shop.refunds] refund failed for o-1042\n"
        )
        found = search(source, "refund failed")
        assert any("1 records that match are dated" in n for n in found.notes or []), found.notes
        (logs / "refunds.log").unlink()
        assert not any("future" in n for n in search(source, "accepted").notes or [])
