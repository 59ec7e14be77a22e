"""The hosts list the configured logical MySQL data sources in `query_mysql`'s schema
(issue 24): `aci-evidence tools` and the MCP server, from the MySQL configuration."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from hosts import mcp_server
from pipeline.settings import Settings, SettingsError
from workers.sources.mysql.source import data_source_names

pytest.importorskip("mcp")


def _clear(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("ACI_MYSQL_"):
            monkeypatch.delenv(key)


def test_names_come_from_the_urls_and_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "mysql.toml"
    config.write_text(
        '[mysql]\nbilling = "mysql://r:p@db:3306/billing"\n"bad-name" = "mysql://x@y/z"\n'
    )
    env = {
        "ACI_MYSQL_SHOP_URL": "mysql://r:p@127.0.0.1:3306/shop",
        "ACI_MYSQL_CONFIG": str(config),
        "ACI_MYSQL_STATEMENT_TIMEOUT_MS": "100",  # not a data source
    }
    assert data_source_names(env) == ("billing", "shop")  # "bad-name" no request could carry
    assert data_source_names({}) == ()
    with pytest.raises(SettingsError) as info:
        data_source_names({"ACI_MYSQL_CONFIG": str(tmp_path / "missing.toml")})
    assert "ACI_MYSQL_CONFIG" in str(info.value) and str(tmp_path) not in str(info.value)


@pytest.mark.parametrize("fmt", ["openai", "responses", "anthropic", "mcp", "schema"])
def test_the_tools_command_lists_the_configured_names(
    fmt: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _clear(monkeypatch)
    assert main(["tools", "--format", fmt]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert "enum" not in json.dumps(plain[2])  # no names configured: a plain string
    monkeypatch.setenv("ACI_MYSQL_SHOP_URL", "mysql://reader:secret@10.9.8.7:3306/shop_prod")
    monkeypatch.setenv("ACI_MYSQL_ORDERS_URL", "mysql://reader:secret@10.9.8.7:3306/orders")
    assert main(["tools", "--format", fmt]) == 0
    out = capsys.readouterr().out
    listed = json.loads(out)
    assert '"enum": ["orders", "shop"]' in json.dumps(listed[2])
    assert listed[:2] == plain[:2]
    for leak in ("secret", "10.9.8.7", "shop_prod", "reader"):  # logical names only
        assert leak not in out


async def test_the_mcp_server_lists_them() -> None:
    from mcp import Client

    from workers.sources.instant import InstantSource

    sources: dict[str, Any] = dict.fromkeys(["lookup_knowledge", "query_mysql"], InstantSource())
    runner = mcp_server.local_runner(sources, Settings())
    server = mcp_server.build_server(runner, data_sources=("shop", "billing"))
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
        again = (await client.list_tools()).tools
    schema = tools[2].input_schema
    assert schema["properties"]["data_source"]["enum"] == ["billing", "shop"]
    assert [t.input_schema for t in again] == [t.input_schema for t in tools]
    assert mcp_server.list_tools_result()["tools"][2]["inputSchema"]["properties"][
        "data_source"
    ] == {
        # no names configured: the request's own name rule (bounds are published since the
        # schemas carry every bound the decoder enforces)
        "description": "Logical name of the business database.",
        "type": "string",
        "minLength": 1,
        "maxLength": 64,
        "pattern": "^[A-Za-z][A-Za-z0-9_]*$",
    }
