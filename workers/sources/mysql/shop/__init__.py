"""The demo `shop` database: schema, deterministic data, loader and SELECT-only reader."""

from __future__ import annotations

from workers.sources.mysql.shop.data import generate
from workers.sources.mysql.shop.loader import (
    DEMO_READER,
    LOCAL_HOSTS,
    DemoShop,
    create_reader,
    ensure_demo_shop,
    load_shop,
    prepare_demo_shop,
    write_init_sql,
)
from workers.sources.mysql.shop.schema import DDL, TABLES

__all__ = [
    "DDL",
    "DEMO_READER",
    "LOCAL_HOSTS",
    "TABLES",
    "DemoShop",
    "create_reader",
    "ensure_demo_shop",
    "generate",
    "load_shop",
    "prepare_demo_shop",
    "write_init_sql",
]
