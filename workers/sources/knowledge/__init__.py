"""The `lookup_knowledge` sources: the embedded runbook index (`index`, the default, over the
shipped `runbooks/`: BM25 fused with a bundled multilingual sentence encoder, or an
OpenAI-compatible embeddings endpoint, `embeddings_http`) and the upstream RAG adapter
(`rag_http`, with its bounded body decoder `content_encoding`). `knowledge_source_from_env`
picks one (docs/knowledge.md).
"""

from __future__ import annotations

from typing import Any

from workers.sources.knowledge.index import (
    DEFAULT_KNOWLEDGE_DIR,
    KnowledgeIndexSource,
    KnowledgeSettings,
    knowledge_source_from_env,
)

__all__ = [
    "DEFAULT_KNOWLEDGE_DIR",
    "HttpRagSource",
    "KnowledgeIndexSource",
    "KnowledgeSettings",
    "RagHttpSettings",
    "knowledge_source_from_env",
]


def __getattr__(name: str) -> Any:
    # The RAG adapter imports httpx (~0.1 s): only a worker with ACI_RAG_URL loads it.
    if name in ("HttpRagSource", "RagHttpSettings"):
        from workers.sources.knowledge import rag_http

        return getattr(rag_http, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
