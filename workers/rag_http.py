"""The upstream `lookup_knowledge` source: an existing RAG service over HTTP (httpx, async).

The query is POSTed as JSON (`{"query": ...}`); the decoded JSON answer is returned as is, and
`contracts.project_rag` copes with the usual shapes (hits under a context pack or a flat list,
text under `content`/`text`/`snippet`, `relevanceLevel`/`relevance_level`).

Every failure raises `SourceError`, never an empty answer, with a message that names no URL,
host or header value:

    timeout                       -> TIMEOUT      (retryable)
    connect / network error       -> UNAVAILABLE  (retryable)
    HTTP 401, 403                 -> AUTHORIZATION
    HTTP 429, 502, 503, 504       -> UNAVAILABLE  (retryable)
    any other non-2xx             -> EXECUTION
    body too large, not JSON      -> PROJECTION
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

import httpx
import msgspec

from contracts.requests import LookupKnowledgeRequest
from contracts.status import ErrorCode
from workers.source import SourceError

__all__ = ["HttpRagSource", "RagHttpSettings", "parse_headers"]

DEFAULT_TIMEOUT_S: Final = 10.0
DEFAULT_MAX_BYTES: Final = 4 * 1024 * 1024
_RETRYABLE_STATUS: Final = frozenset({429, 502, 503, 504})
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


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
            headers=settings.headers,
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
            async with self._client.stream(
                "POST", self.settings.url, json={"query": request.query}
            ) as response:
                _check_status(response.status_code)
                body = await self._read_bounded(response)
        except httpx.TimeoutException as exc:
            raise SourceError(
                ErrorCode.TIMEOUT, "the knowledge service did not answer in time", retryable=True
            ) from exc
        except httpx.TransportError as exc:
            raise SourceError(
                ErrorCode.UNAVAILABLE, "the knowledge service could not be reached", retryable=True
            ) from exc
        try:
            return json.loads(body)
        except ValueError as exc:
            raise SourceError(
                ErrorCode.PROJECTION, "the knowledge service answered with a body that is not JSON"
            ) from exc

    async def _read_bounded(self, response: httpx.Response) -> bytes:
        parts: list[bytes] = []
        size = 0
        async for part in response.aiter_bytes():
            size += len(part)
            if size > self.settings.max_bytes:
                raise SourceError(ErrorCode.PROJECTION, "the knowledge service answer is too large")
            parts.append(part)
        return b"".join(parts)

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self._client.aclose()


def _check_status(status: int) -> None:
    if 200 <= status < 300:
        return
    message = f"the knowledge service answered with HTTP status {status}"
    if status in (401, 403):
        raise SourceError(ErrorCode.AUTHORIZATION, message)
    if status in _RETRYABLE_STATUS:
        raise SourceError(ErrorCode.UNAVAILABLE, message, retryable=True)
    raise SourceError(ErrorCode.EXECUTION, message)
