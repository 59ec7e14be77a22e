"""The three relevance tiers on a small folder, with the bundled encoder: a confident answer
only when the top runbook answers, LOW for a half-recognised paraphrase, NO_EVIDENCE for an
off-topic question, and never a hit below the answer's own bar (no padding)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.requests import LookupKnowledgeRequest
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings
from workers.sources.knowledge.ranking import hit_level

RUNBOOKS = {
    "disk-full.md": "# Disk full\n\n## Symptoms\nWrites fail with `No space left on device`; df"
    " shows the volume at 100%.\n\n## Mitigation\nRotate and compress logs, delete old core"
    " dumps, grow the volume.\n",
    "replica-lag.md": "# MySQL replica lag\n\n## Symptoms\nSeconds_Behind_Source keeps rising on"
    " the replica; reads return stale rows.\n\n## Mitigation\nFind the long transaction on the"
    " source, enable parallel replication.\n",
    "tls-expired.md": "# TLS certificate expired\n\n## Symptoms\nClients fail the handshake:"
    " `x509: certificate has expired or is not yet valid`.\n\n## Mitigation\nRenew the"
    " certificate and reload the proxy.\n",
    "kafka-lag.md": "# Kafka consumer lag\n\n## Symptoms\nConsumer group lag grows on every"
    " partition; events arrive late downstream.\n\n## Mitigation\nAdd consumers up to the"
    " partition count, look for a slow handler.\n",
    "dns.md": "# DNS resolution failures\n\n## Symptoms\n`UnknownHostException` and `NXDOMAIN`"
    " for service names inside the cluster.\n\n## Mitigation\nCheck CoreDNS pods and the"
    " resolv.conf search path.\n",
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tiers")
    for name, text in RUNBOOKS.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


async def _ask(folder: Path, cache: Path, query: str) -> dict[str, object]:
    source = KnowledgeIndexSource(KnowledgeSettings(folder=str(folder), cache_dir=str(cache)))
    try:
        answer = await source.fetch(LookupKnowledgeRequest(query=query))
    finally:
        await source.aclose()
    pack: dict[str, object] = answer["contextPack"]
    return pack


LEVELS = {None: 0, "low": 1, "medium": 2, "high": 3}


@pytest.mark.parametrize(
    ("query", "levels", "top"),
    [
        ("x509: certificate has expired or is not yet valid", {"high"}, "tls-expired.md"),
        ("No space left on device, df shows 100%", {"high"}, "disk-full.md"),
        ("the replica serves old data and falls further behind", {"low"}, "replica-lag.md"),
        ("how to bake sourdough bread at home", {None}, None),
        ("what is the capital of Australia", {None}, None),
    ],
)
async def test_three_tiers_and_no_padding(
    folder: Path, tmp_path: Path, query: str, levels: set[str | None], top: str | None
) -> None:
    pack = await _ask(folder, tmp_path / "c", query)
    level = pack.get("relevanceLevel")
    hits = pack["hits"]
    assert isinstance(hits, list)
    assert level in levels, (query, level)
    if top is None:
        assert hits == []  # NO_EVIDENCE, not weak padding
        return
    assert hits[0]["source"] == top
    for hit in hits:  # every hit reaches the answer's level on its own
        scores = hit["scores"]
        assert hit_level(scores["dense"], scores["coverage"]) >= LEVELS[level]
    assert len(hits) < len(RUNBOOKS)  # not padded to max_hits with the rest of the folder


async def test_two_shared_words_are_low_evidence_at_most_one_is_none(
    folder: Path, tmp_path: Path
) -> None:
    # The lexical fallback: a chunk below both bars (cosine < low, coverage < the lexical
    # bar) that shares two of the query's concepts ("handler", "partition") is LOW evidence,
    # never more; one shared concept is nothing.
    two = "my cat sleeps on the handler of the partition during winter holidays in the mountains"
    pack = await _ask(folder, tmp_path / "c", two)
    hits = pack["hits"]
    assert isinstance(hits, list)
    assert pack.get("relevanceLevel") == "low"
    assert [h["source"] for h in hits] == ["kafka-lag.md"]
    scores, meta = hits[0]["scores"], hits[0]["metadata"]
    assert hit_level(scores["dense"], scores["coverage"]) == 0  # below both bars on its own
    assert meta["matchedConcepts"] >= 2 and 0.10 <= scores["coverage"]
    one = two.replace("partition", "sofa")
    pack = await _ask(folder, tmp_path / "c", one)
    assert pack.get("relevanceLevel") is None and pack["hits"] == []
