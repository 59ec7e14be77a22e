"""The embedded `lookup_knowledge` source: Markdown runbooks in a local index.

Roles in sibling modules: `analysis` (terms, chunks), `files` (the confined walk), `encoder`
(sentence vectors, offline by default), `store` (the index file, built atomically),
`index_file` (which file, opened or built), `build_wait` (waiting for a build), `current` (hits
checked against their files as they are now), `search` (BM25, a coverage filter), `ranking`
(dense and fused ranking, the relevance level), `settings` (the operator's variables, checked
at start). This module is the source: the shared build thread, the answer's shape. A folder
without a runbook, or none, is an error (UNAVAILABLE, logged), never an empty index that
answers NO_EVIDENCE.

The index file lives in the cache folder, named after the folder and a fingerprint of its files
(paths, sizes, mtimes), of the analysis code and of the model id: it is built on first use,
rebuilt only when files or the model change, and written to a temp file then renamed, so
concurrent workers never open a half-built index. Queries take about a millisecond but still
run in a worker thread. The (jieba- and model-loading) build runs in one shared thread of its
own, which a call waits for only up to its deadline.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sqlite3
import threading
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio.to_thread

from contracts.requests import LookupKnowledgeRequest
from contracts.status import ErrorCode
from workers.sources.base import SourceError
from workers.sources.knowledge.analysis import Chunk, split_markdown, terms_of
from workers.sources.knowledge.build_wait import EmptyIndex, unavailable, wait_for
from workers.sources.knowledge.current import CurrentChunks, current_hits
from workers.sources.knowledge.encoder import Encoder, query_vector, shared_use_encoder
from workers.sources.knowledge.files import files_fingerprint
from workers.sources.knowledge.index_file import open_or_build, why_not
from workers.sources.knowledge.ranking import USE_LEVELS, rank
from workers.sources.knowledge.search import NOTHING_TO_SEARCH, relevance_of, search, searchable
from workers.sources.knowledge.settings import (
    DEFAULT_KNOWLEDGE_DIR,
    KnowledgeSettings,
    listable,
    no_folder,
    settings_from_env,
)
from workers.sources.knowledge.store import ANALYSIS_HASH, INDEX_VERSION, IndexFile, build_index

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

_RECHECK_S: Final = 2.0
_MAX_NAMED: Final = 20  # skipped runbooks named in an answer


class KnowledgeIndexSource:
    """The default `lookup_knowledge` source: the runbook folder, indexed locally in one shared
    build thread; a call or the warm-up that finds a build under way waits for it a bounded
    time (`build_wait`), while the build goes on for the calls after it."""

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
        self._no_folder = no_folder(settings.folder)  # with the working folder it is read from
        self._cache = Path(settings.cache_dir)
        self._lock = threading.Lock()  # the fields below; held only briefly
        self._search_lock = threading.Lock()  # one query at a time on the open index
        self._index: IndexFile | None = None
        self._fingerprint = ""
        self._checked_at = -math.inf
        self._refresh: Future[None] | None = None
        self._generation = 0  # bumped by aclose: a build started before does not install
        self._rebuilding = False  # a refresh found changed files and builds their index
        self._current = CurrentChunks(self._folder, settings.max_file_bytes)  # hits checked
        self._progress: tuple[int, int] | None = None  # (embedded, to embed) of a build
        self._said_building = False  # a lookup was refused for a first build: say it is ready

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> KnowledgeIndexSource:
        """Settings from ACI_KNOWLEDGE_DIR, ACI_CACHE_DIR, ACI_KNOWLEDGE_MAX_HITS and
        ACI_KNOWLEDGE_RETRIEVAL; the encoder from ACI_EMBEDDINGS_* (default: the bundled one).
        A missing folder is logged here and answers UNAVAILABLE, as an unreadable one does."""
        settings, encoder = settings_from_env(env)
        source = cls(settings, encoder)
        if not listable(Path(settings.folder)):  # said once, here at start; lookups UNAVAILABLE
            source._log_once(source._no_folder)
        return source

    async def fetch(self, request: LookupKnowledgeRequest) -> dict[str, Any]:
        """Search the index; an answer shaped like a RAG service's (hits only when relevant).
        While the runbooks' index is rebuilt after a change, the previous one answers. A query
        of common words only ("how do I") is a SCHEMA error: nothing in it can be looked up."""
        # In a thread: a Chinese query's words come from jieba, loaded on first use.
        if not await anyio.to_thread.run_sync(searchable, request.query):
            raise SourceError(ErrorCode.SCHEMA, NOTHING_TO_SEARCH)
        refresh = self._due_refresh()
        if refresh is not None:
            wait = self.settings.build_wait_s
            try:
                with anyio.move_on_after(math.inf if wait is None else wait) as waited:
                    await wait_for(refresh, self._answers_meanwhile)
            except SourceError as error:
                error.logged = self._logged is not None  # said once by the build: not again
                raise
            if waited.cancelled_caught:
                raise self._still_building()
        return await anyio.to_thread.run_sync(
            self._search_sync, request.query, abandon_on_cancel=True
        )

    def building(self) -> tuple[int, int] | None:
        """(sections embedded, sections to embed) while an index is built and none answers
        meanwhile (the folder's first build), else None. (0, 0) before its embedding starts."""
        with self._lock:
            if self._index is not None or self._refresh is None:
                return None
            return self._progress or (0, 0)

    async def ready(self) -> None:
        """Wait, without a bound, for the index to be built or checked (a one-off command
        waits for a first build rather than answer "still being built"); its failure, if
        any, is the next lookup's answer."""
        refresh = self._due_refresh()
        if refresh is not None:
            with contextlib.suppress(Exception):
                await wait_for(refresh, lambda: False)

    def _still_building(self) -> SourceError:
        progress = self.building()
        done = ""
        if progress is not None and progress[1]:
            done = f" ({progress[0]:,} of {progress[1]:,} sections embedded)"
        if not self._said_building:
            self._said_building = True
            log.warning(
                "the knowledge index is still being built%s: lookups answer UNAVAILABLE"
                " (retryable) until it is ready", done,
            )  # fmt: skip
        return SourceError(
            ErrorCode.UNAVAILABLE,
            f"the runbook index is still being built{done}; ask again in a minute",
            retryable=True,
        )

    def _set_progress(self, done: int, total: int) -> None:
        with self._lock:
            self._progress = (done, total)

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
        started = time.monotonic()
        with self._lock:
            first = self._index is None
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
            self._refresh, self._rebuilding, self._progress = None, False, None
        took = time.monotonic() - started
        long = first and took > (self.settings.build_wait_s or math.inf)
        if error is None and (self._said_building or long):  # lookups were refused meanwhile
            self._said_building = False
            log.warning("the knowledge index is built (%.0f s): lookups answer from it", took)
        if error is None:
            refresh.set_result(None)
        else:
            refresh.set_exception(error)

    def _refresh_sync(self, generation: int) -> None:
        now = time.monotonic()
        if not listable(self._folder):
            self._log_once(self._no_folder)
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
        except (OSError, sqlite3.OperationalError) as exc:  # SQLite cannot write its file there
            self._log_once(
                f"the knowledge index could not be written to its cache folder ({why_not(exc)}"
                "; ACI_CACHE_DIR must be writable, with room): lookups are UNAVAILABLE"
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
        return open_or_build(
            self._folder,
            self._cache,
            self._salt,
            fingerprint,
            self._encoder,
            max_file_bytes=self.settings.max_file_bytes,
            progress=self._set_progress,
        )

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
                raise unavailable()
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
                raise unavailable() from exc
        hits, level, changed = current_hits(self._current, hits, level)
        if changed:  # the folder changed since this index: look at it again (a float's store)
            stale, self._checked_at = True, -math.inf
        pack: dict[str, Any] = {"hits": hits, "indexedChunks": index.n}
        if level is not None:
            pack["relevanceLevel"] = level
        if index.skipped:  # not indexed (size, unreadable, binary): the Control View names them
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


def knowledge_source_from_env(env: Mapping[str, str]) -> KnowledgeIndexSource | HttpRagSource:
    """The upstream RAG service when ACI_RAG_URL is set, else the embedded index."""
    if env.get("ACI_RAG_URL", "").strip():
        from workers.sources.knowledge.rag_http import HttpRagSource  # httpx: only for it

        return HttpRagSource.from_env(env)
    return KnowledgeIndexSource.from_env(env)
