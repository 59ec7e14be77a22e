"""The knowledge index keeps the synonym groups of its analysis (segmented by jieba when it is
built): a process that opens a built index and is asked no Chinese never loads jieba's
dictionary (+83 MiB, and most of a second of CPU at every worker start before)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from workers.sources.knowledge.analysis import synonym_groups
from workers.sources.knowledge.store import IndexFile, build_index

ROOT = Path(__file__).resolve().parents[2]


RUNBOOK = """# Connection pool exhausted

## Symptoms
HikariPool-1 - Connection is not available, request timed out.

## 处理
检查数据库连接池是否耗尽，调大连接池。
"""  # noqa: RUF001

_ASK = """
import asyncio, sys
from contracts.requests import LookupKnowledgeRequest
from workers.sources.knowledge.index import KnowledgeIndexSource, KnowledgeSettings

async def main() -> None:
    settings = KnowledgeSettings(folder=sys.argv[1], cache_dir=sys.argv[2], retrieval="lexical")
    source = KnowledgeIndexSource(settings)
    for query in ("the pool is exhausted", "连接池耗尽"):
        answer = await source.fetch(LookupKnowledgeRequest(query=query))
        print(bool(answer["contextPack"]["hits"]), "jieba" in sys.modules)
    await source.aclose()

asyncio.run(main())
"""


def test_the_index_keeps_its_synonyms_and_english_never_loads_jieba(tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "pool.md").write_text(RUNBOOK, encoding="utf-8")
    cache = tmp_path / "cache"
    ask = [sys.executable, "-c", _ASK, str(folder), str(cache)]
    first = subprocess.run(ask, cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    assert first.stdout.split() == ["True"] * 4  # the build segments with jieba
    (path,) = cache.glob("*.sqlite3")
    index = IndexFile(path)
    try:
        assert index.synonyms == synonym_groups()
    finally:
        index.conn.close()
    again = subprocess.run(ask, cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    assert again.stdout.split() == ["True", "False", "True", "True"]  # jieba only for the Chinese


def test_an_index_without_its_synonyms_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "pool.md").write_text(RUNBOOK, encoding="utf-8")
    target = tmp_path / "i.sqlite3"
    build_index(folder, target)
    conn = sqlite3.connect(target)
    conn.execute("DELETE FROM synonyms")
    conn.commit()
    conn.close()
    with pytest.raises(sqlite3.DatabaseError):
        IndexFile(target)
