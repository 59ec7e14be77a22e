"""The embedded knowledge index's operator settings (`ACI_KNOWLEDGE_*`, `ACI_CACHE_DIR`,
`ACI_EMBEDDINGS_*`) and the checks a worker makes of them at start: SQLite with FTS5, a
folder that can be listed. Split from `index` (the source itself) to keep each module short.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import msgspec

from workers.sources.kept import cache_dir_from_env
from workers.sources.knowledge.build_wait import deadline_s
from workers.sources.knowledge.encoder import Encoder
from workers.sources.knowledge.files import DEFAULT_MAX_FILE_BYTES, max_file_bytes_from_env
from workers.sources.knowledge.ranking import Mode
from workers.sources.knowledge.search import MIN_COVERAGE

__all__ = [
    "DEFAULT_KNOWLEDGE_DIR",
    "KnowledgeSettings",
    "check_fts5",
    "listable",
    "no_folder",
    "relative_note",
    "settings_from_env",
]

DEFAULT_KNOWLEDGE_DIR: Final = Path(__file__).with_name("runbooks")
_MODES: Final = ("fused", "dense", "lexical")


class KnowledgeSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Operator settings of the embedded knowledge index."""

    folder: str
    cache_dir: str
    max_hits: int = 5
    min_coverage: float = MIN_COVERAGE
    retrieval: Mode = "fused"
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES  # larger runbooks are skipped and named
    # How long a lookup waits for a first build (no index to answer from) before it answers
    # UNAVAILABLE "still being built"; from_env: within the call's deadline. None: no bound.
    build_wait_s: float | None = None


def check_fts5() -> None:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
    except sqlite3.OperationalError as exc:
        raise RuntimeError(
            "this Python's sqlite3 lacks FTS5; the knowledge index needs it"
        ) from exc
    finally:
        conn.close()


def settings_from_env(env: Mapping[str, str]) -> tuple[KnowledgeSettings, Encoder | None]:
    """Settings from ACI_KNOWLEDGE_DIR, ACI_CACHE_DIR, ACI_KNOWLEDGE_MAX_HITS and
    ACI_KNOWLEDGE_RETRIEVAL; the encoder from ACI_EMBEDDINGS_* (None: the bundled one)."""
    check_fts5()
    folder = env.get("ACI_KNOWLEDGE_DIR", "").strip() or str(DEFAULT_KNOWLEDGE_DIR)
    cache = str(cache_dir_from_env(env))
    max_hits = int(env.get("ACI_KNOWLEDGE_MAX_HITS", "").strip() or 5)
    if not 1 <= max_hits <= 50:
        raise ValueError("ACI_KNOWLEDGE_MAX_HITS must be between 1 and 50")
    max_file_bytes = max_file_bytes_from_env(env)
    retrieval = env.get("ACI_KNOWLEDGE_RETRIEVAL", "").strip() or "fused"
    if retrieval not in _MODES:
        raise ValueError("ACI_KNOWLEDGE_RETRIEVAL must be fused, dense or lexical")
    settings = KnowledgeSettings(
        folder=folder,
        cache_dir=cache,
        max_hits=max_hits,
        retrieval=retrieval,  # type: ignore[arg-type]
        max_file_bytes=max_file_bytes,
        build_wait_s=0.8 * deadline_s(env),
    )
    encoder: Encoder | None = None
    if env.get("ACI_EMBEDDINGS_URL", "").strip() and retrieval != "lexical":
        from workers.sources.knowledge.embeddings_http import HttpEncoder

        encoder = HttpEncoder.from_env(env)
    return settings, encoder


def listable(folder: Path) -> bool:
    """Whether the folder exists and can be listed: `os.walk` skips one it cannot list without
    a word, and the build's open of it would then look like a cache that cannot be written."""
    try:
        with os.scandir(folder):
            return True
    except OSError:
        return False


def relative_note(folder: str) -> str:
    """`; a relative path is read from the working folder /srv/app` for a relative folder
    (a host, an MCP client, starts its server in a folder of its own choosing), else ""."""
    if os.path.isabs(folder):
        return ""
    try:
        here = os.getcwd()
    except OSError:  # the working folder was removed
        here = "(removed)"
    return f"; a relative path is read from the working folder {here}"


def no_folder(folder: str) -> str:
    """The line a worker logs at start for a folder it cannot list; a relative one is named
    as given, with the working folder it was read from."""
    where = relative_note(folder)
    given = f" ({folder!r}{where})" if where else ""
    return f"ACI_KNOWLEDGE_DIR does not name a readable folder{given}: lookups are UNAVAILABLE"
