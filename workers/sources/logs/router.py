"""`query_logs` routed by topic to the backend the operator configured (`ACI_LOGS_CONFIG`).

`logs_source_from_env` is the registry's factory: without the variable the MOCK world serves
every topic (the embedded default); with it, each configured topic gets its backend and a
topic the file leaves out answers ERROR/UNAVAILABLE (never NO_EVIDENCE: nothing was searched).
The configuration is validated here, when the worker starts (`LogsConfigError`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from contracts.requests import QueryLogsRequest, Request
from contracts.status import ErrorCode, Topic
from workers.sources.base import SourceError
from workers.sources.kept import cache_dir_from_env
from workers.sources.logs.config import (
    ClickhouseTopic,
    FileTopic,
    LogsConfig,
    LogsConfigError,
    MockTopic,
    load_logs_config,
)
from workers.sources.logs.mocklog import DEFAULT_SCENARIO
from workers.sources.logs.source import MockLogSettings, MockLogSource

__all__ = ["LogBackend", "LogRouter", "logs_source_from_env"]


class LogBackend(Protocol):
    """One backend of `query_logs` (MOCK, FILE, CLICKHOUSE)."""

    async def fetch(self, request: QueryLogsRequest) -> Any: ...

    async def aclose(self) -> None: ...


class LogRouter:
    """One backend per configured topic."""

    def __init__(self, backends: Mapping[Topic, LogBackend]) -> None:
        self.backends = dict(backends)

    @classmethod
    def from_config(cls, config: LogsConfig, env: Mapping[str, str]) -> LogRouter:
        """The backends of a validated configuration (ClickHouse topics share one client)."""
        backends: dict[Topic, LogBackend] = {}
        clickhouse: dict[Topic, ClickhouseTopic] = {}
        for topic, entry in config.topics.items():
            if isinstance(entry, MockTopic):
                scenario = entry.scenario or env.get("ACI_MOCK_SCENARIO", "").strip()
                settings = MockLogSettings(
                    scenario=scenario or DEFAULT_SCENARIO,
                    default_lookback=config.default_lookback,
                    cache_dir=str(cache_dir_from_env(env)),
                )
                backends[topic] = MockLogSource(settings)
            elif isinstance(entry, FileTopic):
                from workers.sources.logs.file_source import FileLogSource

                backends[topic] = FileLogSource(topic, entry, config)
            else:
                clickhouse[topic] = entry
        if clickhouse and config.clickhouse is not None:
            from workers.sources.logs.clickhouse import ClickhouseLogSource

            shared = ClickhouseLogSource(config.clickhouse, clickhouse, config, env)
            backends.update(dict.fromkeys(clickhouse, shared))
        return cls(backends)

    async def fetch(self, request: Request) -> Any:
        """The topic's backend answers; an unconfigured topic is ERROR/UNAVAILABLE."""
        assert isinstance(request, QueryLogsRequest)
        backend = self.backends.get(request.topic)
        if backend is None:
            raise SourceError(
                ErrorCode.UNAVAILABLE,
                f"topic {request.topic.value} is not configured for query_logs on this "
                "deployment; query another topic",
            )
        return await backend.fetch(request)

    def clock_warnings(self) -> list[str]:
        """Worker-start checks of the topics' clocks (blocking: run in a thread): a line per
        FILE topic whose newest records lie in the future (a wrong timezone)."""
        checks = [getattr(b, "clock_warning", None) for b in self.backends.values()]
        return [line for check in checks if check is not None and (line := check())]

    async def aclose(self) -> None:
        """Close every backend once."""
        for backend in {id(b): b for b in self.backends.values()}.values():
            await backend.aclose()


def logs_source_from_env(env: Mapping[str, str]) -> LogRouter | MockLogSource:
    """MOCK without `ACI_LOGS_CONFIG`; otherwise the configured router (`LogsConfigError`,
    a `ValueError` with a one-line text naming the key, on any mistake)."""
    config = load_logs_config(env)
    if config is None:
        try:
            return MockLogSource.from_env(env)
        except ValueError as exc:  # ACI_MOCK_SCENARIO, ACI_LOGS_DEFAULT_LOOKBACK: one line
            raise LogsConfigError(str(exc)) from None
    return LogRouter.from_config(config, env)
