"""A real RAG service whose answers carry tokens and server paths in `metadata.url`/`source`:
the agent's observation cites the documents without them (issue 23)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import msgspec
import pytest

from contracts import DEFAULT_BOUNDS, RagResult, build_views, project_rag
from contracts.requests import LookupKnowledgeRequest
from workers.sources.knowledge.rag_http import HttpRagSource

TOKEN = "tok-3f9a2c71e0"
ANSWER = {
    "hits": [
        {
            "content": "Raise the pool size.",
            "metadata": {"url": f"https://kb.example.com/p?token={TOKEN}#s2"},
        },
        {"content": "Check leaks.", "source": "/var/lib/rag-server/corpus/runbooks/pool-leaks.md"},
        {"content": "Restart last.", "uri": f"https://ops:{TOKEN}@kb.example.com/restart"},
    ]
}


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = json.dumps(ANSWER).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/rag"
    finally:
        httpd.shutdown()
        httpd.server_close()


async def test_sources_lose_tokens_and_server_paths(server: str) -> None:
    source = HttpRagSource.from_env({"ACI_RAG_URL": server})
    request = LookupKnowledgeRequest(query="pool")
    try:
        upstream = await source.fetch(request)
    finally:
        await source.aclose()
    result = project_rag(request, "call_1", upstream, DEFAULT_BOUNDS)
    assert isinstance(result, RagResult)
    assert [e.source for e in result.evidence] == [
        "https://kb.example.com/p",
        "pool-leaks.md",
        "https://kb.example.com/restart",
    ]
    observation, _control = build_views(
        result, DEFAULT_BOUNDS, tool="lookup_knowledge", session_id="s"
    )
    text = msgspec.json.encode(observation).decode()
    assert TOKEN not in text and "/var/lib" not in text and "rag-server" not in text
