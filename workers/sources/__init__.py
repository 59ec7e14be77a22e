"""The evidence sources: one room for every backend a tool can read.

Layout:
- `base` — the `Source` / `ImmediateSource` protocols and `SourceError`, the only error a
  source raises;
- `registry` — `open_sources` (the configured sources by tool, from the environment),
  `warm_up`, and `wrap_sources`, the hook that wraps every source (fault injection, tracing);
- `knowledge/` — `lookup_knowledge`: the embedded runbook index and the HTTP RAG adapter;
- `logs/` — `query_logs`: the query language, the MOCK source over `mocklog/`, and the FILE
  and CLICKHOUSE backends chosen per topic by `ACI_LOGS_CONFIG`;
- `mysql/` — `query_mysql`: the SQL guard, the PyMySQL source and the demo `shop` data;
- `instant` — a no-I/O source for benchmarks of the pipeline itself.

Adding a backend: a module in its tool's subpackage with a class that implements `Source`
(raise `SourceError` with a safe message; return the raw upstream answer the tool's
projector in `contracts/` reads) and a `from_env(env)` factory; then point the tool's entry
in `registry._FACTORIES` at that factory (or at a chooser, as `knowledge_source_from_env`
does between the index and the RAG adapter).
"""

from __future__ import annotations

from workers.sources.base import ImmediateSource, Source, SourceError
from workers.sources.registry import describe_sources, open_sources, warm_up, wrap_sources

__all__ = [
    "ImmediateSource",
    "Source",
    "SourceError",
    "describe_sources",
    "open_sources",
    "warm_up",
    "wrap_sources",
]
