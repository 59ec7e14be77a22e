"""The knowledge index store: one SQLite file per (folder, fingerprint), built atomically.

`build_index` writes every chunk of the folder with its pre-segmented terms into an FTS5 table
(and, with an encoder, every chunk's unit vector, as one float32 matrix) of a temp file in the
target's folder, then renames it into place, so concurrent workers never open a half-built
index. A chunk whose embedded text is unchanged takes its vector from the `previous` index of
the same model (the one this build replaces), so an edit re-embeds only what it changed, in a
fresh process too. `IndexFile` opens one read-only (immutable) with its term document
frequencies, its vectors and its synonym groups (segmented by jieba at build time: a process
that opens a built index and is asked no Chinese never loads jieba's dictionary, +83 MiB and
most of a second of CPU). `ANALYSIS_HASH` covers the bytes of every module that decides what
is stored (the analysis, the encoder's chunk text, the file walk, this store; the source adds
the model id).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import sqlite3
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

from workers.sources.knowledge import (
    analysis,
    decoding,
    encoder,
    files,
    markdown,
    restructured,
    site_markup,
)
from workers.sources.knowledge.analysis import split_document, synonym_groups, terms_of
from workers.sources.knowledge.encoder import Encoder, chunk_text
from workers.sources.knowledge.files import (
    DEFAULT_MAX_FILE_BYTES,
    DIR_FLAGS,
    RUNBOOK_SUFFIXES,
    NotIndexed,
    NotText,
    TooLarge,
    Unreadable,
    other_kinds,
    read_inside,
    runbook_files,
)
from workers.sources.knowledge.names import runbook_names

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["ANALYSIS_HASH", "INDEX_VERSION", "IndexFile", "build_index", "models_of"]

log = logging.getLogger("aci.knowledge")

INDEX_VERSION: Final = 4  # 4: a section's `{#id}` in `anchor`, not in its breadcrumb
ANALYSIS_HASH: Final = hashlib.sha256(
    b"".join(
        Path(m.__file__ or "").read_bytes()
        for m in (analysis, decoding, encoder, files, markdown, restructured, site_markup)
    )
    + Path(__file__).read_bytes()
).hexdigest()[:16]

_SCHEMA: Final = """
CREATE VIRTUAL TABLE chunks USING fts5(
    crumb_terms, body_terms, document_id UNINDEXED, source UNINDEXED, title UNINDEXED,
    breadcrumb UNINDEXED, content UNINDEXED, ordinal UNINDEXED, meta UNINDEXED, anchor UNINDEXED,
    tokenize = 'unicode61 remove_diacritics 0'
);
CREATE VIRTUAL TABLE vocab USING fts5vocab(chunks, 'row');
CREATE TABLE vectors (model TEXT NOT NULL, dim INTEGER NOT NULL, data BLOB NOT NULL, digests BLOB);
CREATE TABLE skipped (source TEXT NOT NULL, reason TEXT NOT NULL);
CREATE TABLE aliases (name TEXT NOT NULL, source TEXT NOT NULL);
CREATE TABLE synonyms (data BLOB NOT NULL);
"""
_Row = tuple[str, str, str, str, str, str, str, int, str, str]
Progress = Callable[[int, int], None]
# Texts embedded between two progress reports: ~1 s of the bundled model's time.
_STEP: Final = 256
_SYNONYMS_DECODER: Final = msgspec.msgpack.Decoder(dict[str, list[str]])


def _body(content: str) -> str:
    return content.split("\n", 1)[-1] if content.startswith("#") else content


def _rows(text: str, source: str) -> list[_Row]:
    rows = []
    for chunk in split_document(text, source):
        body = _body(chunk.content)
        rows.append(
            (
                # The front matter's description and tags count as heading words.
                " ".join(terms_of(f"{chunk.breadcrumb}\n{chunk.meta}", bigrams=True)),
                " ".join(terms_of(body, bigrams=True)),
                chunk.document_id,
                chunk.source,
                chunk.title,
                chunk.breadcrumb,
                chunk.content,
                chunk.ordinal,
                chunk.meta,
                chunk.anchor,
            )
        )
    return rows


_Pairs = list[tuple[str, str]]


def _read_folder(folder: Path, max_file_bytes: int) -> tuple[list[_Row], _Pairs, _Pairs]:
    """The rows of every runbook, the sources skipped with why: larger than the cap
    (`size`), unreadable (`unreadable`: permission denied), no text (`binary`), refused by
    the walk (`refused`); each logged; and the symlinks' (name, source)."""
    rows: list[_Row] = []
    skipped: list[tuple[str, str]] = []
    root = folder.resolve()
    root_fd = os.open(root, DIR_FLAGS)
    others: Counter[str] = Counter()
    refused: list[tuple[str, str]] = []
    aliases: list[tuple[str, str]] = []
    try:
        for source, path in runbook_files(root, others, refused, aliases):
            try:
                text = read_inside(root_fd, path.relative_to(root), max_file_bytes)
            except NotIndexed as why:
                skipped.append((source, _SKIP_KINDS.get(type(why), "unreadable")))
                log.warning(
                    "knowledge runbook %s not indexed: %s", source, _said(why, max_file_bytes)
                )
                continue
            if text is not None:
                rows.extend(_rows(text, source))
    finally:
        os.close(root_fd)
    for name, reason in refused:  # a folder it may not list, a link out of it: never silent
        skipped.append((name, "refused"))
        log.warning("knowledge: %s not indexed: %s", name, reason)
    if others:  # an export of another kind (AsciiDoc, HTML, PDF) is not silently absent
        log.warning(
            "knowledge: %d files in the folder are not read (runbooks are %s): %s",
            others.total(), ", ".join(RUNBOOK_SUFFIXES), other_kinds(others),
        )  # fmt: skip
    return rows, skipped, aliases


_SKIP_KINDS: Final[dict[type[NotIndexed], str]] = {
    TooLarge: "size", Unreadable: "unreadable", NotText: "binary",
}  # fmt: skip


def _said(why: NotIndexed, max_file_bytes: int) -> str:
    if isinstance(why, TooLarge):
        return f"{why.size} bytes, over ACI_KNOWLEDGE_MAX_FILE_BYTES ({max_file_bytes})"
    return why.reason


def build_index(
    folder: Path,
    target: Path,
    encoder: Encoder | None = None,
    previous: Path | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    *,
    same_code: bool = True,
    progress: Progress | None = None,
) -> int:
    """Index every runbook under `folder` into `target` atomically; return the chunk count.

    With an `encoder`, each chunk's vector is computed once and stored with the index, with
    the digest of the text it embeds: taken from the `previous` index file when that holds the
    same text embedded by the same model (by its stored digests; by its rows' text when it
    has none and `same_code` built it), else computed here. Runbooks over `max_file_bytes`
    are skipped, logged and listed in the index (`IndexFile.skipped`). `progress`, given, is
    told how far the embedding is: (texts embedded, texts to embed), before each step."""
    started = time.perf_counter()
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    rows, skipped, aliases = _read_folder(folder, max_file_bytes)
    vectors = None
    reused = 0
    if encoder is not None:
        texts = [chunk_text(r[5], _body(r[6]), r[8]) for r in rows]
        vectors, reused = _vectors(encoder, texts, previous, same_code, progress)
        _check_vectors(vectors, len(rows), encoder.dim)
        digests = b"".join(_digest(t) for t in texts)
    try:
        conn = sqlite3.connect(tmp)
        try:
            conn.executescript(_SCHEMA)
            # rowid i + 1 is row i of the vector matrix.
            conn.executemany(
                "INSERT INTO chunks(rowid, crumb_terms, body_terms, document_id, source, title,"
                " breadcrumb, content, ordinal, meta, anchor)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(i, *row) for i, row in enumerate(rows, start=1)],
            )
            if encoder is not None and vectors is not None:
                conn.execute(
                    "INSERT INTO vectors VALUES (?, ?, ?, ?)",
                    (encoder.model_id, encoder.dim, vectors.astype("<f4").tobytes(), digests),
                )
            conn.executemany("INSERT INTO skipped VALUES (?, ?)", skipped)
            conn.executemany("INSERT INTO aliases VALUES (?, ?)", aliases)
            groups = {term: sorted(members) for term, members in synonym_groups().items()}
            conn.execute("INSERT INTO synonyms VALUES (?)", (msgspec.msgpack.encode(groups),))
            conn.execute("INSERT INTO chunks(chunks) VALUES ('optimize')")
            conn.commit()
        finally:
            conn.close()
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    log.info(
        "knowledge index built: %d chunks (%d embedded, %d vectors reused) in %.1f s",
        len(rows), len(rows) - reused if encoder is not None else 0, reused,
        time.perf_counter() - started,
    )  # fmt: skip
    return len(rows)


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def _vectors(
    encoder: Encoder,
    texts: list[str],
    previous: Path | None,
    same_code: bool,
    progress: Progress | None = None,
) -> tuple[npt.NDArray[np.float32], int]:
    """One vector per text, and how many came from `previous` (the rest are encoded, `_STEP`
    at a time, each step said to `progress` as (texts embedded, texts to embed))."""
    import numpy as np

    known = _known_vectors(previous, encoder, same_code)
    if not texts:
        return encoder.encode(texts), 0
    digests = [_digest(t) for t in texts]
    reused = sum(1 for d in digests if d in known)
    missing = list(dict.fromkeys(t for t, d in zip(texts, digests, strict=True) if d not in known))
    for start in range(0, len(missing), _STEP):
        if progress is not None:
            progress(start, len(missing))
        step = missing[start : start + _STEP]
        fresh = encoder.encode(step)
        _check_vectors(fresh, len(step), encoder.dim)
        known.update(zip((_digest(t) for t in step), fresh, strict=True))
    return np.stack([known[d] for d in digests]).astype(np.float32, copy=False), reused


def _known_vectors(
    previous: Path | None, encoder: Encoder, same_code: bool
) -> dict[bytes, npt.NDArray[np.float32]]:
    """The vectors of `previous` by the digest of the text they embed (stored with them; for
    an index without digests, computed from its rows when `same_code` built it); empty when
    there is no such index, it is unreadable (e.g. removed meanwhile by a worker that built a
    newer one), or another model made it."""
    if previous is None:
        return {}
    try:
        index = IndexFile(previous)
    except (sqlite3.Error, OSError, ValueError):
        return {}
    try:
        if index.vectors is None or index.model_id != encoder.model_id:
            return {}
        if index.vectors.shape[1] != encoder.dim or not _unit_rows(index.vectors):
            return {}  # another dimension, or damage SQLite did not see: embed afresh
        stored = _stored_digests(index)
        if stored is not None:
            return {d: index.vectors[i].copy() for i, d in enumerate(stored)}
        if not same_code:  # its rows' text may not be the text another version embedded
            return {}
        rows = index.conn.execute("SELECT rowid, breadcrumb, content, meta FROM chunks").fetchall()
        return {
            _digest(chunk_text(crumb, _body(content), meta)): index.vectors[rowid - 1].copy()
            for rowid, crumb, content, meta in rows
            if 0 < rowid <= len(index.vectors)
        }
    except (sqlite3.Error, ValueError, TypeError):
        return {}
    finally:
        index.conn.close()


def _stored_digests(index: IndexFile) -> list[bytes] | None:
    """The digest of each vector's text, as its build stored them (None: an index without)."""
    try:
        (blob,) = index.conn.execute("SELECT digests FROM vectors").fetchone()
    except sqlite3.OperationalError:  # built before digests were stored
        return None
    n = 0 if index.vectors is None else len(index.vectors)
    if not isinstance(blob, bytes) or len(blob) != 32 * n:
        return None
    return [blob[i : i + 32] for i in range(0, len(blob), 32)]


def models_of(paths: list[Path]) -> dict[Path, str]:
    """The model that embedded each index file ("" without vectors); unreadable ones left out."""
    models: dict[Path, str] = {}
    for path in paths:
        try:
            conn = sqlite3.connect(f"{path.as_uri()}?mode=ro&immutable=1", uri=True)
        except sqlite3.Error:
            continue
        try:
            row = conn.execute("SELECT model FROM vectors").fetchone()
            models[path] = row[0] if row else ""
        except sqlite3.Error:
            pass
        finally:
            conn.close()
    return models


def _unit_rows(vectors: npt.NDArray[np.float32]) -> bool:
    """Whether every row is finite and of unit length (what `encoder.normalised` writes)."""
    import numpy as np

    if not np.isfinite(vectors).all():
        return False
    norms = np.linalg.norm(vectors, axis=1)
    return bool(np.all((np.abs(norms - 1.0) < 1e-3) | (norms < 1e-6)))  # a zero row stays zero


def _check_vectors(vectors: npt.NDArray[np.float32], n: int, dim: int) -> None:
    import numpy as np

    if vectors.shape != (n, dim):
        raise ValueError("the encoder returned vectors of the wrong shape")
    if not np.isfinite(vectors).all():  # NaN would pass every relevance floor
        raise ValueError("the encoder returned vectors that are not finite")


class IndexFile:
    """One open, read-only index file with its term document frequencies, the runbooks its
    build skipped (`skipped`: over the size cap, unreadable, no text), the synonym groups of
    its analysis (`synonyms`), the runbooks' alert names (`names`, `names.runbook_names`) and
    (when built with an encoder) its chunk vectors, row i for rowid i + 1."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(
            f"{path.as_uri()}?mode=ro&immutable=1", uri=True, check_same_thread=False
        )
        self.df = dict(self.conn.execute("SELECT term, doc FROM vocab").fetchall())
        (self.n,) = self.conn.execute("SELECT count(*) FROM chunks").fetchone()
        self.skipped = [r[0] for r in self.conn.execute("SELECT source FROM skipped ORDER BY 1")]
        sources = self.conn.execute("SELECT source FROM chunks GROUP BY 1 ORDER BY min(rowid)")
        served = [source for (source,) in sources]
        known = set(served)
        try:
            aliases = self.conn.execute("SELECT name, source FROM aliases").fetchall()
        except sqlite3.OperationalError:  # built before aliases were kept: it lends vectors
            aliases = []
        self.names = runbook_names(served, [(n, s) for n, s in aliases if s in known])
        row = self.conn.execute("SELECT data FROM synonyms").fetchone()
        if row is None:
            raise sqlite3.DatabaseError("an index without its synonym groups")
        self.synonyms = {t: frozenset(m) for t, m in _SYNONYMS_DECODER.decode(row[0]).items()}
        self.model_id = ""
        self.vectors: npt.NDArray[np.float32] | None = None
        row = self.conn.execute("SELECT model, dim, data FROM vectors").fetchone()
        if row is not None:
            import numpy as np

            self.model_id = row[0]
            self.vectors = np.frombuffer(row[2], dtype="<f4").reshape(self.n, row[1])

    def idf(self, df: int) -> float:
        """BM25 inverse document frequency of a term found in `df` chunks."""
        return math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))
