"""Text analysis of the knowledge index: terms of a text (documents and queries alike) and
Markdown chunks.

Terms: English words lower-cased, lightly stemmed and split at camelCase; Chinese runs segmented
by jieba in search mode (so a term is found inside a sentence), documents also with overlapping
CJK bigrams. The query side expands terms through a small operations synonym table
(`synonym_groups`). `split_markdown` reads a Markdown file as a reader sees it (`markdown.py`:
front matter out, setext headings, comments and link definitions left out) and cuts it into
chunks of at most `MAX_CHUNK_CHARS` that keep their heading path; `.txt` and `.rst` files are
plain text (`split_document`): packed at blank lines; a `.txt` file is titled by its first
line when that reads as a title (`plain_title`), else by the file name.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Final

import msgspec

from contracts.bounds import DEFAULT_BOUNDS
from workers.sources.knowledge.markdown import Block, pack, read_markdown
from workers.sources.knowledge.restructured import read_rest

__all__ = [
    "CJK",
    "MAX_CHUNK_CHARS",
    "PLAIN_SUFFIXES",
    "Chunk",
    "plain_title",
    "split_document",
    "split_markdown",
    "synonym_groups",
    "terms_of",
]

# The excerpt the Model Observation shows of a hit: a longer chunk was cut there, and the
# words a lookup matched past the cut never reached the model (docs/knowledge.md).
MAX_CHUNK_CHARS: Final = DEFAULT_BOUNDS.rag_excerpt_chars
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_RUN = re.compile(r"[A-Za-z0-9]+|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_ADORNMENT = re.compile(r"^([=\-~^\"'`#*+:.])\1{2,}[ \t]*$")
PLAIN_SUFFIXES: Final = (".txt", ".rst")
# HTTP status codes said in the plural ("502s", "504s"): an on-call engineer's word for
# those responses; runbooks write "HTTP 502", "502 Bad Gateway" (`_stem` leaves non-words).
_STATUS_PLURAL = re.compile(r"[1-5][0-9]{2}[sS]")

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
disk storage volume device 磁盘 存储
full exhausted exhaustion depleted saturated pegged space enospc 满 耗尽 打满
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
lost loss drop dropped 丢 丢包 丢失
wire network 网络
""".strip().splitlines()


class Chunk(msgspec.Struct, frozen=True, kw_only=True):
    """One indexed piece of a runbook: verbatim text under its heading path."""

    document_id: str
    source: str
    title: str
    breadcrumb: str
    content: str
    ordinal: int
    meta: str = ""  # the front matter's description, tags, aliases: searchable, not shown
    anchor: str = ""  # the section's `{#id}` (a link's fragment names it): not shown


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
        if _STATUS_PLURAL.fullmatch(run):  # "throwing 502s": the code, as a plural's stem
            out.append(run[:3])
        elif run.isascii():
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


def synonym_groups() -> dict[str, frozenset[str]]:
    groups: dict[str, frozenset[str]] = {}
    for line in _SYNONYMS:
        members = frozenset(t for word in line.split() for t in _synonym_terms(word))
        for member in members:
            groups[member] = groups.get(member, frozenset()) | members
    return groups


def split_markdown(text: str, source: str) -> list[Chunk]:
    """Chunks of one Markdown file as a reader sees it (`markdown.read_markdown`): front
    matter out (its title names the runbook, its description and tags are `meta`), one
    chunk per section, sections over `MAX_CHUNK_CHARS` split at block, list-item, row or line
    boundaries into bounded chunks that keep the section's heading path."""
    page = read_markdown(text, mdx=source.lower().endswith(".mdx"))
    title = page.title or Path(source).stem
    chunks: list[Chunk] = []
    for section in page.sections:
        if all(block.heading for block in section.blocks):
            continue  # heading-only
        breadcrumb = " > ".join([title, *section.path])
        for piece in pack(page.lines, section.blocks, MAX_CHUNK_CHARS):
            chunks.append(
                _chunk(source, title, breadcrumb, piece, len(chunks), page.meta, section.anchor)
            )
    return chunks


def split_document(text: str, source: str) -> list[Chunk]:
    """Chunks of one runbook file: Markdown by headings, `.txt`/`.rst` as plain text."""
    if not source.lower().endswith(PLAIN_SUFFIXES):  # suffixes in any case: `NOTES.TXT`
        return split_markdown(text, source)
    if source.lower().endswith(".rst"):
        return _split_rest(text, source)
    title = plain_title(text) or Path(source).stem
    chunks: list[Chunk] = []
    for piece in _pieces(text.strip()):
        chunks.append(_chunk(source, title, title, piece, len(chunks)))
    return chunks


def plain_title(text: str) -> str:
    """A plain-text runbook's title: its first line when it reads as one, else "". A line
    underlined (`Disk full` then `=========`, reStructuredText's way), or a line that stands
    alone (a blank line after it, text after that) and looks like a title: at most
    `_TITLE_CHARS` characters and `_TITLE_WORDS` words, a letter in it, no sentence or clause
    punctuation at its end (`.`, `,`, `:`, `;`, `!`, `?` and their CJK forms), no list item, quote,
    shell prompt or link. A leading Markdown `#` is dropped (`# Disk full` in a .txt)."""
    lines = text.lstrip("\ufeff").splitlines()
    nonblank = [ln for ln in lines if ln.strip()]
    if len(nonblank) < 2:
        return ""
    first = nonblank[0].strip()
    if _ADORNMENT.match(nonblank[1]) and not _ADORNMENT.match(first):
        return first
    start = next(n for n, ln in enumerate(lines) if ln.strip())
    if start + 1 < len(lines) and lines[start + 1].strip():
        return ""  # the first line of a paragraph
    title = re.sub(r"^#{1,6}\s+", "", first).strip()
    if (
        len(title) > _TITLE_CHARS
        or len(title.split()) > _TITLE_WORDS
        or not re.search(r"[^\W\d_]", title)
        or title.endswith(_SENTENCE_ENDS)
        or _NOT_A_TITLE.match(title)
        or "://" in title
        or _ADORNMENT.match(title)
    ):
        return ""
    return title


_TITLE_CHARS: Final = 80
_TITLE_WORDS: Final = 12
# ... and their full-width CJK forms (escaped: ruff reads them as look-alikes).
_SENTENCE_ENDS: Final = tuple(".,:;!?\u3002\uff0c\uff1a\uff1b\uff01\uff1f\u3001")
# A list item, a quote, a shell prompt, a table row or a code line: no title.
_NOT_A_TITLE = re.compile(r"([-*+•>|$%]|\d+[.)])(\s|$)|[`{<\[(]|\w+=")


def _split_rest(text: str, source: str) -> list[Chunk]:
    """Chunks of a reStructuredText file by its sections (`restructured.read_rest`), each
    packed at blank lines like plain text, under its heading path."""
    page = read_rest(text)
    # Without a document title, the first section's names the runbook (not twice).
    first = next((s.path[0] for s in page.sections if s.path), "")
    title = page.title or first or Path(source).stem
    chunks: list[Chunk] = []
    for section in page.sections:
        if not any((line or "").strip() for line in page.lines[section.body : section.end]):
            continue  # heading-only
        blocks = _blocks(page.lines, section.start, section.end)
        path = section.path[1:] if section.path[:1] == [title] else section.path
        breadcrumb = " > ".join([title, *path])
        for piece in pack(page.lines, blocks, MAX_CHUNK_CHARS):
            chunks.append(_chunk(source, title, breadcrumb, piece, len(chunks)))
    return chunks


def _chunk(
    source: str,
    title: str,
    breadcrumb: str,
    piece: str,
    ordinal: int,
    meta: str = "",
    anchor: str = "",
) -> Chunk:
    # The id is a hash of where the text stands and the text: stable across rebuilds (two
    # sections alike but for their `{#id}` are two places).
    place = f"{source}\0{breadcrumb}" + (f"\0{anchor}" if anchor else "")
    digest = hashlib.sha256(f"{place}\0{piece}".encode()).hexdigest()
    return Chunk(
        document_id=f"kb-{digest[:20]}",
        source=source,
        title=title,
        breadcrumb=breadcrumb,
        content=piece,
        ordinal=ordinal,
        meta=meta,
        anchor=anchor,
    )


def _pieces(text: str) -> list[str]:
    # Plain text: paragraphs (at blank lines), packed into bounded pieces.
    lines: list[str | None] = list(text.splitlines())
    return pack(lines, _blocks(lines, 0, len(lines)), MAX_CHUNK_CHARS)


def _blocks(lines: list[str | None], first: int, end: int) -> list[Block]:
    # The paragraphs of lines [first, end): runs of visible, non-blank lines.
    blocks: list[Block] = []
    start = None
    for n in range(first, end + 1):
        line = lines[n] if n < end else None
        if line and line.strip() and start is None:
            start = n
        elif not (line and line.strip()) and start is not None:
            blocks.append(Block(start, n, [(k, k + 1) for k in range(start, n)]))
            start = None
    return blocks
