"""What the agent supplies, and the decoding of one framework tool call into a typed request.

Docstrings and field descriptions of the request structs become the input schema the model
reads: keep them short and free of infrastructure words. Developer notes go in comments.
"""

from __future__ import annotations

import re
from typing import Annotated, Final

import msgspec

from contracts.results import ErrorResult, error_result
from contracts.status import ErrorCode, Topic

__all__ = [
    "LOOKBACK_MAX_MINUTES",
    "TOOL_NAMES",
    "TOOL_REQUESTS",
    "LookupKnowledgeRequest",
    "QueryLogsRequest",
    "QueryMysqlRequest",
    "Request",
    "decode_invocation",
    "is_valid_tool_call_id",
]

LOOKBACK_MAX_MINUTES: Final = 1440
MAX_ARGUMENTS_BYTES: Final = 65_536
MAX_TOOL_CALL_ID_CHARS: Final = 256

Scalar = Annotated[str, msgspec.Meta(max_length=4000)] | int | float | bool | None


class LookupKnowledgeRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Look up runbooks and internal operations documents."""

    query: Annotated[
        str,
        msgspec.Meta(
            min_length=1,
            max_length=1000,
            description="The question or symptom to look up, in plain words.",
        ),
    ]


class QueryLogsRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Search recent log records of one logical topic."""

    topic: Annotated[Topic, msgspec.Meta(description="Which log topic to search.")]
    query: Annotated[
        str,
        msgspec.Meta(
            max_length=1000,
            description=(
                'Terms that must all match (case-insensitive); "quoted phrase", '
                "field:value and -exclude are supported; empty matches every record."
            ),
        ),
    ]
    lookback_minutes: (
        Annotated[
            int,
            msgspec.Meta(
                ge=1,
                le=LOOKBACK_MAX_MINUTES,
                description="Minutes back from now to search (1 to 1440); null for the default.",
            ),
        ]
        | None
    ) = None


class QueryMysqlRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Run one read-only SELECT on a named business database."""

    data_source: Annotated[
        str,
        msgspec.Meta(
            min_length=1,
            max_length=64,
            pattern=r"^[A-Za-z][A-Za-z0-9_]*$",
            description="Logical name of the business database.",
        ),
    ]
    sql: Annotated[
        str,
        msgspec.Meta(
            min_length=1,
            max_length=8000,
            description="One SELECT statement; use ? for each value.",
        ),
    ]
    params: (
        Annotated[
            list[Scalar],
            msgspec.Meta(max_length=100, description="Values for the ? placeholders, in order."),
        ]
        | None
    ) = None


Request = LookupKnowledgeRequest | QueryLogsRequest | QueryMysqlRequest

TOOL_REQUESTS: Final[dict[str, type[Request]]] = {
    "lookup_knowledge": LookupKnowledgeRequest,
    "query_logs": QueryLogsRequest,
    "query_mysql": QueryMysqlRequest,
}
TOOL_NAMES: Final = tuple(TOOL_REQUESTS)

_ENCODER: Final = msgspec.json.Encoder()
_JSON_DECODERS: Final = {name: msgspec.json.Decoder(t) for name, t in TOOL_REQUESTS.items()}


def is_valid_tool_call_id(value: object) -> bool:
    """True for a framework tool call id the contract accepts: 1-256 printable ASCII, no space."""
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_TOOL_CALL_ID_CHARS:
        return False
    return value.isascii() and value.isprintable() and " " not in value


def _schema_error(tool_call_id: str, message: str) -> ErrorResult:
    return error_result(ErrorCode.SCHEMA, message, tool_call_id)


def decode_invocation(
    tool: object, tool_call_id: object, arguments: object
) -> Request | ErrorResult:
    """Turn one framework tool call into a typed request, or an ERROR result saying why not.

    `arguments` may be the JSON string the model produced or an already-decoded object.
    The tool call id is never minted, trimmed or derived: an invalid one gives an ERROR
    result that carries no id at all.
    """
    if not is_valid_tool_call_id(tool_call_id):
        return error_result(
            ErrorCode.INVALID_TOOL_CALL_ID,
            "the framework tool call id is missing or invalid "
            "(1 to 256 printable ASCII characters without whitespace)",
        )
    assert isinstance(tool_call_id, str)
    if not isinstance(tool, str) or tool not in TOOL_REQUESTS:
        return error_result(
            ErrorCode.UNKNOWN_TOOL,
            f"unknown tool; available tools: {', '.join(TOOL_NAMES)}",
            tool_call_id,
        )
    try:
        if isinstance(arguments, str | bytes | bytearray):
            if len(arguments) > MAX_ARGUMENTS_BYTES:
                return _schema_error(tool_call_id, "arguments are too large")
            request: Request = _JSON_DECODERS[tool].decode(arguments)
        elif isinstance(arguments, dict):
            # Through JSON, so an object decodes exactly as its JSON text would and a value
            # that cannot be published (a lone surrogate, a set) is refused here, not later.
            request = _JSON_DECODERS[tool].decode(_ENCODER.encode(arguments))
        else:
            return _schema_error(tool_call_id, "arguments must be a JSON object")
    except msgspec.ValidationError as exc:
        return _schema_error(tool_call_id, _with_root_path(str(exc)))
    except msgspec.DecodeError as exc:
        return _schema_error(tool_call_id, f"arguments are not valid JSON: {exc}")
    except (TypeError, ValueError, RecursionError):
        # Objects that are not JSON-shaped (sets, custom types), text that is not Unicode.
        return _schema_error(tool_call_id, "arguments must be a JSON object of JSON values")
    return _check_semantics(request, tool_call_id)


_TOO_LONG: Final = re.compile(r"Expected `(str|array)` of length <= (\d+) - at `(\$[^`]*)`")


def _with_root_path(message: str) -> str:
    # msgspec names nested paths (`$.params[2]`) but not the root for root-level failures.
    message = _plain_cap(message)
    return message if "`$" in message else f"{message} - at `$`"


def _plain_cap(message: str) -> str:
    """A size cap said as one (`sql is longer than its cap of 8,000 characters`), where msgspec
    says "Expected `str` of length <= 8000"."""
    found = _TOO_LONG.fullmatch(message)
    if found is None:
        return message
    kind, cap, path = found.group(1), int(found.group(2)), found.group(3)
    what = "characters" if kind == "str" else "items"
    name = path.removeprefix("$.") or "the value"
    return f"{name} is longer than its cap of {cap:,} {what}; shorten it - at `{path}`"


def _check_semantics(request: Request, tool_call_id: str) -> Request | ErrorResult:
    match request:
        case LookupKnowledgeRequest(query=query) if not query.strip():
            return _schema_error(tool_call_id, "query must not be blank - at `$.query`")
        case LookupKnowledgeRequest(query=query) if not any(c.isalnum() for c in query):
            # "???" or "--": nothing to look up; answered, it would read as "no evidence".
            return _schema_error(
                tool_call_id, "query must hold a letter or digit to look up - at `$.query`"
            )
        case QueryMysqlRequest(sql=sql) if not sql.strip():
            return _schema_error(tool_call_id, "sql must not be blank - at `$.sql`")
    return request
