"""The knowledge index store: one SQLite file per (folder, fingerprint), built atomically.

`build_index` writes every chunk of the folder with its pre-segmented terms into an FTS5 table
of a temp file in the target's folder, then renames it into place, so concurrent workers never
open a half-built index. `IndexFile` opens one read-only (immutable) with its term document
frequencies. `ANALYSIS_HASH` covers the bytes of every module that decides what is stored (the
analysis, the file walk, this store): a change to any of them names a new index file.
"""

from __future__ import annotations

import hashlib
import math
import os
import sqlite3
import uuid
from pathlib import Path
from typing import Final

from workers.sources.knowledge import analysis, files
from workers.sources.knowledge.analysis import split_markdown, terms_of
from workers.sources.knowledge.files import DIR_FLAGS, read_inside, runbook_files

__all__ = ["ANALYSIS_HASH", "INDEX_VERSION", "IndexFile", "build_index"]

INDEX_VERSION: Final = 1
ANALYSIS_HASH: Final = hashlib.sha256(
    b"".join(Path(m.__file__ or "").read_bytes() for m in (analysis, files))
    + Path(__file__).read_bytes()
).hexdigest()[:16]

_SCHEMA: Final = """
CREATE VIRTUAL TABLE chunks USING fts5(
    crumb_terms, body_terms, document_id UNINDEXED, source UNINDEXED, title UNINDEXED,
    breadcrumb UNINDEXED, content UNINDEXED, ordinal UNINDEXED,
    tokenize = 'unicode61 remove_diacritics 0'
);
CREATE VIRTUAL TABLE vocab USING fts5vocab(chunks, 'row');
"""


def _rows(text: str, source: str) -> list[tuple[str, str, str, str, str, str, str, int]]:
    rows = []
    for chunk in split_markdown(text, source):
        body = chunk.content.split("\n", 1)[-1] if chunk.content.startswith("#") else chunk.content
        rows.append(
            (
                " ".join(terms_of(chunk.breadcrumb, bigrams=True)),
                " ".join(terms_of(body, bigrams=True)),
                chunk.document_id,
                chunk.source,
                chunk.title,
                chunk.breadcrumb,
                chunk.content,
                chunk.ordinal,
            )
        )
    return rows


def build_index(folder: Path, target: Path) -> int:
    """Index every Markdown file under `folder` into `target` atomically; return the chunk count."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    rows: list[tuple[str, str, str, str, str, str, str, int]] = []
    root = folder.resolve()
    root_fd = os.open(root, DIR_FLAGS)
    try:
        for source, path in runbook_files(root):
            text = read_inside(root_fd, path.relative_to(root))
            if text is not None:
                rows.extend(_rows(text, source))
    finally:
        os.close(root_fd)
    try:
        conn = sqlite3.connect(tmp)
        try:
            conn.executescript(_SCHEMA)
            conn.executemany("INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
            conn.execute("INSERT INTO chunks(chunks) VALUES ('optimize')")
            conn.commit()
        finally:
            conn.close()
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return len(rows)


class IndexFile:
    """One open, read-only index file with its term document frequencies."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(
            f"{path.as_uri()}?mode=ro&immutable=1", uri=True, check_same_thread=False
        )
        self.df = dict(self.conn.execute("SELECT term, doc FROM vocab").fetchall())
        (self.n,) = self.conn.execute("SELECT count(*) FROM chunks").fetchone()

    def idf(self, df: int) -> float:
        """BM25 inverse document frequency of a term found in `df` chunks."""
        return math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))
