"""Helpers of the real-backend log tests: a FILE source over a folder, run synchronously."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from contracts import DEFAULT_BOUNDS, LogsResult, LogsUpstream, QueryLogsRequest, Topic
from contracts.logs import project_logs
from workers.sources.logs.clickhouse import ClickhouseLogSource
from workers.sources.logs.config import ClickhouseTopic, parse_logs_config
from workers.sources.logs.deadline import StopFlag
from workers.sources.logs.file_source import FileLogSource
from workers.sources.logs.source import check_fields, parse_log_query


def file_source(
    root: Path, fmt: str, paths: list[str], *, now: float, topic: Topic = Topic.APPLICATION,
    extra: str = "", top: str = "",
) -> FileLogSource:  # fmt: skip
    globs = ", ".join(f'"{root}/{p}"' for p in paths)
    text = (
        f'roots = ["{root}"]\n{top}\n[topics.{topic.value}]\nbackend = "file"\n'
        f'format = "{fmt}"\npaths = [{globs}]\n{extra}'
    )
    config = parse_logs_config(text)
    entry: Any = config.topics[topic]
    return FileLogSource(topic, entry, config, clock=lambda: now)


def search(
    source: FileLogSource, query: str, lookback: int = 60, flag: StopFlag | None = None
) -> LogsUpstream:
    request = QueryLogsRequest(topic=source.topic, query=query, lookback_minutes=lookback)
    parsed = parse_log_query(query)
    check_fields(parsed, source.topic, source.extra_fields, source.comparable)
    return source.search(request, parsed, flag or StopFlag(60))


def project(upstream: LogsUpstream) -> LogsResult:
    return project_logs("call-1", upstream, DEFAULT_BOUNDS)


_CHDB: list[Any] = []
_CHDB_FOLDER: list[str] = []


def chdb_client() -> Any:
    """The one in-process ClickHouse engine of this test process (chDB allows one path per
    process), on a fresh temporary folder."""
    if not _CHDB:
        import tempfile

        import clickhouse_connect

        folder = tempfile.mkdtemp(prefix="aci-chdb-")
        _CHDB.append(clickhouse_connect.get_client(dsn=f"chdb://{folder}"))
        _CHDB_FOLDER.append(folder)
    return _CHDB[0]


def clickhouse_source(table: str, now: float, extra: str = "") -> ClickhouseLogSource:
    """A CLICKHOUSE topic APPLICATION over `table` of this process's engine, at clock `now`."""
    config = parse_logs_config(
        f'[clickhouse]\ndsn = "chdb://memory"\n[topics.APPLICATION]\nbackend = "clickhouse"\n'
        f'table = "{table}"\n{extra}'
    )
    entry = config.topics[Topic.APPLICATION]
    assert isinstance(entry, ClickhouseTopic) and config.clickhouse is not None
    return ClickhouseLogSource(
        config.clickhouse, {Topic.APPLICATION: entry}, config, {}, client=chdb_client(),
        clock=lambda: now,
    )  # fmt: skip


def chdb_other_client() -> Any:
    """A second client (its own chDB handle) on the engine of `chdb_client`: what a source
    kills a cancelled statement from while the first handle is busy running it."""
    import clickhouse_connect

    chdb_client()
    return clickhouse_connect.get_client(dsn=f"chdb://{_CHDB_FOLDER[0]}")


def search_written(
    root: Path, fmt: str, text: str, query: str = "", *, now: float,
    topic: Topic = Topic.APPLICATION,
) -> LogsUpstream:  # fmt: skip
    """A query over the last day of one file holding `text`, written a minute before `now`."""
    import os

    path = root / "sample.log"
    path.write_text(text, encoding="utf-8")
    os.utime(path, (now - 60, now - 60))
    return search(file_source(root, fmt, ["sample.log"], now=now, topic=topic), query, 1440)


def jsonl_of(messages: list[str]) -> str:
    """JSON lines, one record a second from 2026-12-04T15:40:00Z, level info, these messages."""
    return "".join(
        json.dumps({"ts": f"2026-12-04T15:40:{n:02}Z", "level": "info", "msg": m}) + "\n"
        for n, m in enumerate(messages)
    )


def shown_of(found: LogsUpstream) -> str:
    """Everything an answer shows: the upstream as recorded, and its projection."""
    return msgspec.json.encode(found).decode() + msgspec.json.encode(project(found)).decode()


def messages_of(found: LogsUpstream) -> set[str]:
    return {r.message for r in found.records}


def cpu_seconds(run: Callable[[], object], repeat: int = 3) -> float:
    """The least CPU time of this process `run` takes in `repeat` runs: the code's own cost,
    which a preempting neighbour on a loaded machine does not add to (wall time it does, and
    more to a long run than to a short one: the linearity ratios failed once under load)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        run()
        best = min(best, time.process_time() - started)
    return best
