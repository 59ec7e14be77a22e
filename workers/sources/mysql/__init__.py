"""The `query_mysql` source: the SQL guard (`sqlguard`, pure), guarded SQL on a read-only
PyMySQL session (`source`), and the demo `shop` database (`shop/`) (docs/mysql.md).
"""

from __future__ import annotations

from workers.sources.mysql.source import ConnectParams, MysqlSource
from workers.sources.mysql.sqlguard import guard_sql

__all__ = ["ConnectParams", "MysqlSource", "guard_sql"]
