"""The OpenAI-compatible `/v1/embeddings` encoder against a real local HTTP server whose wire
shape is the `openai` SDK's own (its request params and response types), end to end through
the knowledge index, and every failure as a safe, typed error."""

from __future__ import annotations

import gzip
import hashlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import openai
import pydantic
import pytest
from openai.types import CreateEmbeddingResponse, Embedding
from openai.types.embedding_create_params import EmbeddingCreateParams

from contracts.requests import LookupKnowledgeRequest
from contracts.status import ErrorCode
from workers.sources import SourceError
from workers.sources.knowledge.embeddings_http import EmbeddingsHttpSettings, HttpEncoder
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings

DIM = 16
SECRET = "sk-test-secret-123"
_PARAMS = pydantic.TypeAdapter(EmbeddingCreateParams)


def _vector(text: str) -> list[float]:
    # Deterministic and topical enough: bag of hashed words.
    out = [0.0] * DIM
    for word in text.lower().split():
        out[int(hashlib.sha256(word.encode()).hexdigest(), 16) % DIM] += 1.0
    return out


class _Handler(BaseHTTPRequestHandler):
    mode: ClassVar[str] = "ok"
    seen: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _PARAMS.validate_python(body)  # the request is what the SDK would send
        type(self).seen.append({"body": body, "auth": self.headers.get("Authorization")})
        texts = body["input"]
        mode = type(self).mode
        if mode.startswith("status-"):
            self._send(int(mode[7:]), b'{"error": {"message": "no"}}')
            return
        if mode == "slow":
            time.sleep(2.0)
        if mode == "steady":  # a server that takes its time for every batch of a build
            time.sleep(0.25 if len(texts) > 1 else 0.0)
        dim = DIM + 1 if mode == "wrong-dim" else DIM
        vector = (lambda t: _vector(t)[::-1]) if mode == "reversed" else _vector  # another model
        items = [
            Embedding(embedding=[*vector(t), 0.5][:dim], index=i, object="embedding")
            for i, t in enumerate(texts)
        ]
        if mode == "missing-one":
            items = items[:-1]
        answer = (
            CreateEmbeddingResponse(
                data=list(reversed(items)),  # order comes from `index`, not position
                model=body["model"],
                object="list",
                usage={"prompt_tokens": len(texts), "total_tokens": len(texts)},
            )
            .model_dump_json()
            .encode()
        )
        if mode == "not-finite":
            answer = answer.replace(b"0.0", b"1e999", 1)
        if mode == "huge":
            answer = answer + b" " * 5000
        headers = {"Content-Encoding": "gzip"} if mode == "gzip" else {}
        self._send(200, gzip.compress(answer) if mode == "gzip" else answer, headers)

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    _Handler.mode, _Handler.seen = "ok", []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _encoder(base: str, **kw: Any) -> HttpEncoder:
    settings = {"url": f"{base}/embeddings", "model": "nomic-embed", "dim": DIM, **kw}
    return HttpEncoder(EmbeddingsHttpSettings(**settings))


def test_the_server_speaks_what_the_openai_sdk_speaks(server: str) -> None:
    client = openai.OpenAI(base_url=server, api_key=SECRET, max_retries=0)
    try:
        answer = client.embeddings.create(model="nomic-embed", input=["disk full", "lag"])
    finally:
        client.close()
    assert [len(e.embedding) for e in answer.data] == [DIM, DIM]
    sdk_body = _Handler.seen[-1]["body"]
    encoder = _encoder(server, api_key=SECRET)
    try:
        vectors = encoder.encode(["disk full", "lag"])
    finally:
        encoder.close()
    ours = _Handler.seen[-1]
    assert set(ours["body"]) <= set(EmbeddingCreateParams.__annotations__)
    assert ours["body"]["model"] == sdk_body["model"] and ours["body"]["input"] == [
        "disk full",
        "lag",
    ]
    assert ours["auth"] == f"Bearer {SECRET}"
    assert vectors.shape == (2, DIM) and vectors.dtype == np.float32
    expected = np.asarray([_vector("disk full"), _vector("lag")], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert np.allclose(vectors, expected)  # in `index` order, re-normalised


def test_large_inputs_go_in_bounded_batches(server: str) -> None:
    encoder = _encoder(server)
    try:
        vectors = encoder.encode([f"text {i}" for i in range(150)])
    finally:
        encoder.close()
    assert vectors.shape == (150, DIM)
    assert [len(s["body"]["input"]) for s in _Handler.seen] == [64, 64, 22]


async def test_the_index_builds_and_answers_through_the_endpoint(
    server: str, tmp_path: Path
) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "disk.md").write_text(
        "# Disk full\n\n## Symptoms\nwrites fail no space left\n", encoding="utf-8"
    )
    (folder / "lag.md").write_text(
        "# Replica lag\n\n## Symptoms\nreplica behind source seconds\n", encoding="utf-8"
    )
    encoder = _encoder(server)
    source = KnowledgeIndexSource(
        KnowledgeSettings(folder=str(folder), cache_dir=str(tmp_path / "cache")), encoder
    )
    try:
        answer = await source.fetch(LookupKnowledgeRequest(query="replica behind source"))
    finally:
        await source.aclose()
        encoder.close()
    assert answer["contextPack"]["hits"][0]["source"] == "lag.md"
    (index_file,) = (tmp_path / "cache").glob("*.sqlite3")
    assert "127.0.0.1" not in index_file.name


@pytest.mark.parametrize(
    ("mode", "code", "retryable"),
    [
        ("status-401", ErrorCode.AUTHORIZATION, False),
        ("status-403", ErrorCode.AUTHORIZATION, False),
        ("status-429", ErrorCode.UNAVAILABLE, True),
        ("status-503", ErrorCode.UNAVAILABLE, True),
        ("status-500", ErrorCode.EXECUTION, False),
        ("wrong-dim", ErrorCode.PROJECTION, False),
        ("missing-one", ErrorCode.PROJECTION, False),
        ("not-finite", ErrorCode.PROJECTION, False),
        ("huge", ErrorCode.PROJECTION, False),
        ("gzip", ErrorCode.PROJECTION, False),
        ("slow", ErrorCode.TIMEOUT, True),
    ],
)
def test_failures_are_safe_typed_errors(
    server: str, mode: str, code: ErrorCode, retryable: bool
) -> None:
    _Handler.mode = mode
    encoder = _encoder(server, api_key=SECRET, timeout_s=0.5, max_bytes=4096)
    try:
        with pytest.raises(SourceError) as caught:
            encoder.encode(["one", "two"])
    finally:
        encoder.close()
    assert caught.value.code == code and caught.value.retryable == retryable
    for secret in ("127.0.0.1", "nomic", SECRET, "/v1", "http"):
        assert secret not in caught.value.message


def test_an_unreachable_endpoint_is_unavailable() -> None:
    encoder = _encoder("http://127.0.0.1:9")
    try:
        with pytest.raises(SourceError) as caught:
            encoder.encode(["x"])
    finally:
        encoder.close()
    assert caught.value.code == ErrorCode.UNAVAILABLE and caught.value.retryable


def test_settings_from_env() -> None:
    env = {
        "ACI_EMBEDDINGS_URL": "http://127.0.0.1:9/v1/embeddings",
        "ACI_EMBEDDINGS_MODEL": "bge-m3",
        "ACI_EMBEDDINGS_DIM": "1024",
        "ACI_EMBEDDINGS_API_KEY": SECRET,
    }
    encoder = HttpEncoder.from_env(env)
    try:
        # The model, its dimension and a digest of the endpoint (never the URL itself).
        assert encoder.model_id.startswith("openai-compatible:bge-m3:1024:")
        assert encoder.dim == 1024
        assert SECRET not in encoder.model_id and "127.0.0.1" not in encoder.model_id
    finally:
        encoder.close()
    source = KnowledgeIndexSource.from_env({**env, "ACI_CACHE_DIR": "/tmp/unused"})
    assert isinstance(source._encoder, HttpEncoder)
    source._encoder.close()
    for bad, match in [
        ({"ACI_EMBEDDINGS_URL": "ftp://x"}, "ACI_EMBEDDINGS_URL"),
        ({"ACI_EMBEDDINGS_MODEL": ""}, "ACI_EMBEDDINGS_MODEL"),
        ({"ACI_EMBEDDINGS_DIM": "0"}, "ACI_EMBEDDINGS_DIM"),
        ({"ACI_EMBEDDINGS_TIMEOUT_S": "0"}, "ACI_EMBEDDINGS_TIMEOUT_S"),
    ]:
        with pytest.raises(ValueError, match=match):
            HttpEncoder.from_env({**env, **bad})
