"""The upstream `lookup_knowledge` source: an existing RAG service over HTTP (httpx, async).

The query is POSTed as JSON (`{"query": ...}`); the decoded JSON answer is returned as is, and
`contracts.project_rag` copes with the usual shapes (hits under a context pack or a flat list,
text under `content`/`text`/`snippet`, `relevanceLevel`/`relevance_level`).

Every failure raises `SourceError`, never an empty answer, with a message that names no URL,
host or header value:

    timeout (per read, or the whole call past ACI_RAG_TIMEOUT_S)  -> TIMEOUT  (retryable)
    connect / network error       -> UNAVAILABLE  (retryable)
    HTTP 401, 403                 -> AUTHORIZATION
    HTTP 429, 502, 503, 504       -> UNAVAILABLE  (retryable)
    any other non-2xx             -> EXECUTION
    body over ACI_RAG_MAX_BYTES (raw or decoded), unknown or corrupt Content-Encoding,
    not UTF-8, not JSON, nested too deeply                        -> PROJECTION

The body is decoded here, not by httpx (`content_encoding`): the limit counts decoded
bytes while they are produced, so a compression bomb stops at the limit. A lone surrogate
escape (`"\\ud800"`, valid JSON, not encodable as UTF-8) is a PROJECTION error too: an excerpt
must be the document's text verbatim, and that text cannot be carried, nor replaced by a guess.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Final

import anyio
import httpx
import msgspec

from contracts.requests import LookupKnowledgeRequest
from contracts.status import ErrorCode
from workers.sources.base import SourceError
from workers.sources.knowledge.content_encoding import (
    BodyTooLarge,
    BodyUndecodable,
    accept_encoding,
    read_bounded,
)

__all__ = ["HttpRagSource", "RagHttpSettings", "check_status", "decode_answer", "parse_headers"]

DEFAULT_TIMEOUT_S: Final = 10.0
DEFAULT_MAX_BYTES: Final = 4 * 1024 * 1024
_RETRYABLE_STATUS: Final = frozenset({429, 502, 503, 504})
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
# Where a lone surrogate can hide in strictly decoded UTF-8 text: only in a \\uXXXX escape.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


class RagHttpSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Operator settings of the upstream RAG service."""

    url: str
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_bytes: int = DEFAULT_MAX_BYTES


def _expand(value: str, env: Mapping[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in env:
            raise ValueError(f"ACI_RAG_HEADERS references {name}, which is not set")
        return env[name]

    return _ENV_REF.sub(one, value)


def parse_headers(raw: str, env: Mapping[str, str]) -> dict[str, str]:
    """Headers from a JSON object or `Name: value` lines; `${VAR}` in values comes from `env`."""
    raw = raw.strip()
    if not raw:
        return {}
    pairs: list[tuple[str, str]]
    if raw.startswith("{"):
        try:
            decoded = json.loads(raw)
        except ValueError as exc:
            raise ValueError("ACI_RAG_HEADERS is not a valid JSON object") from exc
        if not isinstance(decoded, dict) or not all(isinstance(v, str) for v in decoded.values()):
            raise ValueError("ACI_RAG_HEADERS must map header names to strings")
        pairs = list(decoded.items())
    else:
        pairs = []
        for line in raw.splitlines():
            if not line.strip():
                continue
            name, sep, value = line.partition(":")
            if not sep:
                raise ValueError("ACI_RAG_HEADERS lines must look like 'Name: value'")
            pairs.append((name.strip(), value.strip()))
    headers: dict[str, str] = {}
    for name, value in pairs:
        if not _HEADER_NAME.match(name):
            raise ValueError("ACI_RAG_HEADERS holds an invalid header name")
        headers[name] = _expand(value, env)
    return headers


class HttpRagSource:
    """`lookup_knowledge` against an operator-configured RAG service."""

    def __init__(self, settings: RagHttpSettings) -> None:
        self.settings = settings
        self._client = httpx.AsyncClient(
            headers={"Accept-Encoding": accept_encoding(), **settings.headers},
            timeout=httpx.Timeout(settings.timeout_s),
            follow_redirects=False,
            trust_env=False,
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> HttpRagSource:
        """Settings from ACI_RAG_URL, ACI_RAG_HEADERS, ACI_RAG_TIMEOUT_S, ACI_RAG_MAX_BYTES."""
        url = env.get("ACI_RAG_URL", "").strip()
        if not url.startswith(("http://", "https://")):
            raise ValueError("ACI_RAG_URL must be an http:// or https:// URL")
        timeout = float(env.get("ACI_RAG_TIMEOUT_S", "").strip() or DEFAULT_TIMEOUT_S)
        max_bytes = int(env.get("ACI_RAG_MAX_BYTES", "").strip() or DEFAULT_MAX_BYTES)
        if not 0 < timeout <= 300 or max_bytes < 1024:
            raise ValueError("ACI_RAG_TIMEOUT_S must be in (0, 300], ACI_RAG_MAX_BYTES >= 1024")
        headers = parse_headers(env.get("ACI_RAG_HEADERS", ""), env)
        return cls(
            RagHttpSettings(url=url, headers=headers, timeout_s=timeout, max_bytes=max_bytes)
        )

    async def fetch(self, request: LookupKnowledgeRequest) -> Any:
        """POST the query; the decoded JSON answer, or `SourceError`."""
        try:
            # httpx's timeout bounds each read; this bounds the call (a slow drip of bytes).
            with anyio.fail_after(self.settings.timeout_s):
                async with self._client.stream(
                    "POST", self.settings.url, json={"query": request.query}
                ) as response:
                    check_status(response.status_code)
                    body = await read_bounded(
                        response.aiter_raw(),
                        response.headers.get("Content-Encoding", ""),
                        self.settings.max_bytes,
                    )
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise SourceError(
                ErrorCode.TIMEOUT, "the knowledge service did not answer in time", retryable=True
            ) from exc
        except httpx.TransportError as exc:
            raise SourceError(
                ErrorCode.UNAVAILABLE, "the knowledge service could not be reached", retryable=True
            ) from exc
        except BodyTooLarge as exc:
            raise SourceError(
                ErrorCode.PROJECTION, "the knowledge service answer is too large"
            ) from exc
        except BodyUndecodable as exc:
            raise SourceError(
                ErrorCode.PROJECTION, "the knowledge service answer could not be decompressed"
            ) from exc
        return decode_answer(body)

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self._client.aclose()


def _no_constant(name: str) -> Any:
    # NaN, Infinity and -Infinity are Python's extensions, not JSON.
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999: JSON, but no number a result can carry
        raise ValueError("number out of range")
    return value


def decode_answer(body: bytes) -> Any:
    """The JSON value of an upstream body; a body that is not UTF-8 JSON (NaN and Infinity are
    not JSON, nor is a number out of float range, nor nesting past the parser's depth), or
    that holds a lone surrogate (no text can carry it), is a PROJECTION `SourceError`."""
    try:
        text = body.decode("utf-8-sig")
        answer = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise SourceError(
            ErrorCode.PROJECTION, "the knowledge service answered with a body that is not JSON"
        ) from exc
    if _SURROGATE_ESCAPE.search(text) is None:
        return answer
    try:
        lone = _has_lone_surrogate(answer)
    except RecursionError:
        lone = True
    if lone:
        raise SourceError(
            ErrorCode.PROJECTION, "the knowledge service answered with text that is not Unicode"
        )
    return answer


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    return False


def check_status(status: int, service: str = "knowledge service") -> None:
    """An upstream's HTTP status as a safe `SourceError` (the RAG and embedding adapters)."""
    if 200 <= status < 300:
        return
    message = f"the {service} answered with HTTP status {status}"
    if status in (401, 403):
        raise SourceError(ErrorCode.AUTHORIZATION, message)
    if status in _RETRYABLE_STATUS:
        raise SourceError(ErrorCode.UNAVAILABLE, message, retryable=True)
    raise SourceError(ErrorCode.EXECUTION, message)
