"""The `query_logs` source: the query language and matching (`source`, shared by any log
backend) and the MOCK source over the deterministic incident world in `mocklog/`
(docs/logs.md).
"""

from __future__ import annotations

from workers.sources.logs.source import MockLogSettings, MockLogSource, parse_log_query

__all__ = ["MockLogSettings", "MockLogSource", "parse_log_query"]
