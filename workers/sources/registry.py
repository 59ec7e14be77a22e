"""Opening the evidence sources a worker runs with, from operator configuration, and the one
hook that wraps them (`wrap_sources`)."""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anyio

from contracts import LookupKnowledgeRequest, QueryLogsRequest, QueryMysqlRequest, Request, Topic
from pipeline.settings import SettingsError
from workers.sources.base import Source, SourceError

__all__ = [
    "DEFAULT_WARMUP_TIMEOUT_S",
    "build_progress",
    "describe_sources",
    "open_sources",
    "warm_up",
    "wrap_sources",
]

log = logging.getLogger("aci.sources")

# tool → (module, factory). A source whose module is absent is simply not offered; its
# tool then finishes as ERROR/UNAVAILABLE on this worker.
_FACTORIES = {
    "lookup_knowledge": ("workers.sources.knowledge.index", "knowledge_source_from_env"),
    "query_logs": ("workers.sources.logs.router", "logs_source_from_env"),
    "query_mysql": ("workers.sources.mysql.source", "MysqlSource.from_env"),
}


def _factory(module_name: str, path: str) -> Any:
    target: Any = importlib.import_module(module_name)
    for part in path.split("."):
        target = getattr(target, part)
    return target


_WARM_UP: dict[str, Request] = {
    "lookup_knowledge": LookupKnowledgeRequest(query="warm up"),
    "query_logs": QueryLogsRequest(topic=Topic.APPLICATION, query="", lookback_minutes=1),
}


DEFAULT_WARMUP_TIMEOUT_S = 30.0
DIAGNOSTIC_PROBE = (
    "SELECT t.trx_id FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p "
    "WHERE p.DB = DATABASE() AND t.trx_mysql_thread_id = p.ID"
)


async def warm_up(
    sources: Mapping[str, Source], timeout_s: float = DEFAULT_WARMUP_TIMEOUT_S
) -> None:
    """Build what sources build lazily (log worlds, the knowledge index, the tokenizer) before
    the first real call, so an agent's first question does not pay for it. Bounded: past
    `timeout_s` the worker starts anyway (a slow upstream answers its own calls with errors)."""

    async def one(tool: str, source: Source, request: Request, label: str) -> None:
        try:
            # A source that builds an index (the runbooks') is waited for up to this bound,
            # not only as long as one of its calls would wait.
            ready = getattr(source, "ready", None)
            if ready is not None:
                await ready()
            await source.fetch(request)
        except Exception as exc:  # said, not raised: the worker starts anyway
            if isinstance(exc, SourceError) and exc.logged:
                return  # the source said it itself (a backend down: once, not per call)
            # A SourceError's message is safe to show; another exception only by its type.
            why = exc.message if isinstance(exc, SourceError) else type(exc).__name__
            log.warning("warm-up of %s failed (%s); its calls may fail the same way", label, why)

    async def clocks(source: Source) -> None:
        # A source that can check its records' clock (a FILE topic in a wrong timezone) says
        # so at start, naming the topic: every call over it would answer "no evidence".
        check = getattr(source, "clock_warnings", None)
        try:
            lines = await anyio.to_thread.run_sync(check) if check is not None else []
        except Exception as exc:  # a check must not stop the worker from starting
            lines = [f"the clock check of query_logs failed ({type(exc).__name__})"]
        for line in lines:
            log.warning("%s", line)

    with anyio.move_on_after(timeout_s) as scope:
        async with anyio.create_task_group() as tg:
            for tool, source in sources.items():
                tg.start_soon(clocks, source)
                if tool in _WARM_UP:
                    tg.start_soon(one, tool, source, _WARM_UP[tool], tool)
                elif tool == "query_mysql":
                    # Each data source once (`SELECT 1`): a wrong password or a database that
                    # is down is said at start, by its logical name, not at the first call.
                    for name in getattr(source, "data_sources", ()):
                        probe = QueryMysqlRequest(data_source=name, sql="SELECT 1")
                        tg.start_soon(one, tool, source, probe, f"{tool} ({name})")
                    # A data source opened to the diagnostic views: its account needs PROCESS,
                    # and an operator who forgot the GRANT hears it now, not in an incident.
                    for name in getattr(source, "diagnostic_sources", ()):
                        probe = QueryMysqlRequest(data_source=name, sql=DIAGNOSTIC_PROBE)
                        label = f"{tool} ({name}: its diagnostic views need the PROCESS privilege)"
                        tg.start_soon(one, tool, source, probe, label)
    if scope.cancelled_caught:
        log.warning("source warm-up did not finish within %.1fs; starting anyway", timeout_s)
        for tool, source in sources.items():
            _say_building(tool, source)


def build_progress(source: object) -> str | None:
    """A source's first index build under way, as ` (n of m sections embedded)` ('' before
    it counts), or None when none is (a source without an index, or one built)."""
    building = getattr(source, "building", None)
    progress = building() if building is not None else None
    if progress is None:
        return None
    done, total = progress
    return f" ({done:,} of {total:,} sections embedded)" if total else ""


def _say_building(tool: str, source: Source) -> None:
    # A first runbook index build that outlasts the warm-up (hundreds of long runbooks) is
    # said as such: its lookups answer UNAVAILABLE meanwhile, not a timeout of their own.
    count = build_progress(source)
    if count is None:
        return
    log.warning(
        "the %s index is still being built%s: its calls answer ERROR/UNAVAILABLE (retryable)"
        " until it is ready, said when it is", tool, count,
    )  # fmt: skip


def _warmup_timeout(env: Mapping[str, str]) -> float:
    text = env.get("ACI_WARMUP_TIMEOUT_S", "").strip()
    try:
        value = float(text) if text else DEFAULT_WARMUP_TIMEOUT_S
    except ValueError:
        value = -1.0
    if not 0 < value <= 600:
        raise ValueError("ACI_WARMUP_TIMEOUT_S must be in (0, 600]")
    return value


@contextlib.asynccontextmanager
async def open_sources(
    env: Mapping[str, str] | None = None,
    only: tuple[str, ...] | None = None,
    *,
    warm: bool = False,
) -> AsyncIterator[dict[str, Source]]:
    """The configured sources by tool name (warmed up with `warm=True`, for at most
    ACI_WARMUP_TIMEOUT_S, default 30 s); closed on exit."""
    env = os.environ if env is None else env
    sources: dict[str, Source] = {}
    if env.get("ACI_INSTANT_SOURCES") == "1":
        from workers.sources.instant import InstantSource

        instant = InstantSource()
        yield dict.fromkeys(_FACTORIES, instant)
        return
    try:
        for tool, (module_name, path) in _FACTORIES.items():
            if only is not None and tool not in only:
                continue
            try:
                factory = _factory(module_name, path)
            except (ImportError, AttributeError):
                log.warning("no source for %s in this build", tool)
                continue
            try:
                sources[tool] = factory(env)
            except SettingsError:
                raise  # already one line naming its key (ACI_LOGS_CONFIG: topics.X.paths: ...)
            except (ValueError, OSError) as exc:
                # A bad ACI_* value or a missing configuration file: a configuration error
                # (one line, exit 2 in the CLI), naming the tool; an OSError by its reason
                # only (its text names the path).
                if isinstance(exc, OSError):
                    why = f"a configured file cannot be read ({exc.strerror or 'OSError'})"
                else:
                    why = str(exc)
                raise SettingsError(f"{tool}: {why}") from exc
        if warm:
            await warm_up(sources, _warmup_timeout(env))
        yield sources
    finally:
        for source in sources.values():
            with contextlib.suppress(Exception):
                await source.aclose()


# The kind of each source class, as the worker's start line names it.
_KINDS: dict[str, str] = {
    "KnowledgeIndexSource": "embedded runbook index",
    "HttpRagSource": "RAG service over HTTP",
    "MockLogSource": "MOCK logs",
    "MysqlSource": "MySQL",
    "InstantSource": "instant (benchmark)",
}


# The backend of each `query_logs` topic, as the start line names it.
_LOG_KINDS: dict[str, str] = {
    "MockLogSource": "MOCK",
    "FileLogSource": "FILE",
    "ClickhouseLogSource": "CLICKHOUSE",
}


def _log_topics(backends: Mapping[Any, Any]) -> str:
    """`APPLICATION FILE, DATABASE CLICKHOUSE, ...`: the backend of each configured topic."""
    return ", ".join(
        f"{getattr(topic, 'value', topic)} {_LOG_KINDS.get(type(b).__name__, type(b).__name__)}"
        for topic, b in sorted(backends.items(), key=lambda tb: str(getattr(tb[0], "value", tb[0])))
    )


def describe_sources(sources: Mapping[str, Source]) -> str:
    """`tool=kind, ...` for a start line: each source's kind and, where it has them, its
    scenario, logical data source names or the backend of each log topic (never a URL, host
    or path)."""
    parts = []
    for tool, source in sources.items():
        backends = getattr(source, "backends", None)
        if isinstance(backends, Mapping):  # query_logs' router: one backend per topic
            parts.append(f"{tool}=logs per topic ({_log_topics(backends) or 'none configured'})")
            continue
        kind = _KINDS.get(type(source).__name__, type(source).__name__)
        detail = getattr(getattr(source, "settings", None), "scenario", None)
        names = getattr(source, "data_sources", None)
        if names is not None:
            detail = ",".join(names) or "no data sources"
        parts.append(f"{tool}={kind}" + (f" ({detail})" if detail else ""))
    return ", ".join(parts) or "none"


def wrap_sources(
    sources: Mapping[str, Source], wrap: Callable[[Source], Source]
) -> dict[str, Source]:
    """The same map with every source behind `wrap(source)`: the way to inject faults (hangs,
    garbage answers, errors) or trace calls without touching a backend; `chaos.worker` wraps
    with its `FaultySource`.

    A wrapper sees every call through its `fetch` as long as it has no `fetch_now` (the worker
    then runs even an `ImmediateSource` as an ordinary call, under the deadline). Closing stays
    with whoever opened the sources: `open_sources` closes the inner ones on exit.
    """
    return {tool: wrap(source) for tool, source in sources.items()}
