"""The embedded `lookup_knowledge` source: Markdown runbooks in an SQLite FTS5 (BM25) index.

Files are split by heading structure into chunks (`split_markdown`); each chunk is indexed under
pre-segmented terms: English words lower-cased, lightly stemmed and split at camelCase, Chinese
runs segmented by jieba in search mode (so a term is found inside a sentence), both sides with
the same function. A query is expanded through a small operations synonym table, candidates come
from BM25, and a candidate is only evidence when the IDF-weighted share of the query's concepts
it contains reaches `MIN_COVERAGE` -- off-topic questions give no hits, hence `NO_EVIDENCE`.

Only regular files whose real path lies inside the (real) folder are read: a symlink out of
it (`/etc/passwd`, `../secret.md`, `/proc/self/environ`), a directory symlink, a fifo or device,
a hidden path and a name that is not UTF-8 (logged once, escaped) are skipped. A file is read
by walking from the open folder one component at a time without following symlinks, so a
directory swapped for a symlink between the scan and the read is refused, not followed out.

The index file lives in the cache folder, named after the folder and a fingerprint of its files
(paths, sizes, mtimes): it is built on first use, rebuilt only when files change, and written to
a temp file then renamed, so concurrent workers never open a half-built index. Queries take well
under a millisecond but still run in a worker thread. The (jieba-loading) build runs in one
shared thread of its own, which a call waits for only up to its deadline.

One module (about 700 lines) on purpose: the cached index is named after a hash of this file's
bytes (`_ANALYSIS_HASH`), so a change to the analysis, the file walk or the search rebuilds it;
split into modules, that hash would have to cover each of them. The sections run in order:
text analysis (`terms_of`, `split_markdown`), the confined file walk, the index (build, search),
the source.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import sqlite3
import stat
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from pathlib import Path, PurePath
from typing import Any, Final

import anyio.to_thread
import msgspec

from contracts.requests import LookupKnowledgeRequest
from contracts.status import ErrorCode
from workers.sources.base import SourceError
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
INDEX_VERSION: Final = 1
MAX_CHUNK_CHARS: Final = 1000
# Calibrated on tests/workers/knowledge_eval.json (see docs/knowledge.md).
MIN_COVERAGE: Final = 0.33
HIGH_COVERAGE: Final = 0.8
MEDIUM_COVERAGE: Final = 0.55
_CANDIDATES: Final = 30
_RECHECK_S: Final = 2.0

_ANALYSIS_HASH: Final = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_RUN = re.compile(r"[A-Za-z0-9]+|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")

_STOP_EN: Final = frozenset(
    "a an the and or but if of to in on at by for from with without into onto about as is are "
    "was were be been being do does did doing done have has had having i me my we our you your "
    "it its this that these those there here what which who whom when where why how can could "
    "should would will shall may might must not no so than then too very just also any all some "
    "such each other more most much many get gets got getting keep keeps kept go goes going went "
    "seem seems make makes made please help tell explain show let us know want need thing things "
    "way ways happen happening happens up out again still really lot lots one".split()
)
_STOP_ZH: Final = frozenset(
    "的 了 是 在 和 与 或 及 吗 呢 吧 啊 呀 我 我们 你 他 它 这 那 这个 那个 一个 有 没有 怎么 "
    "怎么办 怎样 如何 什么 为什么 哪些 哪个 请问 请 一下 应该 可以 能 会 要 就 都 也 还 很 "
    "太 被 把 让 给 对 时 时候 之后 以后 出现 发生 问题".split()
)

# Operations vocabulary: each line is one concept; any member matches the others. Members are
# written as they are typed; they go through the same `terms_of` as documents and queries.
_SYNONYMS: Final = """
slow sluggish laggy latency lag 慢 缓慢 卡顿 延迟 耗时
response answer reply 响应
cpu processor 处理器
memory ram heap 内存 堆
disk storage volume 磁盘 存储
full exhausted exhaustion depleted saturated pegged 满 耗尽 打满
unavailable down outage unreachable 503 不可 宕机 挂
pool 池
connection connections connect 连接
query queries sql statement 查询 语句
index indexes indices 索引
oom oomkilled outofmemoryerror 溢出
restart restarts restarting reboot crashloop crashloopbackoff 重启
crash crashes crashing 崩溃
timeout timeouts timed 超时
breaker 熔断
downstream dependency upstream 下游 依赖
pending unschedulable failedscheduling 调度
drain drained cordon cordoned evicted eviction 驱逐
rollback revert undo 回滚
deploy deployment release rollout 发布 部署 上线
error errors failure failures exception 报错 错误 异常
database db mysql mariadb 数据库
pod container 容器
node host machine 节点 主机
spike surge high 飙高 升高 飙升
leak leaking leaked 泄漏 泄露
lock locks locking deadlock 锁
thread threads 线程
gc garbage 回收
log logs logging 日志
alert alarm alerts 告警 报警
scan 扫描
api endpoint interface uri 接口
""".strip().splitlines()


class Chunk(msgspec.Struct, frozen=True, kw_only=True):
    """One indexed piece of a runbook: verbatim text under its heading path."""

    document_id: str
    source: str
    title: str
    breadcrumb: str
    content: str
    ordinal: int


def _stem(word: str) -> str:
    # A light English stemmer (plural, -ed, -ing, final e): documents and queries share it.
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith(("sses", "xes", "zes", "ches", "shes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]
            break
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    return word


def _jieba() -> Any:
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    return jieba


def terms_of(text: str, *, keep_stop_words: bool = True, bigrams: bool = False) -> list[str]:
    """Terms of `text`: stemmed English words, camelCase parts, jieba words (+ CJK bigrams)."""
    out: list[str] = []
    for run in _RUN.findall(text):
        if run.isascii():
            out.append(_stem(run.lower()))
            parts = _CAMEL.findall(run) if not run.islower() and not run.isupper() else []
            if len(parts) > 1:
                out.extend(_stem(p.lower()) for p in parts if len(p) > 1)
        else:
            words = [w for w in _jieba().cut_for_search(run) if w.strip()]
            out.extend(words)
            if bigrams:
                # Indexed overlapping bigrams find a query word that jieba segmented
                # differently inside a document sentence.
                seen = set(words)
                pairs = (run[i : i + 2] for i in range(len(run) - 1))
                out.extend(b for b in pairs if b not in seen)
    if keep_stop_words:
        return out
    return [t for t in out if t not in _STOP_EN and t not in _STOP_ZH]


def _synonym_terms(word: str) -> list[str]:
    # A Chinese member stands for itself, not for the sub-words search mode also emits.
    terms = terms_of(word, keep_stop_words=False)
    return [word] if word in terms else terms


def _synonym_groups() -> dict[str, frozenset[str]]:
    groups: dict[str, frozenset[str]] = {}
    for line in _SYNONYMS:
        members = frozenset(t for word in line.split() for t in _synonym_terms(word))
        for member in members:
            groups[member] = groups.get(member, frozenset()) | members
    return groups


def split_markdown(text: str, source: str) -> list[Chunk]:
    """Chunks of one Markdown file by heading structure; the first `# ` heading is the title."""
    title = ""
    stack: list[tuple[int, str]] = []
    sections: list[tuple[list[str], list[str]]] = [([], [])]
    in_fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if match is None:
            sections[-1][1].append(line)
            continue
        level, heading = len(match.group(1)), match.group(2).strip()
        if level == 1 and not title:
            title = heading
            stack = []
        else:
            stack = [(lvl, h) for lvl, h in stack if lvl < level] + [(level, heading)]
        sections.append(([h for _, h in stack], [line]))
    title = title or Path(source).stem
    chunks: list[Chunk] = []
    for path, lines in sections:
        body = [ln for ln in lines if not _HEADING.match(ln)]
        if not "\n".join(body).strip():
            continue
        breadcrumb = " > ".join([title, *path])
        for piece in _pieces("\n".join(lines).strip()):
            digest = hashlib.sha256(f"{source}\0{breadcrumb}\0{piece}".encode()).hexdigest()
            chunks.append(
                Chunk(
                    document_id=f"kb-{digest[:20]}",
                    source=source,
                    title=title,
                    breadcrumb=breadcrumb,
                    content=piece,
                    ordinal=len(chunks),
                )
            )
    return chunks


def _pieces(text: str) -> list[str]:
    # Long sections are cut at blank lines outside code fences; each piece stays verbatim.
    if len(text) <= MAX_CHUNK_CHARS:
        return [text]
    pieces: list[str] = []
    start = 0
    in_fence = False
    offset = 0
    for line in text.splitlines(keepends=True):
        if _FENCE.match(line):
            in_fence = not in_fence
        offset += len(line)
        if not line.strip() and not in_fence and offset - start >= MAX_CHUNK_CHARS // 2:
            pieces.append(text[start:offset].strip())
            start = offset
    pieces.append(text[start:].strip())
    return [p for p in pieces if p]


_warned_names: set[str] = set()


def _skip_name(rel: str) -> bool:
    # A name that is not UTF-8 (os.walk hands it over with surrogate escapes) cannot be a
    # document's `source`: skip it, and say so once, escaped.
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        shown = rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        if shown not in _warned_names:
            _warned_names.add(shown)
            log.warning("skipping a knowledge file whose name is not UTF-8: %s", shown)
        return True
    return False


def _markdown_files(folder: Path) -> list[tuple[str, Path]]:
    """(source name, real path) of every Markdown file the index may serve: regular files whose
    real path lies inside the real folder. Directory symlinks are not followed (a target inside
    the folder is walked anyway), hidden paths are skipped."""
    root = folder.resolve()
    found: list[tuple[str, Path]] = []
    for top, dirs, names in os.walk(root):  # followlinks=False
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            if name.startswith(".") or not name.endswith(".md"):
                continue
            path = Path(top, name)
            rel = path.relative_to(root).as_posix()
            if _skip_name(rel):
                continue
            try:
                real = path.resolve(strict=True)
                inside = real.is_relative_to(root) and stat.S_ISREG(real.stat().st_mode)
            except (OSError, RuntimeError):  # dangling or looping link, vanished file
                continue
            if inside:
                found.append((rel, real))
    return sorted(found)


_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


def _read_inside(root_fd: int, rel: PurePath) -> str | None:
    """The text of the regular file at `rel` (symlink-free) under the open folder `root_fd`,
    or None. Each component is opened relative to the one before without following a symlink,
    so a directory swapped for a symlink after the scan is refused (ELOOP), never followed out
    of the folder; a fifo swapped in never blocks the read."""
    *dirs, name = rel.parts
    opened: list[int] = []
    try:
        parent = root_fd
        for part in dirs:
            parent = os.open(part, _DIR_FLAGS, dir_fd=parent)
            opened.append(parent)
        fd = os.open(name, _FILE_FLAGS, dir_fd=parent)
    except OSError:
        return None
    finally:
        for dir_fd in opened:
            os.close(dir_fd)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return handle.read().decode("utf-8", errors="replace")


def _fingerprint(folder: Path) -> str:
    # The analysis code is part of the fingerprint: a changed tokenizer means a rebuilt index.
    digest = hashlib.sha256(f"v{INDEX_VERSION}\0{_ANALYSIS_HASH}".encode())
    for rel, path in _markdown_files(folder):
        try:
            info = path.stat()
        except OSError:
            continue
        digest.update(f"{rel}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()


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
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        for source, path in _markdown_files(root):
            text = _read_inside(root_fd, path.relative_to(root))
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


class _Index:
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


def _concepts(query: str, groups: Mapping[str, frozenset[str]]) -> list[frozenset[str]]:
    concepts: list[frozenset[str]] = []
    for term in dict.fromkeys(terms_of(query, keep_stop_words=False)):
        concept = groups.get(term, frozenset()) | {term}
        if concept not in concepts:
            concepts.append(concept)
    return concepts


def _match_expression(concepts: Iterable[frozenset[str]]) -> str:
    terms = sorted({t for concept in concepts for t in concept})
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


class KnowledgeSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Operator settings of the embedded knowledge index."""

    folder: str
    cache_dir: str
    max_hits: int = 5
    min_coverage: float = MIN_COVERAGE


def _concept_weight(index: _Index, concept: frozenset[str]) -> float:
    # The commonest known spelling sets the weight; a concept the corpus never uses weighs most.
    known = [index.df[t] for t in concept if t in index.df]
    return index.idf(max(known, default=0))


def _relevance(coverage: float) -> str:
    if coverage >= HIGH_COVERAGE:
        return "high"
    return "medium" if coverage >= MEDIUM_COVERAGE else "low"


def _search(
    index: _Index, query: str, groups: Mapping[str, frozenset[str]], settings: KnowledgeSettings
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    started = time.perf_counter()
    concepts = _concepts(query, groups)
    trace: list[dict[str, Any]] = [
        {"step": "analyse", "concepts": [sorted(c) for c in concepts], "stopWordsRemoved": True}
    ]
    if not concepts or index.n == 0:
        return [], trace
    weights = [_concept_weight(index, c) for c in concepts]
    rows = index.conn.execute(
        "SELECT bm25(chunks, 2.0, 1.0), crumb_terms, body_terms, document_id, source, title,"
        " breadcrumb, content, ordinal FROM chunks WHERE chunks MATCH ?"
        " ORDER BY bm25(chunks, 2.0, 1.0) LIMIT ?",
        (_match_expression(concepts), _CANDIDATES),
    ).fetchall()
    trace.append({"step": "bm25", "candidates": len(rows), "limit": _CANDIDATES})
    query_is_cjk = _CJK.search(query) is not None
    scored: list[tuple[float, float, list[int], tuple[Any, ...]]] = []
    for row in rows:
        present = set(row[1].split()) | set(row[2].split())
        matched = [i for i, concept in enumerate(concepts) if concept & present]
        coverage = sum(weights[i] for i in matched) / sum(weights)
        if coverage >= settings.min_coverage:
            # Same-language runbooks first when both languages answer (synonyms cross over).
            language = 1.0 if (_CJK.search(row[5]) is not None) == query_is_cjk else 0.7
            scored.append((coverage * coverage * -row[0] * language, coverage, matched, row))
    scored.sort(key=lambda item: item[0], reverse=True)
    trace.append(
        {"step": "coverageFilter", "threshold": settings.min_coverage, "kept": len(scored)}
    )
    hits = [
        {
            "documentId": row[3],
            "source": row[4],
            "title": row[5],
            "breadcrumb": row[6],
            "content": row[7],
            "scores": {
                "bm25": round(-row[0], 4),
                "coverage": round(cov, 4),
                "dense": None,
                "rerank": None,
                "final": round(score, 4),
            },
            "rank": rank,
            "metadata": {
                "chunkOrdinal": row[8],
                "matchedConcepts": len(matched),
                "queryConcepts": len(concepts),
            },
        }
        for rank, (score, cov, matched, row) in enumerate(scored[: settings.max_hits], start=1)
    ]
    trace.append(
        {
            "step": "assemble",
            "hits": len(hits),
            "elapsedMs": round((time.perf_counter() - started) * 1000, 3),
        }
    )
    return hits, trace


def _default_cache_dir(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CACHE_HOME", "").strip()
    return (Path(base) if base else Path.home() / ".cache") / "aci-evidence"


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

    def __init__(self, settings: KnowledgeSettings) -> None:
        self.settings = settings
        self._folder = Path(settings.folder).resolve()
        self._cache = Path(settings.cache_dir)
        self._lock = threading.Lock()  # the fields below; held only briefly
        self._search_lock = threading.Lock()  # one query at a time on the open index
        self._index: _Index | None = None
        self._fingerprint = ""
        self._checked_at = -math.inf
        self._groups: dict[str, frozenset[str]] | None = None
        self._refresh: Future[None] | None = None
        self._generation = 0  # bumped by aclose: a build started before does not install

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> KnowledgeIndexSource:
        """Settings from ACI_KNOWLEDGE_DIR, ACI_CACHE_DIR and ACI_KNOWLEDGE_MAX_HITS."""
        _check_fts5()
        folder = env.get("ACI_KNOWLEDGE_DIR", "").strip() or str(DEFAULT_KNOWLEDGE_DIR)
        if not Path(folder).is_dir():
            raise ValueError("ACI_KNOWLEDGE_DIR does not name a readable folder")
        cache = env.get("ACI_CACHE_DIR", "").strip() or str(_default_cache_dir(env))
        max_hits = int(env.get("ACI_KNOWLEDGE_MAX_HITS", "").strip() or 5)
        if not 1 <= max_hits <= 50:
            raise ValueError("ACI_KNOWLEDGE_MAX_HITS must be between 1 and 50")
        return cls(KnowledgeSettings(folder=folder, cache_dir=cache, max_hits=max_hits))

    async def fetch(self, request: LookupKnowledgeRequest) -> dict[str, Any]:
        """Search the index; an answer shaped like a RAG service's (hits only when relevant)."""
        refresh = self._due_refresh()
        if refresh is not None:
            await _wait_for(refresh)
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
            self._refresh = None
        if error is None:
            refresh.set_result(None)
        else:
            refresh.set_exception(error)

    def _refresh_sync(self, generation: int) -> None:
        now = time.monotonic()
        if not self._folder.is_dir():
            raise OSError("knowledge folder missing")
        fingerprint = _fingerprint(self._folder)
        with self._lock:
            if self._index is not None and fingerprint == self._fingerprint:
                if generation == self._generation:
                    self._checked_at = now
                return
        index = self._open_or_build(fingerprint)
        groups = self._groups if self._groups is not None else _synonym_groups()
        with self._search_lock, self._lock:
            if generation != self._generation:
                index.conn.close()
                return
            if self._index is not None:
                self._index.conn.close()
            self._index, self._fingerprint, self._checked_at = index, fingerprint, now
            self._groups = groups

    def _open_or_build(self, fingerprint: str) -> _Index:
        folder_key = hashlib.sha256(str(self._folder).encode()).hexdigest()[:12]
        prefix = f"knowledge-v{INDEX_VERSION}-{folder_key}-"
        path = self._cache / f"{prefix}{fingerprint[:16]}.sqlite3"
        try:
            return _Index(path)
        except sqlite3.OperationalError:
            # Not built yet (or just removed as stale by a worker that saw newer files).
            self._cache.mkdir(parents=True, exist_ok=True)
            build_index(self._folder, path)
            for stale in self._cache.glob(f"{prefix}*.sqlite3"):
                if stale != path:
                    stale.unlink(missing_ok=True)
            return _Index(path)

    def _search_sync(self, query: str) -> dict[str, Any]:
        with self._search_lock:
            index, groups = self._index, self._groups
            if index is None or groups is None:  # closed meanwhile
                raise _unavailable()
            try:
                hits, trace = _search(index, query, groups, self.settings)
            except (sqlite3.DatabaseError, UnicodeError) as exc:
                raise _unavailable() from exc
        pack: dict[str, Any] = {"hits": hits, "indexedChunks": index.n}
        if hits:
            pack["relevanceLevel"] = _relevance(hits[0]["scores"]["coverage"])
        return {
            "requestId": uuid.uuid4().hex,
            "query": query,
            "contextPack": pack,
            "retrievalTrace": trace,
            "fallbackAttempts": [],
        }


def _unavailable() -> SourceError:
    return SourceError(
        ErrorCode.UNAVAILABLE, "the knowledge index could not be read", retryable=True
    )


async def _wait_for(refresh: Future[None]) -> None:
    """Wait for the shared build without a thread of our own: cancelled at the caller's
    deadline, which leaves the build running for the calls after it."""
    delay = 0.001
    while not refresh.done():
        await anyio.sleep(delay)
        delay = min(delay * 2, 0.05)
    error = refresh.exception()
    if isinstance(error, (OSError, sqlite3.DatabaseError, UnicodeError)):
        raise _unavailable() from error
    if error is not None:
        raise error


def knowledge_source_from_env(env: Mapping[str, str]) -> KnowledgeIndexSource | HttpRagSource:
    """The upstream RAG service when ACI_RAG_URL is set, else the embedded index."""
    if env.get("ACI_RAG_URL", "").strip():
        return HttpRagSource.from_env(env)
    return KnowledgeIndexSource.from_env(env)
