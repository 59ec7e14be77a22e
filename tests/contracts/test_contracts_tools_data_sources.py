"""`query_mysql`'s schema names the configured logical data sources (issue 24), pure."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_contracts_tools import (
    FORBIDDEN,
    FORMATS,
    _has_a_type,
    _keys,
    _objects,
    _parameters,
    _schema_nodes,
)

from contracts import QueryMysqlRequest, export_tools, input_schema
from contracts.tools import DESCRIPTIONS, MAX_DATA_SOURCES, ToolFormat, data_source_enum

NAMES = ["shop", "billing", "shop"]


def _data_source(fmt: ToolFormat, names: list[str]) -> dict[str, Any]:
    [mysql] = [t for t in export_tools(fmt, data_sources=names) if "query_mysql" in json.dumps(t)]
    prop: dict[str, Any] = _parameters(fmt, mysql)["properties"]["data_source"]
    return prop


@pytest.mark.parametrize("fmt", FORMATS)
def test_configured_names_are_an_enum_in_every_format(fmt: ToolFormat) -> None:
    prop = _data_source(fmt, NAMES)
    assert prop == {
        "description": "Logical name of the business database.",
        "type": "string",
        "enum": ["billing", "shop"],  # sorted, once each: a stable definition
    }
    assert _data_source(fmt, [])["type"] == "string" and "enum" not in _data_source(fmt, [])


@pytest.mark.parametrize("fmt", FORMATS)
def test_only_the_schema_changes(fmt: ToolFormat) -> None:
    plain, named = export_tools(fmt), export_tools(fmt, data_sources=NAMES)
    # The other tools and every description are as without names.
    assert named[:2] == plain[:2]
    assert json.dumps(named).count("billing") == 1
    text = json.dumps(named).casefold()
    assert all(word not in text for word in FORBIDDEN)
    assert all(d in json.dumps(named) for d in DESCRIPTIONS.values())


@pytest.mark.parametrize("fmt", ["openai", "responses"])
def test_still_valid_for_openai_strict_mode(fmt: ToolFormat) -> None:
    for tool in export_tools(fmt, data_sources=NAMES):
        params = _parameters(fmt, tool)
        assert params["type"] == "object" and "$ref" not in _keys(params)
        for obj in _objects(params):
            assert obj["additionalProperties"] is False
            assert sorted(obj["required"]) == sorted(obj["properties"])
        for node in _schema_nodes(params):
            assert _has_a_type(node)
            if "enum" in node:  # every value of the node's own type, within the enum limit
                assert len(node["enum"]) <= MAX_DATA_SOURCES
                assert all(isinstance(v, str) for v in node["enum"])


def test_the_enum_accepts_exactly_what_the_request_accepts() -> None:
    schema = input_schema("query_mysql", data_sources=["shop"])
    assert schema["properties"]["data_source"]["enum"] == ["shop"]
    assert input_schema("query_logs", data_sources=["shop"]) == input_schema("query_logs")
    request = msgspec.convert({"data_source": "shop", "sql": "SELECT 1"}, QueryMysqlRequest)
    assert request.data_source in schema["properties"]["data_source"]["enum"]


@pytest.mark.parametrize(
    "names",
    [
        ["has space"],
        ["1shop"],
        [""],
        ["x" * 65],
        ["shop", 7],
        [f"s{i}" for i in range(MAX_DATA_SOURCES + 1)],
    ],
)
def test_names_a_request_could_not_carry_are_refused(names: list[Any]) -> None:
    with pytest.raises(ValueError):
        data_source_enum(names)
    with pytest.raises(ValueError):
        export_tools("openai", data_sources=names)


def test_the_maximum_is_allowed() -> None:
    names = [f"s{i}" for i in range(MAX_DATA_SOURCES)]
    assert len(data_source_enum(names + names)) == MAX_DATA_SOURCES


@settings(max_examples=100, deadline=None)
@given(st.lists(st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,20}", fullmatch=True), max_size=8))
def test_every_listed_name_decodes_as_a_request(names: list[str]) -> None:
    for name in data_source_enum(names):
        msgspec.convert({"data_source": name, "sql": "SELECT 1"}, QueryMysqlRequest)
    assert data_source_enum(names) == sorted(set(names))
