"""`ACI_MYSQL_SOURCES`: data source names an agent host lists in `query_mysql`'s schema without
holding database credentials (issue 35, item 4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pipeline.settings import SettingsError
from workers.sources.mysql.config import data_source_names


def test_names_without_credentials() -> None:
    assert data_source_names({"ACI_MYSQL_SOURCES": "shop, PKGS,,"}) == ("pkgs", "shop")
    env = {"ACI_MYSQL_SOURCES": "shop", "ACI_MYSQL_BILLING_URL": "mysql://u:p@h/db"}
    assert data_source_names(env) == ("billing", "shop")
    with pytest.raises(SettingsError, match="'bad-name' is not a data source name"):
        data_source_names({"ACI_MYSQL_SOURCES": "shop,bad-name"})


def test_the_tool_definitions_list_them() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_MYSQL_")}
    env["ACI_MYSQL_SOURCES"] = "shop,pkgs"
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "tools", "--format", "schema"],
        env=env, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert '"pkgs"' in out.stdout and '"shop"' in out.stdout
    assert "mysql://" not in out.stdout
    json.loads(out.stdout)
