"""`aci-evidence demo` (and `make demo`): the whole system on the embedded default.

Starts a private Redis (unless `ACI_REDIS_URL` is set), the demo `shop` database when MariaDB
answers on localhost (or uses `ACI_MYSQL_SHOP_URL`), two worker processes, and plays a
scripted diagnosis of one mock incident through the queue — then cleans up everything.

One clock for the demo world: the mock logs live on the scenario's clock (2026-03-14), so the
workers run the shop database on it too (`ACI_MYSQL_CLOCK`: its sessions' `NOW()`), and SQL
asking for "the last day" finds the incident's rows.

`--scenario real-log-files` plays an incident over real files instead: the demo writes them
into its temporary folder with real producers (`write_file_scenario`: Python `logging` as JSON
lines with a gzipped rotated sibling, a slow query log written by a private MariaDB itself when
`mariadbd` is installed (`app.demo_slowlog`; else one in its format), rsyslog lines), starts
the workers with `ACI_LOGS_CONFIG` naming them (`query_logs` answers with `source_kind` FILE), on
the wall clock, and removes the folder at the end.

`--keep-running` leaves Redis and the workers up until Ctrl-C (exit 130) and prints, to a
terminal only, the auditor's and the submitter's URLs as ready `export` lines.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio

from app.demo_script import FILE_SCENARIO, SCRIPTS
from app.errors import EXIT_ABORTED, EXIT_OK
from app.fleet import worker_processes
from pipeline.admin import delete_prefix, session_timeline
from pipeline.client import CallResult, EvidenceClient, ToolCall
from pipeline.embedded import RoleUrls, embedded_redis_users
from pipeline.heartbeat import heartbeat_ttl_s, live_count
from pipeline.redis_io import open_redis
from pipeline.settings import Settings

__all__ = ["run_demo"]

DEFAULT_SCENARIO = "db-pool-exhaustion"
_WORKERS = 2
_READY_WAIT_S = 60.0


def scenario_clock(scenario: str) -> tuple[str, str]:
    """The scenario's "now" (ISO 8601 with its offset) and its one-line story."""
    from datetime import timedelta

    from workers.sources.logs.mocklog import scenario_info

    info = scenario_info(scenario)
    now = info.t0 + timedelta(minutes=info.now_minutes)
    return now.isoformat(timespec="seconds"), info.summary


@contextlib.contextmanager
def _demo_world(
    scenario: str,
    note: Callable[[str], None],
    show: Callable[[str, str], None] = lambda title, text: None,
) -> Iterator[tuple[dict[str, str], str]]:
    """The workers' environment for the scenario's world and its one-line story; the real
    log files of `FILE_SCENARIO` live in a temporary folder removed afterwards, and the
    ACI_LOGS_CONFIG written for them is shown whole (`show`): a day-one template."""
    if scenario != FILE_SCENARIO:
        clock, story = scenario_clock(scenario)
        note(f"the demo world's clock: {clock} (mock logs and the shop database's NOW())")
        yield {"ACI_MOCK_SCENARIO": scenario, "ACI_MYSQL_CLOCK": clock}, story
        return
    from app.demo_slowlog import mariadb_slow_log
    from workers.sources.logs.scenario_files import write_file_scenario

    folder = Path(tempfile.mkdtemp(prefix="aci-demo-logs-"))
    try:
        config = write_file_scenario(folder)
        by_mariadb, how = mariadb_slow_log(folder, folder / "mysql" / "slow.log")
        written = sorted(
            str(p.relative_to(folder))
            for p in folder.rglob("*")
            if p.is_file() and p.parent != folder
        )
        note(
            f"wrote {len(written)} log files with real producers ({', '.join(written)}); "
            "the workers read them through ACI_LOGS_CONFIG (source_kind FILE)"
        )
        note(
            f"mysql/slow.log was written by MariaDB itself ({how}, long_query_time=0)"
            if by_mariadb
            else f"mysql/slow.log is in MariaDB's format, not MariaDB's own: {how}"
        )
        show(
            "ACI_LOGS_CONFIG the workers read (a template for your own files; the folder is "
            "removed at the end)",
            Path(config).read_text(),
        )
        note("the demo world's clock: now (the files were written just now)")
        yield (
            {"ACI_LOGS_CONFIG": str(config)},
            (
                "order-service's connection pool runs dry (HikariPool timeouts, HTTP 503) behind "
                "SELECT ... FOR UPDATE scans of every order, then its pod is OOM-killed"
            ),
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def _until_interrupted() -> None:
    # SIGTERM here; Ctrl-C cancels the whole command (`app.interrupt`), which unwinds the same.
    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
        async for _ in signals:
            return


@contextlib.asynccontextmanager
async def _redis_urls(settings: Settings, prefix: str) -> AsyncIterator[RoleUrls]:
    # The embedded server has a user per role (workers as `worker`, the client as
    # `submitter`, the timeline read as `auditor`); an operator's URL serves every role.
    if settings.redis_url:
        yield RoleUrls.shared(settings.redis_url)
        return
    async with embedded_redis_users(prefix) as urls:
        yield urls


async def _shop_url() -> tuple[str | None, str]:
    configured = os.environ.get("ACI_MYSQL_SHOP_URL")
    if configured:
        return configured, "using ACI_MYSQL_SHOP_URL"
    try:
        from workers.sources.mysql.shop import prepare_demo_shop

        with anyio.fail_after(30):
            shop = await prepare_demo_shop()
        return shop.url, shop.note()
    except Exception as exc:  # any failure here only means: no demo database
        return None, (
            f"no MariaDB on localhost ({type(exc).__name__}); query_mysql will answer ERROR. "
            "Start MariaDB or set ACI_MYSQL_SHOP_URL=mysql://user:pass@host:3306/shop"
        )


def _record(call: ToolCall, result: CallResult | None, latency_ms: float) -> dict[str, Any]:
    if result is None:
        return {
            "tool": call.tool,
            "id": call.tool_call_id,
            "arguments": call.arguments,
            "lifecycle": "PENDING",
            "latency_ms": round(latency_ms, 1),
        }
    return {
        "tool": call.tool,
        "id": call.tool_call_id,
        "arguments": call.arguments,
        "lifecycle": result.lifecycle.value,
        "model": json.loads(bytes(result.model)),
        "control": json.loads(bytes(result.control)),
        "latency_ms": round(latency_ms, 1),
    }


async def run_demo(
    settings: Settings,
    scenario: str | None = None,
    as_json: bool = False,
    keep_running: bool = False,
) -> int:
    """Play the scripted diagnosis; print it (rich, or a JSON transcript with `--json`)."""
    from app import demo_view

    scenario = scenario or os.environ.get("ACI_MOCK_SCENARIO") or DEFAULT_SCENARIO
    if scenario not in SCRIPTS:
        print(
            f"unknown scenario {scenario!r}; choose one of: {', '.join(SCRIPTS)}", file=sys.stderr
        )
        return 2
    view = demo_view.DemoView(as_json=as_json)
    code = EXIT_OK
    prefix = f"demo{uuid.uuid4().hex[:6]}"
    session = "incident-demo"
    shop_url, shop_note = await _shop_url()
    view.note(shop_note)
    with _demo_world(scenario, view.note, view.file) as (world_env, story):
        async with _redis_urls(settings, prefix) as urls:
            embedded = "embedded redis-server (users submitter, worker, auditor)"
            view.note("redis: " + ("ACI_REDIS_URL" if settings.redis_url else embedded))
            env = dict(os.environ, ACI_REDIS_URL=urls.worker, ACI_PREFIX=prefix, **world_env)
            if scenario != FILE_SCENARIO:  # the mock world, whatever the operator configured
                env.pop("ACI_LOGS_CONFIG", None)
            if shop_url:
                env["ACI_MYSQL_SHOP_URL"] = shop_url
            run_settings = Settings.from_env(env)
            transcript: list[dict[str, Any]] = []
            with worker_processes(env, _WORKERS, quiet=True):
                async with (
                    open_redis(urls.submitter) as redis,
                    open_redis(urls.auditor) as auditor,
                    EvidenceClient(redis, run_settings) as client,
                ):
                    # The rounds' times are the calls' own, not the workers' start (imports,
                    # the model, the runbook index): the first round waits for their beats.
                    view.note(f"starting {_WORKERS} workers (the model, the runbook index)")
                    waited, live = await _workers_ready(redis, run_settings, session, _WORKERS)
                    view.note(_ready_note(_WORKERS, live, waited))
                    for number, script in enumerate(SCRIPTS[scenario], 1):
                        calls = [
                            ToolCall(tool=t, tool_call_id=i, arguments=a) for t, i, a in script
                        ]
                        started = time.perf_counter()
                        results = await _call_round(client, session, calls)
                        for call, (result, ms) in zip(calls, results, strict=True):
                            record = _record(call, result, ms)
                            transcript.append(record)
                            view.call(number, record)
                        view.note(
                            f"round {number}: {len(calls)} parallel calls in "
                            f"{(time.perf_counter() - started) * 1000:.0f} ms"
                        )
                    timeline = await session_timeline(auditor, run_settings.keys(), session)
                    view.finish(scenario, transcript, timeline, incident=f"{scenario}: {story}")
                    if keep_running:
                        view.keep_running(
                            submitter=urls.submitter,
                            auditor=urls.auditor,
                            display=urls.display,
                            prefix=prefix,
                            admin=urls.admin,
                        )
                        await _until_interrupted()
                        code = EXIT_ABORTED
            if settings.redis_url:  # the embedded server and its data go away with it
                # Once the workers have stopped: a running worker re-creates its group's stream.
                async with open_redis(urls.auditor) as redis:
                    await delete_prefix(redis, run_settings.keys())
    return code


async def _workers_ready(
    redis: Any, settings: Settings, session: str, count: int
) -> tuple[float, int]:
    """Seconds until `count` workers beat in the session's partition (a worker beats once its
    sources are warm), at most `_READY_WAIT_S` (past that the calls still wait for them), and
    how many beat by then."""
    started = time.perf_counter()
    part, ttl = settings.keys().for_session(session), heartbeat_ttl_s(settings)
    live = 0
    with anyio.move_on_after(_READY_WAIT_S):
        while True:  # polled: a beat is a Redis write, nothing to wait on here
            live = await live_count(redis, part, ttl)
            if live >= count:
                break
            await anyio.sleep(0.1)
    return time.perf_counter() - started, live


def _ready_note(count: int, live: int, waited: float) -> str:
    if live >= count:
        return f"{count} workers ready in {waited:.1f} s (sources warmed up)"
    return f"only {live} of {count} workers beat within {waited:.1f} s"


async def _call_round(
    client: EvidenceClient, session: str, calls: list[ToolCall]
) -> list[tuple[CallResult | None, float]]:
    out: list[tuple[CallResult | None, float]] = [(None, 0.0)] * len(calls)

    async def one(i: int) -> None:
        started = time.perf_counter()
        result = await client.call(session, calls[i], timeout=60)
        out[i] = (result, (time.perf_counter() - started) * 1000)

    async with anyio.create_task_group() as tg:
        for i in range(len(calls)):
            tg.start_soon(one, i)
    return out
