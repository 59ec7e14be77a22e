"""What the runbook folder gives `lookup_knowledge`, checked before a worker indexes it
(`aci-evidence check`, docs/knowledge.md "Checking the folder").

The same walk and reads as the index build (`files.runbook_files`, `files.read_inside_as`,
`analysis.split_document`), without building it: each runbook's title and how many sections
it is served in, and the problems: no folder, no runbook, a runbook over the size cap, one
that cannot be read (permission denied; a folder that cannot be listed) or is no text
(binary data) or holds no text, and documents of other kinds the index passes over
(`.adoc`, `.html`: an export no lookup will ever find). What a checked-out runbook site also
holds is said, not a problem: a Hugo section page (`_index.md`, front matter only), images,
scripts, LICENSE and OWNERS files (`KnowledgeCheck.passed_over`). Nothing is written anywhere.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import msgspec

from workers.sources.knowledge.analysis import PLAIN_SUFFIXES, split_document
from workers.sources.knowledge.files import (
    DIR_FLAGS,
    DOCUMENT_SUFFIXES,
    RUNBOOK_SUFFIXES,
    NotIndexed,
    TooLarge,
    max_file_bytes_from_env,
    other_kinds,
    read_inside_as,
    runbook_files,
)
from workers.sources.knowledge.markdown import (
    MAX_FRONT_MATTER_CHARS,
    Page,
    front_matter,
    read_markdown,
)
from workers.sources.knowledge.settings import relative_note

__all__ = ["KnowledgeCheck", "RunbookCheck", "check_knowledge"]

# The bundled runbooks (`index.DEFAULT_KNOWLEDGE_DIR`, named here without importing the index).
_BUNDLED: Final = Path(__file__).with_name("runbooks")
MAX_LISTED: Final = 200  # runbooks listed one by one; all are counted
_SECTION_PAGES: Final = ("_index.md", "_index.markdown")  # Hugo's list page of a folder


class RunbookCheck(msgspec.Struct, kw_only=True):
    """One runbook as the index would serve it."""

    source: str  # its path under the folder
    title: str = ""
    sections: int = 0
    problem: str = ""
    note: str = ""  # said beside it, not a problem (a Hugo section page)
    encoding: str = ""  # what a file that is not UTF-8 was read as ("Big5 (traditional Chinese)")


class KnowledgeCheck(msgspec.Struct, kw_only=True):
    """The knowledge source a worker would open."""

    kind: str  # "embedded" (the runbook folder) or "rag_http" (ACI_RAG_URL)
    folder: str = ""
    runbooks: int = 0
    sections: int = 0
    listed: list[RunbookCheck] = []
    others: dict[str, int] = {}  # files passed over, by suffix
    problem: str = ""

    def problems(self) -> list[str]:
        """What an operator should look at, one line each."""
        if self.problem:
            return [f"knowledge: {self.problem}"]
        out = [f"knowledge: {r.source}: {r.problem}" for r in self.listed if r.problem]
        if self.kind == "embedded" and not self.sections:
            suffixes = ", ".join(RUNBOOK_SUFFIXES)
            out.append(f"knowledge: {self.folder} holds no runbook text ({suffixes})")
        documents = {k: n for k, n in self.others.items() if k in DOCUMENT_SUFFIXES}
        if documents:
            out.append(
                f"knowledge: {sum(documents.values())} files are not runbooks and are not "
                f"read ({other_kinds(documents)})"
            )
        return out

    def passed_over(self) -> str:
        """The files that are no documents (images, scripts, LICENSE), said, not a problem:
        `27 other files are not read (19 no suffix, 6 .png, 2 .sh)`, or ""."""
        rest = {k: n for k, n in self.others.items() if k not in DOCUMENT_SUFFIXES}
        if not rest:
            return ""
        return f"{sum(rest.values())} other files are not read ({other_kinds(rest)})"


def check_knowledge(env: Mapping[str, str]) -> KnowledgeCheck:
    """The folder named by ACI_KNOWLEDGE_DIR (else the bundled runbooks), read as the index
    build reads it; with ACI_RAG_URL, only that the service is what answers."""
    if env.get("ACI_RAG_URL", "").strip():
        return KnowledgeCheck(kind="rag_http")
    folder = Path(env.get("ACI_KNOWLEDGE_DIR", "").strip() or _BUNDLED)
    max_bytes = max_file_bytes_from_env(env)
    check = KnowledgeCheck(kind="embedded", folder=str(folder))
    try:
        root = folder.resolve(strict=True)
        root_fd = os.open(root, DIR_FLAGS)
    except (OSError, RuntimeError):
        where = relative_note(str(folder))
        check.problem = (
            f"ACI_KNOWLEDGE_DIR {folder} is not a readable folder"
            + (f" ({where.removeprefix('; ')})" if where else "")
            + ": lookups fail"
        )
        return check
    others: Counter[str] = Counter()
    refused: list[tuple[str, str]] = []
    try:
        for source, path in runbook_files(root, others, refused):
            runbook = _runbook(root_fd, source, path.relative_to(root), max_bytes)
            check.runbooks += 1
            check.sections += runbook.sections
            if len(check.listed) < MAX_LISTED or runbook.problem:
                check.listed.append(runbook)
    finally:
        os.close(root_fd)
    check.listed += [
        RunbookCheck(source=name, problem=f"{why}: not indexed") for name, why in refused
    ]
    check.others = dict(others)
    return check


def _runbook(root_fd: int, source: str, rel: Path, max_bytes: int) -> RunbookCheck:
    check = RunbookCheck(source=source)
    try:
        read = read_inside_as(root_fd, rel, max_bytes)
    except TooLarge as big:
        check.problem = (
            f"{big.size} bytes, over ACI_KNOWLEDGE_MAX_FILE_BYTES ({max_bytes}): not indexed"
        )
        return check
    except NotIndexed as why:  # permission denied, binary data
        check.problem = f"{why.reason}: not indexed"
        return check
    if read is None:
        check.problem = "cannot be read (replaced or unreadable): not indexed"
        return check
    text, check.encoding = read
    chunks = split_document(text, source)
    check.sections = len(chunks)
    if chunks:
        check.title = chunks[0].title
        if not source.lower().endswith(PLAIN_SUFFIXES):
            check.problem = _header_problem(text)
    elif rel.name in _SECTION_PAGES and text.lstrip("\ufeff")[:3] in ("---", "+++"):
        meta, _ = front_matter(text)
        title = meta.get("title")
        check.title = title.strip() if isinstance(title, str) else ""
        check.note = "a section page (front matter only): not indexed"
    elif source.lower().endswith(PLAIN_SUFFIXES):
        check.problem = "holds no text: nothing of it can be found"
    else:
        page = _page(text, source)
        check.title = page.title or rel.stem  # as the index would title it
        check.note = _passed_over(page, text, source)
        if not check.note:
            check.title, check.problem = "", "holds no text: nothing of it can be found"
    return check


_KEY_LINE: Final = re.compile(r"[A-Za-z_][\w-]*\s*[:=]")  # `title: …` or `title = …`


def _header_problem(text: str) -> str:
    """Why a runbook's front matter is not used ("" when it is, or there is none): it does
    not parse (YAML, TOML) or is no mapping, or it opens and never closes."""
    body = text.removeprefix("\ufeff")
    fence, _, rest = body.partition("\n")
    if fence.rstrip() not in ("---", "+++"):
        return ""
    meta, after = front_matter(text)
    if after is text:  # never closed: read as text, `---` a thematic break
        first = next((ln for ln in rest.splitlines() if ln.strip()), "")
        if _KEY_LINE.match(first):
            return "its front matter is not closed (no second `---`): read as text"
        return ""
    header = rest[: len(rest) - len(after)]
    if meta or not header.strip(" \t\r\n-+."):
        return ""
    unused = "its title, description and tags are not used"
    if fence.rstrip() == "+++":
        return f"its front matter does not parse as TOML: {unused}"
    block = "".join(header.splitlines(keepends=True)[:-1])  # without its closing `---`
    if len(block) > MAX_FRONT_MATTER_CHARS:
        return f"its front matter is over {MAX_FRONT_MATTER_CHARS // 1024} KiB, not read: {unused}"
    shape = _yaml_shape(block)
    if shape:
        return f"its front matter is {shape}, not `key: value` lines (`title: …`): {unused}"
    return f"its front matter does not parse as YAML: {unused}"


def _yaml_shape(header: str) -> str:
    """What a YAML header that parses but is no mapping is ("a YAML list of 2 items"), or ""
    when it does not parse (the safe loader, as `markdown.front_matter` reads it)."""
    import yaml

    try:
        data = yaml.load(header, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except Exception:  # any malformed header: "does not parse"
        return ""
    if isinstance(data, list):
        items = "1 item" if len(data) == 1 else f"{len(data)} items"
        return f"a YAML list ({items}: `- …` lines)"
    if data is None or isinstance(data, dict):
        return ""
    return "a single YAML value"


def _page(text: str, source: str) -> Page:
    return read_markdown(text, mdx=source.lower().endswith(".mdx"))


def _passed_over(page: Page, text: str, source: str) -> str:
    """Why a Markdown page without a chunk is no problem ("" when it is one): a page of links,
    a redirect, or a page whose text the site generates (shortcodes, MDX components)."""
    meta, body = front_matter(text)
    if page.navigation:
        return "only links to other pages: not indexed"
    if _redirects(meta) and not body.strip():
        return "a redirect (front matter only): not indexed"
    if source.lower().endswith(".mdx") or re.search(r"\{\{[<%]", body):
        return "its text is generated by the site (shortcodes or components only): not indexed"
    return ""


def _redirects(meta: dict[str, object]) -> bool:
    """Whether front matter makes the page a redirect (Hugo `layout: redirect` or a
    `redirect` parameter, Jekyll's `redirect_to`)."""
    params = meta.get("params")
    nested = params if isinstance(params, dict) else {}
    keys = {*meta, *nested}
    return meta.get("layout") == "redirect" or bool(
        keys & {"redirect", "redirect_to", "redirectTo"}
    )
