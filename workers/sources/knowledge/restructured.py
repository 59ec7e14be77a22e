"""A reStructuredText runbook as a reader of the rendered page sees it: its title, its
sections by their adornment, without the table of contents.

Sphinx-built internal docs and older runbook collections are `.rst`. Until 2026-12-05 such a
file was plain text: titled by its file name when its title had an overline (`kafka` for
"Kafka broker operations guide"), cut into 700-character pieces across sections with the
bare title as every breadcrumb, its `.. contents::` table of contents the first excerpt.

Read here as docutils reads it, kept small: a section title is a text line under an
adornment line (or between two of the same: an overline) of one repeated punctuation
character, as long as the title; its level is the order in which adornment styles first
appear. A title whose style is used once, first, is the document's title (docutils promotes
it); the sections below it are the breadcrumb's parts. Lines a reader does not see are left
out (None): comments, hyperlink targets (`.. _label:`) and the navigation directives
`contents` and `toctree` with their indented bodies. Every other directive (`.. note::`,
`.. code-block::`) and footnotes (`.. [1]`) stay as written: their text is what a reader
reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

__all__ = ["RestPage", "RestSection", "read_rest"]

_ADORNMENT: Final = re.compile(r"([!-/:-@\[-`{-~])\1{2,}[ \t]*")
_EXPLICIT: Final = re.compile(r"\.\.(?:\s|$)")
_HIDDEN_DIRECTIVE: Final = re.compile(r"\.\.\s+(?:contents|toctree)::", re.IGNORECASE)
_DIRECTIVE: Final = re.compile(r"\.\.\s+[\w:+-]+::")  # a directive's body is shown
_SUBSTITUTION: Final = re.compile(r"\.\.\s+\|[^|]+\|\s+[\w:+-]+::")  # `.. |name| image::`


@dataclass(slots=True)
class RestSection:
    """A heading path (the document title not included) and its lines [start, end), its
    title lines first (up to `body`)."""

    path: list[str]
    start: int
    end: int
    body: int


@dataclass(slots=True)
class RestPage:
    """The file's lines (None where a reader sees nothing), its title ("" if none), and its
    sections in order (a first one with an empty path holds what precedes any title)."""

    lines: list[str | None]
    title: str = ""
    sections: list[RestSection] = field(default_factory=list)


def read_rest(text: str) -> RestPage:
    """The page of a reStructuredText file (see the module docstring)."""
    lines: list[str | None] = list(text.splitlines())
    _hide_explicit_markup(lines)
    titles = _titles(lines)
    styles = [style for _, _, _, style in titles]
    page = RestPage(lines)
    body = 0  # the first section: the document's title (if any) and what follows it
    if titles and styles.count(styles[0]) == 1:  # a lone first style: the document's title
        page.title, body, styles = titles[0][2], titles[0][1], styles[1:]
        titles = titles[1:]
    order = list(dict.fromkeys(styles))
    path: list[str] = []
    starts = [start for start, _, _, _ in titles] + [len(lines)]
    page.sections.append(RestSection([], 0, starts[0], body))
    for (start, body, name, style), end in zip(titles, starts[1:], strict=True):
        level = order.index(style)
        path = [*path[:level], name]
        page.sections.append(RestSection(list(path), start, end, body))
    return page


def _titles(lines: list[str | None]) -> list[tuple[int, int, str, tuple[str, bool]]]:
    """(first line, end line, title, (adornment character, overlined)) of each title."""
    found: list[tuple[int, int, str, tuple[str, bool]]] = []
    n = 0
    while n + 1 < len(lines):
        over = _adornment(lines[n])
        if over and n + 2 < len(lines) and _title_text(lines[n + 1]):
            under = _adornment(lines[n + 2])
            if under == over and _blank_before(lines, n):
                found.append((n, n + 3, str(lines[n + 1]).strip(), (over, True)))
                n += 3
                continue
        text = _title_text(lines[n])
        under = _adornment(lines[n + 1])
        if (
            text
            and under
            and _blank_before(lines, n)
            and len(str(lines[n + 1]).rstrip()) >= len(text)
        ):
            found.append((n, n + 2, text, (under, False)))
            n += 2
            continue
        n += 1
    return found


def _adornment(line: str | None) -> str:
    return line[0] if line and _ADORNMENT.fullmatch(line) else ""


def _title_text(line: str | None) -> str:
    if not line or not line.strip() or _ADORNMENT.fullmatch(line) or _EXPLICIT.match(line):
        return ""
    return line.strip()


def _blank_before(lines: list[str | None], n: int) -> bool:
    # A title starts a block: the first line, or after a blank (or hidden) line.
    return n == 0 or not (lines[n - 1] or "").strip()


def _hide_explicit_markup(lines: list[str | None]) -> None:
    """Comments, hyperlink targets and navigation directives become None, with the indented
    lines that belong to them."""
    n = 0
    while n < len(lines):
        line = lines[n] or ""
        shown = _DIRECTIVE.match(line) or _SUBSTITUTION.match(line) or line[3:4] == "["
        if not _EXPLICIT.match(line) or (shown and not _HIDDEN_DIRECTIVE.match(line)):
            n += 1
            continue
        lines[n] = None
        n += 1
        while n < len(lines) and (not (lines[n] or "").strip() or (lines[n] or "")[:1].isspace()):
            if (lines[n] or "").strip():
                lines[n] = None
            n += 1
