"""A first index build longer than a call's deadline is said as what it is: lookups meanwhile
answer ERROR/UNAVAILABLE (retryable) "still being built", with its progress; never a TIMEOUT
that reads as a slow query, never NO_EVIDENCE; `call --local` waits for it and says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import anyio
import pytest

from contracts.requests import LookupKnowledgeRequest
from contracts.status import ErrorCode
from tests.workers.test_embeddings_http import DIM, _Handler
from workers.sources.base import SourceError
from workers.sources.knowledge.embeddings_http import EmbeddingsHttpSettings, HttpEncoder
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def steady_server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    _Handler.mode, _Handler.seen = "steady", []
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1/embeddings"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _folder(tmp_path: Path, sections: int = 600) -> Path:
    # 600 sections: ten batches of 64 at 0.25 s each, a build of ~2.5 s.
    folder = tmp_path / "kb"
    folder.mkdir()
    for n in range(sections // 20):
        body = "\n\n".join(f"## Step {k}\n\nturn valve {n}-{k} then check gauge" for k in range(20))
        (folder / f"pump-{n}.md").write_text(f"# Pump {n}\n\n{body}\n")
    (folder / "disk.md").write_text("# Disk full\n\n## Fix\n\nNo space left on device: prune\n")
    return folder


async def test_a_lookup_during_a_long_first_build_is_unavailable_and_says_so(
    steady_server: str, tmp_path: Path
) -> None:
    # Before: the lookup waited for the build until the call's deadline, which cancelled it:
    # ERROR/TIMEOUT "the query did not finish within its time limit", as if the search were slow.
    encoder = HttpEncoder(EmbeddingsHttpSettings(url=steady_server, model="m", dim=DIM))
    settings = KnowledgeSettings(
        folder=str(_folder(tmp_path)), cache_dir=str(tmp_path / "c"), build_wait_s=0.3
    )
    source = KnowledgeIndexSource(settings, encoder)
    try:
        with pytest.raises(SourceError) as caught:
            await source.fetch(LookupKnowledgeRequest(query="no space left on device"))
        assert caught.value.code is ErrorCode.UNAVAILABLE and caught.value.retryable
        assert "still being built" in caught.value.message
        # The sections are counted once the folder is read, which on a loaded host can come
        # after the lookup's 0.3 s (until then: (0, 0), "before its embedding starts").
        progress = source.building()
        with anyio.fail_after(10):
            while progress is not None and progress[1] == 0:
                await anyio.sleep(0.02)
                progress = source.building()
        assert progress is not None and progress[1] == 601 and 0 <= progress[0] < 601
        await source.ready()
        assert source.building() is None
        answer = await source.fetch(LookupKnowledgeRequest(query="no space left on device"))
    finally:
        await source.aclose()
        encoder.close()
    assert answer["contextPack"]["hits"][0]["source"] == "disk.md"


def test_the_wait_for_a_first_build_stays_inside_the_call_deadline() -> None:
    def wait(deadline: str | None) -> float | None:
        env = {"ACI_KNOWLEDGE_RETRIEVAL": "lexical", "ACI_CACHE_DIR": "/tmp/unused"}
        if deadline is not None:
            env["ACI_DEADLINE_S"] = deadline
        return KnowledgeIndexSource.from_env(env).settings.build_wait_s

    assert wait(None) == pytest.approx(8.0)  # the default deadline, 10 s
    assert wait("1") == pytest.approx(0.8)
    assert wait("nonsense") == pytest.approx(8.0)  # the pipeline's settings refuse it


def test_call_local_waits_for_a_long_first_build_and_says_so(
    steady_server: str, tmp_path: Path
) -> None:
    # Before: the warm-up gave up at its bound, the call's deadline cut the wait for the rest of
    # the build, and the engineer's first question answered ERROR/TIMEOUT.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    env |= {
        "ACI_KNOWLEDGE_DIR": str(_folder(tmp_path)),
        "ACI_CACHE_DIR": str(tmp_path / "cache"),
        "ACI_EMBEDDINGS_URL": steady_server,
        "ACI_EMBEDDINGS_MODEL": "m",
        "ACI_EMBEDDINGS_DIM": str(DIM),
        "ACI_WARMUP_TIMEOUT_S": "0.3",
        "ACI_DEADLINE_S": "0.5",
    }
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "call", "lookup_knowledge", "--local", "--id", "k1",
         "--args", '{"query": "no space left on device"}'],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    out = json.loads(done.stdout)
    assert out["model"]["evidence_status"] == "EVIDENCE_FOUND", out["model"]
    assert "the runbook index is being built" in done.stderr
    assert "127.0.0.1" not in done.stderr


async def test_a_warm_up_that_outlasts_its_bound_says_the_index_is_being_built(
    steady_server: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from workers.sources.registry import warm_up

    encoder = HttpEncoder(EmbeddingsHttpSettings(url=steady_server, model="m", dim=DIM))
    settings = KnowledgeSettings(
        folder=str(_folder(tmp_path)), cache_dir=str(tmp_path / "c"), build_wait_s=0.3
    )
    source = KnowledgeIndexSource(settings, encoder)
    try:
        await warm_up({"lookup_knowledge": source}, timeout_s=0.3)
        await source.ready()
    finally:
        await source.aclose()
        encoder.close()
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("lookup_knowledge index is still being built (" in m for m in said), said
    assert any(m.startswith("the knowledge index is built (") for m in said), said
    assert not any("127.0.0.1" in m for m in said)


async def test_the_warm_up_waits_for_the_build_up_to_its_own_bound(
    steady_server: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A lookup waits a first build at most build_wait_s; the warm-up, up to its own bound
    # (30 s): before, its lookup gave up with the calls' wait and it logged "warm-up of
    # lookup_knowledge failed ... its calls may fail the same way" for a build under way.
    from workers.sources.registry import warm_up

    encoder = HttpEncoder(EmbeddingsHttpSettings(url=steady_server, model="m", dim=DIM))
    settings = KnowledgeSettings(
        folder=str(_folder(tmp_path)), cache_dir=str(tmp_path / "c"), build_wait_s=0.3
    )
    source = KnowledgeIndexSource(settings, encoder)
    try:
        await warm_up({"lookup_knowledge": source}, timeout_s=30.0)
        assert source.building() is None
    finally:
        await source.aclose()
        encoder.close()
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert not any("failed" in m or "still being built" in m for m in said), said
