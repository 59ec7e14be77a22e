"""Tool definitions: names, OpenAI strict validity, neutral descriptions, every format."""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec
import pytest

from contracts import TOOL_NAMES, export_tools, input_schema
from contracts.tools import DESCRIPTIONS, ToolFormat

FORMATS: list[ToolFormat] = ["openai", "responses", "anthropic", "mcp", "schema"]
NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# CONTRACT.md §7: words a tool definition must never contain (case-insensitive).
FORBIDDEN = (
    "milvus", "l0", "l1", "rerank", "cls", "region", "topicid", "redis", "jdbc", "credential",
    "topk", "limit", "trace", "score", "retries", "retry", "audit storage", "dsn", "password",
    "host",
)  # fmt: skip


def _name(tool: dict[str, Any]) -> str:
    return str(tool.get("function", tool)["name"])


def _parameters(fmt: ToolFormat, tool: dict[str, Any]) -> dict[str, Any]:
    return {
        "openai": lambda: tool["function"]["parameters"],
        "responses": lambda: tool["parameters"],
        "anthropic": lambda: tool["input_schema"],
        "mcp": lambda: tool["inputSchema"],
        "schema": lambda: tool["schema"],
    }[fmt]()


def _objects(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        found = [node] if node.get("type") == "object" else []
        return found + [o for v in node.values() for o in _objects(v)]
    if isinstance(node, list):
        return [o for v in node for o in _objects(v)]
    return []


def _keys(node: Any) -> set[str]:
    if isinstance(node, dict):
        return set(node) | {k for v in node.values() for k in _keys(v)}
    if isinstance(node, list):
        return {k for v in node for k in _keys(v)}
    return set()


@pytest.mark.parametrize("fmt", FORMATS)
def test_names_are_stable_and_valid(fmt: ToolFormat) -> None:
    names = [_name(t) for t in export_tools(fmt)]
    assert names == ["lookup_knowledge", "query_logs", "query_mysql"] == list(TOOL_NAMES)
    assert all(NAME_RE.match(n) for n in names)


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_forbidden_word_anywhere_in_the_exported_json(fmt: ToolFormat) -> None:
    text = json.dumps(export_tools(fmt)).casefold()
    for word in FORBIDDEN:
        assert word not in text, word


@pytest.mark.parametrize("fmt", ["openai", "responses"])
def test_openai_strict_validity(fmt: ToolFormat) -> None:
    for tool in export_tools(fmt):
        strict = tool["function"]["strict"] if fmt == "openai" else tool["strict"]
        assert strict is True
        params = _parameters(fmt, tool)
        assert params["type"] == "object"
        assert "$ref" not in _keys(params) and "$defs" not in _keys(params)
        for obj in _objects(params):
            assert obj["additionalProperties"] is False
            assert sorted(obj["required"]) == sorted(obj["properties"])
        for prop in params["properties"].values():
            assert _has_a_type(prop)  # an enum alone is refused by OpenAI strict
            assert prop.get("description")


def _schema_nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    """Every schema node of a JSON schema: the root and each nested subschema."""
    out = [node]
    for key in ("properties", "$defs", "definitions", "patternProperties"):
        for child in node.get(key, {}).values():
            out += _schema_nodes(child)
    for key in ("items", "additionalProperties", "not", "contains"):
        if isinstance(node.get(key), dict):
            out += _schema_nodes(node[key])
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for child in node.get(key, []):
            out += _schema_nodes(child)
    return out


def test_schema_nodes_walks_every_subschema() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"anyOf": [{"type": "string"}, {"items": {"enum": [1]}}]}},
        "additionalProperties": {"type": "integer"},
    }
    assert len(_schema_nodes(schema)) == 6


def _has_a_type(node: dict[str, Any]) -> bool:
    """OpenAI strict's rule: a node has one `type`, or is a union (`anyOf`) whose branches
    each have one. A list of types is refused too: the MCP Inspector's strict check flags it
    as unportable, so a nullable field is an `anyOf` with a null branch."""
    if "anyOf" in node:
        union_keys = {"anyOf", "description"}
        return set(node) <= union_keys and all(
            isinstance(b.get("type"), str) for b in node["anyOf"]
        )
    return isinstance(node.get("type"), str)


@pytest.mark.parametrize(
    ("node", "typed"),
    [
        ({"type": "string"}, True),
        ({"enum": ["A"]}, False),  # what query_logs.topic was
        ({"type": ["integer", "null"]}, False),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}], "description": "d"}, True),
        ({"anyOf": [{"type": "integer"}, {"enum": [1]}]}, False),
        ({"anyOf": [{"type": "integer"}], "enum": [1]}, False),
        ({"description": "anything"}, False),
    ],
)
def test_has_a_type_is_openai_strict_rule(node: dict[str, Any], typed: bool) -> None:
    assert _has_a_type(node) is typed


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_schema_node_has_a_type(fmt: ToolFormat) -> None:
    for tool in export_tools(fmt):
        for node in _schema_nodes(_parameters(fmt, tool)):
            assert _has_a_type(node), (_name(tool), node)
            assert "oneOf" not in node and "allOf" not in node


def test_optional_fields_are_a_null_union_in_strict_mode() -> None:
    logs = input_schema("query_logs", strict=True)["properties"]["lookback_minutes"]
    assert {"type": "null"} in logs["anyOf"]
    mysql = input_schema("query_mysql", strict=True)["properties"]["params"]
    assert {"type": "null"} in mysql["anyOf"]


@pytest.mark.parametrize("fmt", ["anthropic", "mcp", "schema"])
def test_non_strict_formats_require_only_required_fields(fmt: ToolFormat) -> None:
    schemas = {_name(t): _parameters(fmt, t) for t in export_tools(fmt)}
    assert schemas["lookup_knowledge"]["required"] == ["query"]
    assert schemas["query_logs"]["required"] == ["topic", "query"]
    assert schemas["query_mysql"]["required"] == ["data_source", "sql"]
    for schema in schemas.values():
        assert schema["additionalProperties"] is False and schema["type"] == "object"


def test_schemas_leave_bounds_out_and_name_no_agent_id() -> None:
    for name in TOOL_NAMES:
        keys = _keys(input_schema(name))
        assert not keys & {
            "maxLength",
            "minLength",
            "maximum",
            "minimum",
            "pattern",
            "default",
            "title",
        }
        assert "tool_call_id" not in input_schema(name)["properties"]


def test_topic_enum_lists_the_logical_topics() -> None:
    topic = input_schema("query_logs")["properties"]["topic"]
    assert topic["enum"] == ["APPLICATION", "DATABASE_SLOW_QUERY", "SYSTEM_EVENTS"]
    assert topic["type"] == "string"


def test_mcp_tools_have_a_title() -> None:
    titles = [tool["title"] for tool in export_tools("mcp")]
    assert all(titles) and len(set(titles)) == len(titles)


def test_mcp_annotations_say_read_only() -> None:
    for tool in export_tools("mcp"):
        assert tool["annotations"]["readOnlyHint"] is True
        assert tool["annotations"]["destructiveHint"] is False


def test_descriptions_are_short_and_say_when_input_and_cannot() -> None:
    for description in DESCRIPTIONS.values():
        assert len(description) <= 400
        assert "Call it" in description or "Run one" in description
        assert "Input:" in description and "cannot" in description


def test_unknown_format_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown tool format"):
        export_tools("yaml")  # type: ignore[arg-type]


def test_exports_are_json_and_independent_copies() -> None:
    first = export_tools("openai")
    first[0]["function"]["parameters"]["properties"].clear()
    assert export_tools("openai")[0]["function"]["parameters"]["properties"]
    assert msgspec.json.decode(msgspec.json.encode(export_tools("mcp"))) == export_tools("mcp")


@pytest.mark.parametrize(
    ("node", "typed"),
    [
        ({"enum": ["A", "B"]}, {"enum": ["A", "B"], "type": "string"}),
        ({"enum": [1, 2]}, {"enum": [1, 2], "type": "integer"}),
        ({"enum": ["A", 1]}, {"enum": ["A", 1]}),  # mixed: no single type to give
        ({"enum": [None]}, {"enum": [None]}),
        ({"type": "string"}, {"type": "string"}),
    ],
)
def test_typed_gives_an_enum_the_type_of_its_values(
    node: dict[str, Any], typed: dict[str, Any]
) -> None:
    from contracts.tools import _typed

    assert _typed(node) == typed
