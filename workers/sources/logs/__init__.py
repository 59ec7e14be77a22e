"""The `query_logs` source (docs/logs.md).

- `source` — the query language and matching (shared by every backend) and the MOCK source
  over the deterministic incident world in `mocklog/`;
- `config` — `ACI_LOGS_CONFIG`: which backend serves each topic, validated at worker start;
- `router` — `logs_source_from_env`, the registry's factory: MOCK by default, else one
  backend per configured topic;
- `records` — what real backends share: `Entry`, matching by the one language, `Digest`;
- `files`, `compression`, `formats`, `slowlog`, `prefilter`, `file_source` — the FILE backend;
- `clickhouse` — the CLICKHOUSE backend on the OpenTelemetry `otel_logs` schema;
- `deadline` — the call's deadline carried into the thread that does the work;
- `scenario_files` — a small incident written to real files by real producers.
"""

from __future__ import annotations

from workers.sources.logs.config import LogsConfig, LogsConfigError, load_logs_config
from workers.sources.logs.router import LogRouter, logs_source_from_env
from workers.sources.logs.scenario_files import write_file_scenario
from workers.sources.logs.source import MockLogSettings, MockLogSource, parse_log_query

__all__ = [
    "LogRouter",
    "LogsConfig",
    "LogsConfigError",
    "MockLogSettings",
    "MockLogSource",
    "load_logs_config",
    "logs_source_from_env",
    "parse_log_query",
    "write_file_scenario",
]
