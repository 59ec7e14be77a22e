"""The index built through one embeddings endpoint is that endpoint's: another server, even
one that names the same model and dimension, gets its own index, and the URL (which may hold
credentials) is in no index name, stored model id or log line."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from contracts.requests import LookupKnowledgeRequest
from tests.workers.test_embeddings_http import DIM, _Handler
from workers.sources.knowledge.embeddings_http import EmbeddingsHttpSettings, HttpEncoder
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings
from workers.sources.knowledge.store import IndexFile


class _Other(_Handler):
    """Another server: same model name and dimension, other vectors."""

    seen: ClassVar[list[dict[str, Any]]] = []
    mode: ClassVar[str] = "reversed"


def _serve(handler: type[_Handler]) -> tuple[ThreadingHTTPServer, str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"127.0.0.1:{httpd.server_address[1]}"


@pytest.fixture
def two_servers() -> Iterator[tuple[str, str]]:
    _Handler.mode, _Handler.seen, _Other.seen = "ok", [], []
    first, a = _serve(_Handler)
    second, b = _serve(_Other)
    try:
        yield a, b
    finally:
        for httpd in (first, second):
            httpd.shutdown()
            httpd.server_close()


def _encoder(url: str) -> HttpEncoder:
    return HttpEncoder(EmbeddingsHttpSettings(url=url, model="nomic-embed", dim=DIM))


async def _lookup(folder: Path, cache: Path, url: str) -> dict[str, Any]:
    encoder = _encoder(url)
    source = KnowledgeIndexSource(
        KnowledgeSettings(folder=str(folder), cache_dir=str(cache)), encoder
    )
    try:
        return await source.fetch(LookupKnowledgeRequest(query="replica behind source"))
    finally:
        await source.aclose()
        encoder.close()


async def test_another_endpoint_of_the_same_model_name_builds_its_own_index(
    two_servers: tuple[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: the model id was "openai-compatible:<model>:<dim>", so a second server (another
    # provider, another quantisation, a model re-pulled under the same tag) answered from the
    # first one's chunk vectors, compared with its own query vectors.
    a, b = two_servers
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "lag.md").write_text("# Replica lag\n\nreplica behind source seconds\n")
    (folder / "disk.md").write_text("# Disk full\n\nwrites fail no space left\n")
    cache = tmp_path / "cache"
    caplog.set_level(logging.DEBUG)
    await _lookup(folder, cache, f"http://user:s3cr3t-pw@{a}/v1/embeddings?key=k3y-123")
    await _lookup(folder, cache, f"http://{b}/v1/embeddings")
    passages = [s for s in _Other.seen if len(s["body"]["input"]) > 1]
    assert passages, "the second server never embedded the runbooks: the first's index answered"
    models = {IndexFile(p).model_id for p in cache.glob("knowledge-*.sqlite3")}
    assert len(models) == 2
    # Ours; httpx's own request lines are kept out at setup (`logging_setup.quiet_third_party`).
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("aci")]
    said = " ".join([*models, *(p.name for p in cache.iterdir()), *ours])
    for secret in ("s3cr3t-pw", "user", "k3y-123", "127.0.0.1", a, b, "/v1"):
        assert secret not in said, secret


def test_the_endpoint_key_ignores_credentials_query_and_case() -> None:
    ids = {
        _encoder(url).model_id
        for url in (
            "https://Embed.Example:443/v1/embeddings",
            "https://embed.example/v1/embeddings",
            "https://u:pw@embed.example/v1/embeddings",
            "https://embed.example/v1/embeddings?api_key=abc",
        )
    }
    assert len(ids) == 1
    other = _encoder("https://embed.example:8443/v1/embeddings").model_id
    assert other not in ids and other.startswith("openai-compatible:nomic-embed:16:")
