"""Tool definitions for the three evidence tools, generated from the request structs.

Exported in the wire shapes agent runtimes register: OpenAI Chat Completions and Responses
(strict mode), Anthropic Messages, MCP, and the plain JSON schema.
"""

from __future__ import annotations

import copy
from typing import Any, Final, Literal

import msgspec

from contracts.requests import TOOL_REQUESTS

__all__ = ["DESCRIPTIONS", "MCP_ANNOTATIONS", "ToolFormat", "export_tools", "input_schema"]

ToolFormat = Literal["openai", "responses", "anthropic", "mcp", "schema"]

DESCRIPTIONS: Final[dict[str, str]] = {
    "lookup_knowledge": (
        "Find passages of runbooks and internal operations documents about a symptom, cause "
        "or procedure. Call it when you need to know how a problem is diagnosed or fixed. "
        "Input: a plain-language question. It cannot see live logs, metrics or data."
    ),
    "query_logs": (
        "Search recent log records of one topic: APPLICATION (service logs), "
        "DATABASE_SLOW_QUERY (slow SQL) or SYSTEM_EVENTS (deployments, pods, nodes). Call it to "
        "see what happened before and during an incident. Input: topic, query terms, optional "
        "lookback in minutes. It cannot search other topics, metrics or business data."
    ),
    "query_mysql": (
        "Run one read-only SELECT on a named business database to check the data behind an "
        "incident. Input: the database name, SQL with ? placeholders, and the values for them. "
        "It cannot change data, run several statements or reach databases it is not given."
    ),
}

# Display names (MCP `title`), for people choosing tools in a host's interface.
_TITLES: Final[dict[str, str]] = {
    "lookup_knowledge": "Look up runbooks",
    "query_logs": "Search recent logs",
    "query_mysql": "Read a business database",
}

MCP_ANNOTATIONS: Final = {
    "readOnlyHint": True,
    "destructiveHint": False,
    "idempotentHint": True,
    "openWorldHint": False,
}


# Bounds are enforced when arguments are decoded; exported schemas leave them out because
# strict modes differ in which keywords they accept (Anthropic strict takes no length or
# numeric bounds) and because bounds are not the model's business.
_DROPPED_KEYWORDS: Final = frozenset(
    {"title", "default", "minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems",
     "pattern"}
)  # fmt: skip


_ENUM_TYPES: Final = {str: "string", int: "integer"}


def _typed(node: dict[str, Any]) -> dict[str, Any]:
    """An enum node with the `type` of its values: OpenAI strict mode rejects a schema node
    that has neither a `type` nor `anyOf` branches that each have one.

    Unions stay `anyOf` branches of one type each (msgspec's form), never a list of types:
    the MCP Inspector's strict check flags a type list as unportable.
    """
    values = node.get("enum")
    if "type" not in node and isinstance(values, list):
        kinds = {_ENUM_TYPES.get(type(v)) for v in values}
        if len(kinds) == 1 and None not in kinds:
            return {**node, "type": kinds.pop()}
    return node


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            return _inline(defs[ref.rsplit("/", 1)[-1]], defs)
        out = {k: _inline(v, defs) for k, v in node.items() if k not in _DROPPED_KEYWORDS}
        branches = out.get("anyOf")
        if isinstance(branches, list) and "description" not in out:
            # msgspec puts an optional field's description inside its non-null branch.
            for branch in branches:
                if isinstance(branch, dict) and "description" in branch:
                    out["description"] = branch.pop("description")
        return _typed(out)
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def input_schema(tool: str, *, strict: bool = False) -> dict[str, Any]:
    """The input JSON schema of a tool, self-contained (no `$ref`).

    `strict=True` gives the OpenAI strict-mode form: every property required (optional ones
    already accept null), `additionalProperties: false`. Every node has a `type`, or is an
    `anyOf` of branches that each have one.
    """
    raw = msgspec.json.schema(TOOL_REQUESTS[tool])
    schema: dict[str, Any] = _inline(raw, raw.get("$defs", {}))
    schema.pop("$defs", None)
    schema.pop("description", None)  # the tool description says it once
    schema["additionalProperties"] = False
    if strict:
        schema["required"] = list(schema["properties"])
    return copy.deepcopy(schema)


def export_tools(fmt: ToolFormat) -> list[dict[str, Any]]:
    """The three tool definitions in one runtime's wire shape."""
    out: list[dict[str, Any]] = []
    for name, description in DESCRIPTIONS.items():
        if fmt == "openai":
            out.append(
                {
                    "type": "function",
                    "function": {
                        "name": name,
                        "description": description,
                        "parameters": input_schema(name, strict=True),
                        "strict": True,
                    },
                }
            )
        elif fmt == "responses":
            out.append(
                {
                    "type": "function",
                    "name": name,
                    "description": description,
                    "parameters": input_schema(name, strict=True),
                    "strict": True,
                }
            )
        elif fmt == "anthropic":
            out.append(
                {"name": name, "description": description, "input_schema": input_schema(name)}
            )
        elif fmt == "mcp":
            out.append(
                {
                    "name": name,
                    "title": _TITLES[name],
                    "description": description,
                    "inputSchema": input_schema(name),
                    "annotations": dict(MCP_ANNOTATIONS),
                }
            )
        elif fmt == "schema":
            out.append({"name": name, "description": description, "schema": input_schema(name)})
        else:
            raise ValueError(f"unknown tool format: {fmt!r}")
    return out
