"""The embedded `lookup_knowledge` source: Markdown runbooks in a local index.

The roles live in sibling modules: `analysis` (terms, chunks), `files` (the confined file
walk), `encoder` (sentence vectors, offline by default), `store` (the index file with its
vectors, built atomically), `search` (BM25 with a coverage filter), `ranking` (dense and fused
ranking, the calibrated relevance level). This module is the source: settings, the shared
build thread, and the answer's shape. A folder without a runbook, or no folder at all, is an
error (UNAVAILABLE, logged), never an empty index that answers NO_EVIDENCE.

The index file lives in the cache folder, named after the folder and a fingerprint of its files
(paths, sizes, mtimes), of the analysis code and of the model id: it is built on first use,
rebuilt only when files or the model change, and written to a temp file then renamed, so
concurrent workers never open a half-built index. Queries take about a millisecond but still
run in a worker thread. The (jieba- and model-loading) build runs in one shared thread of its
own, which a call waits for only up to its deadline.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio.to_thread
import msgspec

from contracts.requests import LookupKnowledgeRequest
from contracts.status import ErrorCode
from workers.sources.base import SourceError
from workers.sources.kept import cache_dir_from_env
from workers.sources.knowledge.analysis import Chunk, split_markdown, terms_of
from workers.sources.knowledge.encoder import Encoder, query_vector, shared_use_encoder
from workers.sources.knowledge.files import (
    DEFAULT_MAX_FILE_BYTES,
    files_fingerprint,
    max_file_bytes_from_env,
)
from workers.sources.knowledge.ranking import USE_LEVELS, Mode, rank
from workers.sources.knowledge.search import MIN_COVERAGE, relevance_of, search
from workers.sources.knowledge.store import (
    ANALYSIS_HASH,
    INDEX_VERSION,
    IndexFile,
    build_index,
    models_of,
)

if TYPE_CHECKING:
    from workers.sources.knowledge.rag_http import HttpRagSource

__all__ = [
    "DEFAULT_KNOWLEDGE_DIR",
    "Chunk",
    "KnowledgeIndexSource",
    "KnowledgeSettings",
    "build_index",
    "knowledge_source_from_env",
    "split_markdown",
    "terms_of",
]

log = logging.getLogger("aci.knowledge")

DEFAULT_KNOWLEDGE_DIR: Final = Path(__file__).with_name("runbooks")
_RECHECK_S: Final = 2.0
_MAX_NAMED: Final = 20  # skipped runbooks named in an answer
_MODES: Final = ("fused", "dense", "lexical")


class KnowledgeSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Operator settings of the embedded knowledge index."""

    folder: str
    cache_dir: str
    max_hits: int = 5
    min_coverage: float = MIN_COVERAGE
    retrieval: Mode = "fused"
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES  # larger runbooks are skipped and named


class EmptyIndex(Exception):
    """The folder holds no indexable runbook."""


def _check_fts5() -> None:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
    except sqlite3.OperationalError as exc:
        raise RuntimeError(
            "this Python's sqlite3 lacks FTS5; the knowledge index needs it"
        ) from exc
    finally:
        conn.close()


class KnowledgeIndexSource:
    """The default `lookup_knowledge` source: the runbook folder, indexed locally.

    The index is (re)built in one shared build thread: a call, or the warm-up, that finds a
    build under way waits for that same build up to its own deadline and is then cancelled
    (ERROR/TIMEOUT), while the build goes on for the calls after it."""

    def __init__(self, settings: KnowledgeSettings, encoder: Encoder | None = None) -> None:
        self.settings = settings
        self._encoder: Encoder | None = None
        if settings.retrieval != "lexical":
            shared = encoder is None
            self._encoder = shared_use_encoder(settings.cache_dir) if shared else encoder
        model = self._encoder.model_id if self._encoder is not None else "lexical"
        self._salt = f"v{INDEX_VERSION}\0{ANALYSIS_HASH}\0{model}\0{settings.max_file_bytes}"
        self._logged: str | None = None  # the last problem logged, so each is logged once
        self._folder = Path(settings.folder).resolve()
        self._cache = Path(settings.cache_dir)
        self._lock = threading.Lock()  # the fields below; held only briefly
        self._search_lock = threading.Lock()  # one query at a time on the open index
        self._index: IndexFile | None = None
        self._fingerprint = ""
        self._checked_at = -math.inf
        self._refresh: Future[None] | None = None
        self._generation = 0  # bumped by aclose: a build started before does not install
        self._rebuilding = False  # a refresh found changed files and builds their index

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> KnowledgeIndexSource:
        """Settings from ACI_KNOWLEDGE_DIR, ACI_CACHE_DIR, ACI_KNOWLEDGE_MAX_HITS and
        ACI_KNOWLEDGE_RETRIEVAL; the encoder from ACI_EMBEDDINGS_* (default: the bundled one).
        A missing folder is logged here and answers UNAVAILABLE, as an unreadable one does."""
        _check_fts5()
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
        )
        encoder: Encoder | None = None
        if env.get("ACI_EMBEDDINGS_URL", "").strip() and retrieval != "lexical":
            from workers.sources.knowledge.embeddings_http import HttpEncoder

            encoder = HttpEncoder.from_env(env)
        source = cls(settings, encoder)
        if not _listable(Path(folder)):  # said once, here at start; every lookup is UNAVAILABLE
            source._log_once(_NO_FOLDER)
        return source

    async def fetch(self, request: LookupKnowledgeRequest) -> dict[str, Any]:
        """Search the index; an answer shaped like a RAG service's (hits only when relevant).
        While the runbooks' index is rebuilt after a change, the previous one answers. A query
        of common words only ("how do I") is a SCHEMA error: nothing in it can be looked up."""
        # In a thread: a Chinese query's words come from jieba, loaded on first use.
        if not await anyio.to_thread.run_sync(_searchable, request.query):
            raise SourceError(ErrorCode.SCHEMA, _NOTHING_TO_SEARCH)
        refresh = self._due_refresh()
        if refresh is not None:
            try:
                await _wait_for(refresh, self._answers_meanwhile)
            except SourceError as error:
                error.logged = self._logged is not None  # said once by the build: not again
                raise
        return await anyio.to_thread.run_sync(
            self._search_sync, request.query, abandon_on_cancel=True
        )

    async def aclose(self) -> None:
        """Close the index file; a later fetch reopens it."""
        await anyio.to_thread.run_sync(self._close_sync)

    def _close_sync(self) -> None:
        with self._search_lock, self._lock:
            if self._index is not None:
                self._index.conn.close()
            self._index, self._fingerprint, self._checked_at = None, "", -math.inf
            self._generation += 1

    def _answers_meanwhile(self) -> bool:
        """True while an index is open and a rebuild runs: lookups need not wait for it."""
        with self._lock:
            return self._rebuilding and self._index is not None

    def _due_refresh(self) -> Future[None] | None:
        """None while the open index is fresh; else the (possibly already running) refresh."""
        with self._lock:
            if self._index is not None and time.monotonic() - self._checked_at < _RECHECK_S:
                return None
            if self._refresh is None:
                refresh: Future[None] = Future()
                refresh.set_running_or_notify_cancel()
                self._refresh = refresh
                # Not a daemon: a build outliving its call still finishes (and is reused).
                threading.Thread(
                    target=self._run_refresh,
                    args=(refresh, self._generation),
                    name="aci-knowledge-index",
                ).start()
            return self._refresh

    def _run_refresh(self, refresh: Future[None], generation: int) -> None:
        try:
            self._refresh_sync(generation)
        except BaseException as exc:  # handed to every waiter, never lost in this thread
            error: BaseException | None = exc
        else:
            error = None
        with self._lock:
            rebuilt = self._rebuilding
        if error is not None and rebuilt:
            # The previous index answered while this rebuild ran; it failed, so that index no
            # longer stands for the folder: lookups wait for the next refresh and its outcome.
            with self._search_lock, self._lock:
                if self._index is not None:
                    self._index.conn.close()
                self._index, self._fingerprint, self._checked_at = None, "", -math.inf
        with self._lock:
            self._refresh, self._rebuilding = None, False
        if error is None:
            refresh.set_result(None)
        else:
            refresh.set_exception(error)

    def _refresh_sync(self, generation: int) -> None:
        now = time.monotonic()
        if not _listable(self._folder):
            self._log_once(_NO_FOLDER)
            raise OSError("knowledge folder missing or unreadable")
        fingerprint = files_fingerprint(self._folder, self._salt)
        with self._lock:
            if self._index is not None and fingerprint == self._fingerprint:
                if generation == self._generation:
                    self._checked_at = now
                return
            self._rebuilding = rebuilding = self._index is not None
        if rebuilding:
            log.info("runbooks changed: rebuilding the knowledge index; the previous one answers")
        try:
            index = self._open_or_build(fingerprint)
        except (OSError, sqlite3.OperationalError):  # SQLite cannot create its file there
            self._log_once(
                "the knowledge index could not be written to its cache folder (ACI_CACHE_DIR"
                " must be writable): lookups are UNAVAILABLE"
            )
            raise
        if index.n == 0:
            index.conn.close()
            self._log_once(
                "the knowledge folder holds no indexable runbook (.md, .markdown, .mdx, .txt,"
                " .rst): lookups are UNAVAILABLE"
            )
            raise EmptyIndex
        self._logged = None
        with self._search_lock, self._lock:
            if generation != self._generation:
                index.conn.close()
                return
            if self._index is not None:
                self._index.conn.close()
            self._index, self._fingerprint, self._checked_at = index, fingerprint, now

    def _open_or_build(self, fingerprint: str) -> IndexFile:
        folder_key = hashlib.sha256(str(self._folder).encode()).hexdigest()[:12]
        model_key = hashlib.sha256(self._salt.encode()).hexdigest()[:8]
        of_folder = f"knowledge-v{INDEX_VERSION}-{folder_key}-"
        prefix = f"{of_folder}{model_key}-"
        path = self._cache / f"{prefix}{fingerprint[:16]}.sqlite3"
        try:
            return IndexFile(path)
        except sqlite3.OperationalError:
            # Not built yet (or just removed as stale by a worker that saw newer files). The
            # newest index of this folder and model lends its vectors to unchanged chunks.
            self._cache.mkdir(parents=True, exist_ok=True)
            older = [p for p in self._cache.glob(f"{prefix}*.sqlite3") if p != path]
            # Another version of this code's index of the folder, by the same model, lends
            # its vectors by their stored digests and goes too (upgrades left them behind).
            model = self._encoder.model_id if self._encoder is not None else None
            others = [p for p in self._cache.glob(f"{of_folder}*.sqlite3") if p not in older]
            older += [p for p, m in models_of(others).items() if m == model and p != path]
            previous = _newest([p for p in older if p.name.startswith(prefix)])
            build_index(
                self._folder,
                path,
                self._encoder,
                previous=previous or _newest(older),
                max_file_bytes=self.settings.max_file_bytes,
                same_code=previous is not None,
            )
            for stale in older:
                stale.unlink(missing_ok=True)
            return IndexFile(path)

    def _search_sync(self, query: str) -> dict[str, Any]:
        # The query is encoded before the search lock: a remote encoder may take its time.
        vector = None
        if self._encoder is not None:
            vector = query_vector(self._encoder, query)
        with self._search_lock:
            index = self._index
            with self._lock:
                stale = self._rebuilding  # this index answers while its successor is built
            if index is None:  # closed meanwhile
                raise _unavailable()
            try:
                if vector is None or index.vectors is None:
                    hits, trace = search(
                        index,
                        query,
                        index.synonyms,
                        min_coverage=self.settings.min_coverage,
                        max_hits=self.settings.max_hits,
                    )
                    level = relevance_of(hits[0]["scores"]["coverage"]) if hits else None
                else:
                    hits, level, trace = rank(
                        index,
                        query,
                        vector,
                        index.synonyms,
                        mode=self.settings.retrieval,
                        min_coverage=self.settings.min_coverage,
                        max_hits=self.settings.max_hits,
                        levels=getattr(self._encoder, "levels", USE_LEVELS),
                    )
            except (sqlite3.DatabaseError, UnicodeError) as exc:
                raise _unavailable() from exc
        pack: dict[str, Any] = {"hits": hits, "indexedChunks": index.n}
        if level is not None:
            pack["relevanceLevel"] = level
        if index.skipped:  # runbooks over the size cap: the Control View names them
            pack["skippedSources"] = index.skipped[:_MAX_NAMED]
        if stale:  # the runbooks changed and the new index is not built yet
            pack["indexRebuilding"] = True
        return {
            "requestId": uuid.uuid4().hex,
            "query": query,
            "contextPack": pack,
            "retrievalTrace": trace,
            "fallbackAttempts": [],
        }

    def _log_once(self, message: str) -> None:
        if self._logged != message:
            self._logged = message
            log.error("%s", message)


_NO_FOLDER = "ACI_KNOWLEDGE_DIR does not name a readable folder: lookups are UNAVAILABLE"
_NOTHING_TO_SEARCH = (
    "query: it holds only common words (how, what, is, it); name the symptom, alert, service"
    " or error message to look up"
)


def _searchable(query: str) -> bool:
    """Whether the query holds a term the index searches (a word that is not a stop word)."""
    return bool(terms_of(query, keep_stop_words=False))


def _listable(folder: Path) -> bool:
    """Whether the folder exists and can be listed: `os.walk` skips one it cannot list without
    a word, and the build's open of it would then look like a cache that cannot be written."""
    try:
        with os.scandir(folder):
            return True
    except OSError:
        return False


def _newest(paths: list[Path]) -> Path | None:
    stamped = []
    for path in paths:
        with contextlib.suppress(OSError):  # removed meanwhile by another worker
            stamped.append((path.stat().st_mtime_ns, path))
    return max(stamped)[1] if stamped else None


def _unavailable() -> SourceError:
    return SourceError(
        ErrorCode.UNAVAILABLE, "the knowledge index could not be read", retryable=True
    )


async def _wait_for(refresh: Future[None], answers_meanwhile: Callable[[], bool]) -> None:
    """Wait for the shared build without a thread of our own: cancelled at the caller's
    deadline, which leaves the build running for the calls after it. Returns at once, without
    its outcome, once `answers_meanwhile()` (an open index answers while a rebuild runs)."""
    delay = 0.001
    while not refresh.done():
        if answers_meanwhile():
            return
        await anyio.sleep(delay)
        delay = min(delay * 2, 0.05)
    error = refresh.exception()
    if isinstance(error, EmptyIndex):
        raise SourceError(
            ErrorCode.UNAVAILABLE, "the knowledge folder holds no runbook", retryable=True
        ) from error
    if isinstance(error, (OSError, sqlite3.DatabaseError, UnicodeError, ValueError)):
        raise _unavailable() from error
    if error is not None:
        raise error


def knowledge_source_from_env(env: Mapping[str, str]) -> KnowledgeIndexSource | HttpRagSource:
    """The upstream RAG service when ACI_RAG_URL is set, else the embedded index."""
    if env.get("ACI_RAG_URL", "").strip():
        from workers.sources.knowledge.rag_http import HttpRagSource  # httpx: only for it

        return HttpRagSource.from_env(env)
    return KnowledgeIndexSource.from_env(env)
