"""The upstream RAG adapter against a real local HTTP server started by the test."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import pytest

from contracts import project_rag
from contracts.bounds import DEFAULT_BOUNDS
from contracts.requests import LookupKnowledgeRequest
from contracts.results import ErrorResult, RagResult
from contracts.status import ErrorCode, EvidenceStatus, RelevanceLevel
from workers.sources import SourceError
from workers.sources.knowledge.rag_http import HttpRagSource, RagHttpSettings, parse_headers

SECRET = "s3cr3t-token-value"
CONTEXT_PACK = {
    "requestId": "r-1",
    "contextPack": {
        "relevanceLevel": "medium",
        "hits": [
            {
                "documentId": "d-1",
                "source": "kb/pool.md",
                "title": "Pool",
                "breadcrumb": "Pool > Causes",
                "content": "A leak on an error path.",
                "scores": {"bm25": 3.1},
            }
        ],
    },
    "retrievalTrace": [{"step": "rerank"}],
}
FLAT = [{"doc_id": "d-2", "text": "Roll back first.", "relevance_level": "HIGH"}]


class _Handler(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []  # noqa: RUF012 - shared by the handler threads on purpose

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        _Handler.seen.append({"path": self.path, "headers": dict(self.headers), "body": body})
        match self.path:
            case "/pack":
                self._send(200, json.dumps(CONTEXT_PACK).encode())
            case "/flat":
                self._send(200, json.dumps({"results": FLAT}).encode())
            case "/slow":
                time.sleep(1.5)
                self._send(200, b"{}")
            case "/garbage":
                self._send(200, b"<html>oops</html>", "text/html")
            case "/big":
                self._send(200, b"[" + b"1," * 5000 + b"1]")
            case _:
                self._send(int(self.path.strip("/")), b'{"error": "internal details"}')

    def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # the client hanging up on /slow is the point of that test


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _source(url: str, **kw: Any) -> HttpRagSource:
    env = {"ACI_RAG_URL": url, "TOKEN": SECRET, **kw}
    env.setdefault("ACI_RAG_HEADERS", '{"Authorization": "Bearer ${TOKEN}"}')
    return HttpRagSource.from_env(env)


REQUEST = LookupKnowledgeRequest(query="connection pool exhausted")


async def test_posts_query_with_auth_headers_and_returns_decoded_json(server: str) -> None:
    source = _source(f"{server}/pack", ACI_RAG_HEADERS="X-Tenant: ops\nX-Api-Key: ${TOKEN}")
    try:
        answer = await source.fetch(REQUEST)
    finally:
        await source.aclose()
    assert answer == CONTEXT_PACK
    seen = _Handler.seen[-1]
    assert json.loads(seen["body"]) == {"query": "connection pool exhausted"}
    assert seen["headers"]["X-Api-Key"] == SECRET and seen["headers"]["X-Tenant"] == "ops"
    result = project_rag(REQUEST, "call_1", answer, DEFAULT_BOUNDS)
    assert isinstance(result, RagResult)
    assert result.relevance_level == RelevanceLevel.MEDIUM
    assert [e.excerpt for e in result.evidence] == ["A leak on an error path."]


async def test_flat_upstream_shape_projects(server: str) -> None:
    source = _source(f"{server}/flat")
    try:
        answer = await source.fetch(REQUEST)
    finally:
        await source.aclose()
    assert _Handler.seen[-1]["headers"]["Authorization"] == f"Bearer {SECRET}"
    result = project_rag(REQUEST, "call_2", answer, DEFAULT_BOUNDS)
    assert isinstance(result, RagResult)
    assert result.evidence_status == EvidenceStatus.EVIDENCE_FOUND
    assert result.evidence[0].document_id == "d-2"


@pytest.mark.parametrize(
    ("path", "code", "retryable"),
    [
        ("/500", ErrorCode.EXECUTION, False),
        ("/404", ErrorCode.EXECUTION, False),
        ("/503", ErrorCode.UNAVAILABLE, True),
        ("/429", ErrorCode.UNAVAILABLE, True),
        ("/401", ErrorCode.AUTHORIZATION, False),
        ("/garbage", ErrorCode.PROJECTION, False),
        ("/big", ErrorCode.PROJECTION, False),
    ],
)
async def test_failures_raise_safe_source_errors(
    server: str, path: str, code: ErrorCode, retryable: bool
) -> None:
    source = _source(f"{server}{path}", ACI_RAG_MAX_BYTES="4096")
    try:
        with pytest.raises(SourceError) as caught:
            await source.fetch(REQUEST)
    finally:
        await source.aclose()
    _assert_safe(caught.value, server)
    assert caught.value.code == code and caught.value.retryable is retryable


@pytest.mark.serial
async def test_timeout_is_a_timeout_error(server: str) -> None:
    source = _source(f"{server}/slow", ACI_RAG_TIMEOUT_S="0.3")
    started = time.monotonic()
    try:
        with pytest.raises(SourceError) as caught:
            await source.fetch(REQUEST)
    finally:
        await source.aclose()
    assert time.monotonic() - started < 1.4
    assert caught.value.code == ErrorCode.TIMEOUT and caught.value.retryable
    _assert_safe(caught.value, server)


async def test_unreachable_service_is_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/rag"
    source = _source(url)
    try:
        with pytest.raises(SourceError) as caught:
            await source.fetch(REQUEST)
    finally:
        await source.aclose()
    assert caught.value.code == ErrorCode.UNAVAILABLE
    _assert_safe(caught.value, url)


def _assert_safe(error: SourceError, url: str) -> None:
    for secret in (url, "127.0.0.1", url.rsplit(":", 1)[-1].split("/")[0], SECRET, "internal"):
        assert secret not in error.message
    # The stage maps the error to an ERROR result; it never looks like NO_EVIDENCE.
    assert not isinstance(error, ErrorResult)


def test_parse_headers_forms() -> None:
    env = {"TOKEN": "t"}
    assert parse_headers('{"Authorization": "Bearer ${TOKEN}"}', env) == {
        "Authorization": "Bearer t"
    }
    assert parse_headers("A: 1\n\nB-C: x: y ${TOKEN}\n", env) == {"A": "1", "B-C": "x: y t"}
    assert parse_headers("  ", env) == {}
    for bad in ('{"A": 1}', "[1]", "no colon", "Bad Name: v", '{"A": "${MISSING}"}', "{oops"):
        with pytest.raises(ValueError, match="ACI_RAG_HEADERS"):
            parse_headers(bad, env)


def test_from_env_validates_and_keeps_settings() -> None:
    source = HttpRagSource.from_env({"ACI_RAG_URL": "https://rag.internal/v1/search"})
    assert source.settings == RagHttpSettings(url="https://rag.internal/v1/search")
    anyio.run(source.aclose)
    for env in (
        {"ACI_RAG_URL": "ftp://x"},
        {"ACI_RAG_URL": "http://x", "ACI_RAG_TIMEOUT_S": "0"},
        {"ACI_RAG_URL": "http://x", "ACI_RAG_MAX_BYTES": "10"},
    ):
        with pytest.raises(ValueError, match="ACI_RAG_"):
            HttpRagSource.from_env(env)
