"""`ACI_MYSQL_SOURCES`: data source names an agent host lists in `query_mysql`'s schema without
holding database credentials (issue 35, item 4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.settings import SettingsError
from workers.sources.mysql.config import data_source_names, diagnostic_names
from workers.sources.mysql.source import MysqlSource


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


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (None, "(ENOENT, no such file or directory)"),
        ('[mysql]\nshop = "mysql://r:Pw1@h/shop"\nbad line\n', "not valid TOML"),
    ],
)
def test_an_unreadable_config_file_says_why_wherever_it_is_read(
    tmp_path: Path, content: str | None, why: str
) -> None:
    # Before: the agent host (`mcp --local`, `tools`) said only "ACI_MYSQL_CONFIG: cannot read
    # the data source file", and a worker "query_mysql: a configured file cannot be read (No
    # such file or directory)", naming no variable; `check` named it only for a syntax error.
    cfg = tmp_path / "mysql.toml"
    if content is not None:
        cfg.write_text(content)
    env = {"ACI_MYSQL_CONFIG": str(cfg)}
    for read in (data_source_names, diagnostic_names, MysqlSource.from_env):
        with pytest.raises(ValueError) as caught:  # SettingsError is a ValueError
            read(env)
        said = str(caught.value)
        assert said.startswith("ACI_MYSQL_CONFIG: ") and why in said, (read, said)
        assert str(tmp_path) not in said and "Pw1" not in said


def test_a_relative_config_path_says_where_it_was_read_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An MCP host starts `aci-evidence mcp` in a folder of its own (Claude Desktop: `/`); a
    # relative ACI_MYSQL_CONFIG in its `env` was refused without saying where it was looked for,
    # as ACI_LOGS_CONFIG already says.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as caught:
        data_source_names({"ACI_MYSQL_CONFIG": "conf/mysql.toml"})
    assert str(caught.value) == (
        "ACI_MYSQL_CONFIG: the file cannot be read (ENOENT, no such file or directory; "
        f"a relative path is read from the working folder {tmp_path})"
    )
