"""Tool definitions: names, OpenAI strict validity, neutral descriptions, every format."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts import TOOL_NAMES, export_tools, input_schema
from contracts.requests import TOOL_REQUESTS, decode_invocation
from contracts.results import ErrorResult
from contracts.tools import BOUND_KEYWORDS, DESCRIPTIONS, ToolFormat, without_bounds

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


def _bounds(node: Any, path: str = "$") -> set[tuple[str, str, Any]]:
    """Every (path, keyword, value) of a bound or an enum in a schema (after `$ref`s)."""
    found: set[tuple[str, str, Any]] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key in BOUND_KEYWORDS or key == "enum":
                found.add((path, key, json.dumps(value)))
            elif key not in ("description", "title", "default"):
                found |= _bounds(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found |= _bounds(value, f"{path}[{index}]")
    return found


def _decoder_schema(name: str) -> dict[str, Any]:
    raw = msgspec.json.schema(TOOL_REQUESTS[name])
    defs = raw["$defs"]

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(defs[node["$ref"].rsplit("/", 1)[-1]])
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    return dict(inline(raw))


@pytest.mark.parametrize("fmt", FORMATS)
def test_schemas_carry_every_bound_the_decoder_enforces(fmt: ToolFormat) -> None:
    # Before, bounds were left out: an empty query or a lookback of 0 fit the published schema
    # and came back as SCHEMA errors. Strict OpenAI forms carry them too (supported there).
    for tool in export_tools(fmt):
        name = _name(tool)
        expected = {b for b in _bounds(_decoder_schema(name)) if b[1] != "enum" or "topic" in b[0]}
        published = _bounds(_parameters(fmt, tool))
        assert {(k, v) for _p, k, v in expected} <= {(k, v) for _p, k, v in published}, name
        assert "tool_call_id" not in _parameters(fmt, tool)["properties"]
        assert not _keys(_parameters(fmt, tool)) & {"default", "title"}


def test_without_bounds_is_the_anthropic_strict_form() -> None:
    for name in TOOL_NAMES:
        stripped = without_bounds(input_schema(name))
        assert not _keys(stripped) & BOUND_KEYWORDS
        assert stripped["properties"].keys() == input_schema(name)["properties"].keys()


def test_a_configured_data_source_enum_replaces_the_name_rule() -> None:
    source = input_schema("query_mysql", data_sources=["shop"])["properties"]["data_source"]
    assert source == {"description": source["description"], "type": "string", "enum": ["shop"]}


_SCALARS = st.one_of(
    st.text(max_size=5),
    st.text(min_size=3995, max_size=4005),
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
)
_ARGUMENTS = st.one_of(
    st.fixed_dictionaries(
        {"query": st.one_of(st.text(max_size=3), st.text(min_size=999, max_size=1001))}
    ),
    st.fixed_dictionaries(
        {
            "topic": st.sampled_from(["APPLICATION", "SYSTEM_EVENTS", "NOPE"]),
            "query": st.text(max_size=3),
            "lookback_minutes": st.one_of(
                st.none(),
                st.integers(-2, 1442),
                st.floats(0, 2000).filter(lambda x: not x.is_integer()),
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "data_source": st.one_of(
                st.sampled_from(["shop", "", "9x", "a" * 64, "a" * 65]), st.text(max_size=4)
            ),
            "sql": st.one_of(
                st.sampled_from(["SELECT 1", ""]), st.text(min_size=7999, max_size=8001)
            ),
            "params": st.one_of(
                st.none(),
                st.lists(_SCALARS, max_size=3),
                st.lists(st.integers(), min_size=99, max_size=101),
            ),
        }
    ),
)
_TOOL_OF = {"query": "lookup_knowledge", "topic": "query_logs", "sql": "query_mysql"}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arguments=_ARGUMENTS)
def test_the_published_schema_accepts_exactly_what_the_decoder_accepts(
    arguments: dict[str, Any],
) -> None:
    # A model held to the schema (strict decoding) never writes a call the server refuses
    # as SCHEMA, and the schema refuses nothing the server would take. Only blankness (a
    # query or sql of spaces, refused after decoding) and a knowledge query without a letter
    # or digit ("???") are not schema keywords, and JSON
    # Schema's `integer` takes `1.0`, which the decoder refuses (a model writes `1`).
    tool = next(_TOOL_OF[k] for k in ("sql", "topic", "query") if k in arguments)
    schema_ok = jsonschema.Draft202012Validator(input_schema(tool)).is_valid(arguments)
    strict_ok = jsonschema.Draft202012Validator(input_schema(tool, strict=True)).is_valid(
        {k: arguments.get(k) for k in input_schema(tool, strict=True)["properties"]}
    )
    decoded = decode_invocation(tool, "c1", json.dumps(arguments))
    blank = any(isinstance(v, str) and v and not v.strip() for k, v in arguments.items()
                if k in ("query", "sql") and tool != "query_logs")  # fmt: skip
    query = arguments.get("query")
    if tool == "lookup_knowledge" and isinstance(query, str) and query:
        blank = blank or not any(c.isalnum() for c in query)
    server_ok = not isinstance(decoded, ErrorResult)
    assert schema_ok == strict_ok
    assert schema_ok == (server_ok or blank), (arguments, decoded)


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
