"""The `query_mysql` source: the SQL guard (`sqlguard`, pure), guarded SQL on a read-only
PyMySQL session (`source`), and the demo `shop` database (`shop/`) (docs/mysql.md).
"""

from __future__ import annotations

from typing import Any

from workers.sources.mysql.source import ConnectParams, MysqlSource

__all__ = ["ConnectParams", "MysqlSource", "guard_sql"]


def __getattr__(name: str) -> Any:
    # The guard imports sqlglot (~0.1 s): a worker loads it with its first SQL, not at start.
    if name == "guard_sql":
        from workers.sources.mysql.sqlguard import guard_sql

        return guard_sql
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
