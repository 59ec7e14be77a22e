"""Markdown runbooks read as a Markdown reader sees them: front matter, headings, blocks.

Use `read_markdown` to turn one file's text into its title, its searchable metadata and its
sections (heading path + the blocks under it); `analysis.split_markdown` packs those into
bounded chunks.

- **Front matter** (YAML between `---` lines, TOML between `+++` lines, at the very start) is
  parsed, never indexed as text: `title` names the runbook, `description`/`summary`, `tags`,
  `keywords`, `aliases` and `categories` become its metadata. YAML is read with `safe_load`
  (no object construction, so a hostile header executes nothing) and only when the block is
  at most `MAX_FRONT_MATTER_CHARS`; a header that does not parse is dropped, not indexed.
- **Structure** comes from markdown-it-py (CommonMark + tables): ATX and setext headings,
  fenced and indented code (a `#` line inside is text), HTML comments and link reference
  definitions (invisible to a reader: not indexed), HTML blocks (a `<table>`, `<details>`:
  read as their text, tags out, entities decoded), MkDocs admonitions (`!!! note` and
  `??? note` with an indented body: read as text, not as a code block).
- **Navigation** is not runbook text: a list whose every item is only a link (a service
  README's "Troubleshooting Pointers"; the pages it links to are indexed themselves) and a
  table-of-contents marker (`[[_TOC_]]`, `[TOC]`, `{:toc}`) and a paragraph that only points
  to other pages ("See [Uninstalling Linkerd](uninstall/).") are left out (`Page.navigation`
  counts them).
- **A site's markup** (`site_markup`): Hugo shortcodes, Docusaurus admonitions, heading and
  fence attribute blocks (`{#id}`: kept as `Section.anchor`) and, in `.mdx` files, ESM lines
  and JSX tags are rendered as the site shows them (text kept, markup gone).
"""

from __future__ import annotations

import html
import re
import tomllib
from dataclasses import dataclass, field
from typing import Any, Final

from markdown_it import MarkdownIt

from workers.sources.knowledge.site_markup import heading_id, render_site_markup

__all__ = [
    "MAX_FRONT_MATTER_CHARS",
    "Block",
    "Page",
    "Section",
    "front_matter",
    "pack",
    "read_markdown",
]

MAX_FRONT_MATTER_CHARS: Final = 64 * 1024
_META_LISTS: Final = ("tags", "keywords", "aliases", "categories")
_META_TEXTS: Final = ("description", "summary")
_MAX_META_ITEMS: Final = 32
_MAX_META_CHARS: Final = 300
_COMMENT: Final = re.compile(r"<!--.*?-->", re.DOTALL)
_HTML_TAG: Final = re.compile(r"</?[A-Za-z][^<>]*>")
_ONLY_COMMENTS: Final = re.compile(r"\s*(?:<!--.*?-->\s*)+", re.DOTALL)
_ADMONITION: Final = re.compile(r"^(?:!!!|\?\?\?\+?)[ \t]+[\w-]+")
_MD: Final = MarkdownIt("commonmark").enable("table")
_LINK_ITEM: Final = re.compile(r"\s*(?:[-*+]|\d+[.)])\s+(?:\[[^\]]*\]\([^)]*\)|<[^>\s]+>)\s*")
# A paragraph that only points elsewhere: "See [Uninstalling Linkerd](uninstall/)."
_INLINE_LINK: Final = re.compile(r"\[[^\]]{0,500}\]\([^)]{0,2000}\)|<https?://[^>\s]{1,2000}>")
_POINTER_WORDS: Final = frozenset(
    "see also refer to the for more details detail information info read check out please"
    " and or our this that page pages docs documentation guide reference here".split()
)
_TOC: Final = re.compile(r"\s*(?:\[\[_?toc_?\]\]|\[toc\]|(?:[-*] toc\s*)?\{:toc\})\s*", re.I)


@dataclass(slots=True)
class Block:
    """One top-level block: lines [start, end) of the page, and the smaller line ranges
    (list items, table rows, lines) it may be split into when it is too large alone."""

    start: int
    end: int
    parts: list[tuple[int, int]] = field(default_factory=list)
    heading: bool = False


@dataclass(slots=True)
class Section:
    """A heading path and the blocks under its heading (the heading itself first), and the
    id its heading's attribute block gives it (`{#id}`, "" if none: `site_markup`)."""

    path: list[str]
    blocks: list[Block] = field(default_factory=list)
    anchor: str = ""


@dataclass(slots=True)
class Page:
    """A Markdown file as read: its title ("" if none), metadata text, sections, and its
    lines as a reader sees them (None where a line is invisible: a comment, a link
    reference definition, a setext underline)."""

    title: str
    meta: str
    sections: list[Section]
    lines: list[str | None]
    navigation: int = 0  # link-only lists and TOC markers left out


def _strings(value: Any) -> list[str]:
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return [str(value)[:_MAX_META_CHARS]]
    if isinstance(value, list):  # strings only, never nested lists: YAML aliases can nest a
        # list in itself 32 times per level (a kilobyte header, 32**8 items to walk)
        return [v[:_MAX_META_CHARS] for v in value[:_MAX_META_ITEMS] if isinstance(v, str)]
    return []


def _parse_header(fence: str, block: str) -> dict[str, Any]:
    try:
        if fence == "+++":
            data: Any = tomllib.loads(block)
        else:
            import yaml

            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            data = yaml.load(block, Loader=loader)  # a safe loader: no object construction
    except Exception:  # any malformed header is dropped, never indexed
        return {}
    return data if isinstance(data, dict) else {}


def front_matter(text: str) -> tuple[dict[str, Any], str]:
    """The parsed front matter (empty if none or unparsable) and the text after it. A block
    that opens but never closes is not front matter (`---` is then a thematic break)."""
    body = text.removeprefix("\ufeff")
    first, _, rest = body.partition("\n")
    fence = first.rstrip()
    if fence not in ("---", "+++"):
        return {}, text
    closers = ("---", "...") if fence == "---" else ("+++",)
    offset = 0
    for line in rest.splitlines(keepends=True):
        if line.rstrip() in closers:
            block = rest[:offset]
            meta = _parse_header(fence, block) if len(block) <= MAX_FRONT_MATTER_CHARS else {}
            return meta, rest[offset + len(line) :]
        offset += len(line)
    return {}, text


def _meta_text(meta: dict[str, Any]) -> str:
    parts = [s for key in _META_TEXTS for s in _strings(meta.get(key))]
    parts += [s for key in _META_LISTS for s in _strings(meta.get(key))]
    return " · ".join(p.strip() for p in parts if p.strip())


def _dedent_admonitions(lines: list[str]) -> list[str]:
    """MkDocs admonition bodies (indented under `!!! type`) dedented, so they read as text."""
    out: list[str] = []
    inside = False
    for line in lines:
        if _ADMONITION.match(line):
            inside = True
        elif inside and line.startswith(("    ", "\t")):
            line = line[1:] if line.startswith("\t") else line[4:]
        elif inside and line.strip():
            inside = False
        out.append(line)
    return out


def _block(tokens: list[Any], i: int, lines: list[str | None]) -> tuple[Block | None, int]:
    """The top-level block opened at token i (None if invisible), and the next index."""
    token = tokens[i]
    j = i + 1
    if token.nesting == 1:  # skip to the matching close
        depth = 1
        while depth:
            depth += tokens[j].nesting
            j += 1
    start, end = token.map
    text = "\n".join(ln or "" for ln in lines[start:end])
    if (token.type == "html_block" and _ONLY_COMMENTS.fullmatch(text)) or _navigation(
        token, lines[start:end]
    ):
        lines[start:end] = [None] * (end - start)
        return None, j
    if token.type not in ("fence", "code_block") and "<!--" in text:
        # Inline comments go; a line that held only a comment is invisible.
        cleaned = _COMMENT.sub(lambda m: "\n" * m.group().count("\n"), text).split("\n")
        lines[start:end] = [ln if ln.strip() else None for ln in cleaned]
    if token.type == "html_block":  # a table or <details> as its reader sees it: its text
        lines[start:end] = [_html_text(ln) for ln in lines[start:end]]
    parts = [(n, n + 1) for n in range(start, end)]
    if token.type in ("bullet_list_open", "ordered_list_open"):
        parts = [
            (t.map[0], t.map[1]) for t in tokens[i:j] if t.type == "list_item_open" and t.level == 1
        ]
    visible = any((ln or "").strip() for ln in lines[start:end])
    return (Block(start, end, parts) if visible else None), j


def _html_text(line: str | None) -> str | None:
    """A line of an HTML block as text: tags out, entities decoded, indentation gone; None
    (invisible) when only tags were on it."""
    if line is None:
        return None
    text = html.unescape(_HTML_TAG.sub("", line)).strip()
    return text or None


def _navigation(token: Any, lines: list[str | None]) -> bool:
    """A list of links only, or a table-of-contents marker (module docstring)."""
    visible = [ln for ln in lines if ln and ln.strip()]
    if not visible:
        return False
    if token.type in ("bullet_list_open", "ordered_list_open"):
        return all(_LINK_ITEM.fullmatch(ln) for ln in visible)
    if token.type != "paragraph_open":
        return False
    text = "\n".join(visible)
    return _TOC.fullmatch(text) is not None or _pointer(text)


def _pointer(text: str) -> bool:
    """A paragraph of links and pointer words only ("See [X](x/).", "For more details, see
    also [A](a) and [B](b)."): the pages it links to are indexed themselves."""
    rest, links = _INLINE_LINK.subn(" ", text)
    words = re.findall(r"[^\W\d_]+|\d+", rest.lower())
    return links > 0 and len(words) <= 12 and all(w in _POINTER_WORDS for w in words)


def read_markdown(text: str, *, mdx: bool = False) -> Page:
    """Title, metadata, sections and visible lines of one Markdown file (module docstring);
    `mdx`: the file is MDX (`site_markup`: its imports, exports and component tags go)."""
    meta, body = front_matter(text)
    titles = _strings(meta.get("title"))
    title = titles[0].strip() if titles else ""
    written = body.splitlines()
    rendered, markup_only = render_site_markup(written, mdx=mdx)
    source_lines = _dedent_admonitions(rendered)
    tokens = _MD.parse("\n".join(source_lines))
    lines: list[str | None] = list(source_lines)
    for n, line in enumerate(source_lines):  # link reference definitions: no token covers them
        if line.strip():
            lines[n] = None
    sections = [Section(path=[])]
    stack: list[tuple[int, str]] = []
    navigation = 0
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.map is not None:
            a, b = token.map
            lines[a:b] = source_lines[a:b]
        if token.type == "heading_open":
            level, heading = int(token.tag[1]), tokens[i + 1].content.strip()
            a, b = token.map or (0, 0)
            i += 3
            if token.markup[:1] in ("=", "-"):  # setext: shown as the ATX line it means
                lines[a:b] = [f"{'#' * level} {heading}"] + [None] * (b - a - 1)
            if not heading:
                continue
            if level == 1 and not title:
                title, stack = heading, []
            elif level == 1 and not stack and _same(heading, title):
                stack = []  # the front matter's title again, as the page's first heading
            else:
                stack = [(lvl, h) for lvl, h in stack if lvl < level] + [(level, heading)]
            heading_block = Block(a, a + 1, [(a, a + 1)], heading=True)
            anchor = next((d for ln in reversed(written[a:b]) if (d := heading_id(ln))), "")
            sections.append(Section([h for _, h in stack], [heading_block], anchor))
            continue
        a, b = token.map or (0, 0)
        navigation += _navigation(token, lines[a:b])
        block, i = _block(tokens, i, lines)
        if block is not None:
            sections[-1].blocks.append(block)
    for n in markup_only:  # a line of a site's markup only: not shown
        lines[n] = None
    return Page(title, _meta_text(meta), sections, lines, navigation)


def pack(lines: list[str | None], blocks: list[Block], limit: int) -> list[str]:
    """The blocks' visible text in pieces of at most `limit` characters, cut only between
    blocks, or, for a block too large alone, between its parts (list items, rows, lines); a
    single line longer than `limit` is cut at a space (`_cut`). A piece is the page's
    text from its first line to its last, minus invisible lines: verbatim where the page
    holds no comment or link definition."""
    units: list[tuple[int, int]] = []
    for block in blocks:
        if _size(lines, block.start, block.end) <= limit or len(block.parts) < 2:
            units.append((block.start, block.end))
        else:
            units.extend(block.parts)
    pieces: list[str] = []
    first = last = -1
    for a, b in units:
        if first >= 0 and _size(lines, first, b) > limit:
            pieces.append(_text(lines, first, last))
            first = -1
        first = a if first < 0 else first
        last = b
    if first >= 0:
        pieces.append(_text(lines, first, last))
    out = [part for piece in pieces for part in _cut(piece, limit)]
    return [p.strip() for p in out if p.strip()]


def _cut(piece: str, limit: int) -> list[str]:
    """`piece` in parts of at most `limit` characters, each cut at its last whitespace when
    that is past half the bound (a word stays whole in one chunk), else at the bound (text
    without spaces: CJK, a blob)."""
    parts: list[str] = []
    while len(piece) > limit:
        window = piece[: limit + 1]
        at = max(window.rfind(" "), window.rfind("\n"), window.rfind("\t"))
        at = at if at >= limit // 2 else limit
        parts.append(piece[:at])
        piece = piece[at:]
    return [*parts, piece]


def _text(lines: list[str | None], a: int, b: int) -> str:
    return "\n".join(ln for ln in lines[a:b] if ln is not None).strip()


def _size(lines: list[str | None], a: int, b: int) -> int:
    return sum(len(ln) + 1 for ln in lines[a:b] if ln is not None)


def _same(a: str, b: str) -> bool:
    # "KubePodCrashLooping" is the title "Kube Pod Crash Looping" again.
    def key(s: str) -> str:
        return re.sub(r"[\W_]+", "", s).lower()

    return key(a) == key(b)
