"""A documentation site's markup in a Markdown runbook, rendered as the site's reader sees it.

`render_site_markup` takes a page's lines and returns as many lines (markdown-it maps tokens
to line numbers, so a line is rewritten or blanked, never removed) and the numbers of the
lines it blanked (invisible: not shown in an excerpt), outside fenced code (Hugo shortcodes
inside it too, as Hugo renders them there):

- **Hugo shortcodes**: `{{< ref "x.md" >}}` / `relref` become the target's name (`x`); any
  other shortcode tag (`{{< note >}}`, `{{< /note >}}`, `{{% include "…" %}}`,
  `{{< figure … >}}`) is dropped and what it encloses stays (an include's file is not read);
  an escaped one (`{{</* note */>}}`) is shown as Hugo shows it, `{{< note >}}`.
- **Docusaurus admonitions** (`:::warning Data loss` … `:::`): the fences go, the title and
  the body stay. A fence of `mdx-code-block` is no code: Docusaurus renders what it holds as
  MDX (`<Tabs>` around code blocks), so its fences go and its content is read as MDX.
- **MDX** (`.mdx`, Docusaurus, Nextra), with `mdx=True`: `import`/`export` statements (ESM,
  several lines too), lines that hold only JSX or HTML tags (`<Tabs>`, `</TabItem>`, an
  opening tag over several lines), `{/* comments */}`, and component tags inside a line
  (`<Highlight color="red">text</Highlight>` reads `text`) go; what components enclose stays.
- **Attribute blocks** (Hugo, kramdown, Pandoc): a heading's trailing `{#id}`, `{.class #id}`,
  `{: #id}` or `{-}` goes (ATX and setext; `heading_id` keeps the id, which names the section
  a link's `#fragment` points to); a fence's `{class=disable-copy}`, `{linenos=table}` goes
  from its info string (```` ```{.python .numberLines} ```` reads ```` ```python ````, the
  language Pandoc takes from the first class). Braces that hold no attributes stay
  (`## Keep ${HOME}`).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Final

__all__ = ["heading_id", "render_site_markup"]

_FENCE: Final = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_REF: Final = re.compile(r"\{\{([<%])\s*(?:rel)?ref\s+\"?([^\"\s>%}]*)\"?\s*[>%]\}\}")
# Every pattern here is linear in its line: no two adjacent parts match the same characters
# (a tag or shortcode left open over 64 KB of spaces backtracked for minutes).
_SHORTCODE: Final = re.compile(r"\{\{[<%] *+/?+ *+[A-Za-z][\w./-]*+(?:\s[^{}]*?)?[>%]\}\}")
_ADMONITION: Final = re.compile(r"^ {0,3}:::+\s*(?:[A-Za-z][\w-]*)?(?:\[([^\]]*)\]|\s+(.*))?\s*$")
_IMPORT: Final = re.compile(r"^import\b")
_IMPORT_END: Final = re.compile(r"""(?:\bfrom\s*['"][^'"]*['"]|^\s*['"][^'"]*['"])\s*;?\s*$""")
_EXPORT: Final = re.compile(r"^export\b")
_TAG: Final = r"<(?:/?[A-Za-z][\w.:-]*+(?:\s[^<>]*+)?)?>"
_TAGS_ONLY: Final = re.compile(rf"\s*+(?:{_TAG}\s*+)+")
_TAG_OPEN: Final = re.compile(r"^\s*+<[A-Za-z][\w.:-]*+(?:\s[^<>]*+)?$")  # its `>` on a later line
_COMPONENT: Final = re.compile(r"</?[A-Z][\w.]*+(?:\s[^<>]*+)?>")
_ATX: Final = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
_SETEXT_UNDERLINE: Final = re.compile(r" {0,3}(?:=++|-++)[ \t]*+$")
# One attribute: an id, a class, a key=value (quoted or not), or Pandoc's `-` (unnumbered).
_ATTR: Final = r"""(?:[#.][\w:.-]++|[\w-]++=(?:"[^"]*+"|'[^']*+'|[^\s"'}]++)|-)"""
_ATTRS: Final = re.compile(rf"\{{:?[ \t]*+{_ATTR}(?:[ \t,]++{_ATTR})*+[ \t]*+\}}")
_FENCE_WORDS: Final = re.compile(r"[^\s,{}]++")


def _attribute_block(line: str) -> int:
    """Where a line's trailing attribute block (`{#id .class}`) starts, or -1: found from the
    last `{`, never searched for (linear in the line)."""
    text = line.rstrip()
    brace = text.rfind("{") if text.endswith("}") else -1
    if brace <= 0 or text[brace - 1] not in " \t" or not _ATTRS.fullmatch(text, brace):
        return -1
    return brace


def heading_id(line: str) -> str:
    """The id a heading line's attribute block gives it (`## Title {#id}` -> `id`), or ""."""
    brace = _attribute_block(line)
    if brace < 0:
        return ""
    ids = [w[1:] for w in line[brace:].strip("{}: \t").split() if w.startswith("#")]
    return ids[0] if ids else ""


def _without_attributes(line: str, underline: str) -> str:
    # Only on a heading: ATX, or the text line of a setext heading.
    if not (_ATX.match(line) or (line.strip() and _SETEXT_UNDERLINE.match(underline))):
        return line
    brace = _attribute_block(line)
    return line if brace < 0 else line[:brace].rstrip()


def _fence_info(info: str) -> str:
    """A fence's info string without its attributes: `bash {class=x}` -> `bash`; Pandoc's
    `{.python .numberLines}` -> `python` (its first class), `{linenos=table}` -> ""."""
    brace = info.find("{")
    if brace < 0:
        return info
    if info[:brace].strip():
        return info[:brace].rstrip()
    words: list[str] = _FENCE_WORDS.findall(info)
    classes = [w[1:] for w in words if w.startswith(".")]
    bare = words[:1] if words and words[0][0] not in "#." and "=" not in words[0] else []
    return (classes or bare or [""])[0]


def _ref_name(target: str) -> str:
    # "/docs/kubelet/restart.md#steps" -> "restart"; "/docs/kubelet/" -> "kubelet".
    path = PurePosixPath(target.split("#", 1)[0] or "x")
    name = path.parent.name if path.stem in ("_index", "index") else path.stem
    return name or target


def _shortcodes(line: str) -> str:
    # `{{</* note */>}}` is Hugo's escape: shown as `{{< note >}}`, never rendered.
    out: list[str] = []
    for n, part in enumerate(_between(line, ("{{</*", "{{%/*"), ("*/>}}", "*/%}}"))):
        if n % 2:
            part = part.replace("{{</*", "{{<").replace("{{%/*", "{{%")
            out.append(part.replace("*/>}}", ">}}").replace("*/%}}", "%}}"))
        else:
            out.append(_SHORTCODE.sub("", _REF.sub(lambda m: _ref_name(m.group(2)), part)))
    return "".join(out)


def _between(line: str, openers: tuple[str, ...], closers: tuple[str, ...]) -> list[str]:
    """`line` split into outside, inside, outside, ... of opener...closer spans (closer
    included), scanning once: an opener never closed is outside."""
    parts: list[str] = []
    at = 0
    while True:
        starts = [i for i in (line.find(o, at) for o in openers) if i >= 0]
        if not starts:
            break
        start = min(starts)
        ends = [i + len(c) for c in closers if (i := line.find(c, start)) >= 0]
        if not ends:
            break
        end = min(ends)
        parts += [line[at:start], line[start:end]]
        at = end
    return [*parts, line[at:]]


def _without_jsx_comments(line: str) -> str:
    return "".join(
        line_part for n, line_part in enumerate(_between(line, ("{/*",), ("*/}",))) if not n % 2
    )


def render_site_markup(lines: list[str], *, mdx: bool = False) -> tuple[list[str], set[int]]:
    """The page's lines with the site's markup rendered or dropped, and the lines that held
    only markup (module docstring)."""
    out = _rendered(lines, mdx)
    hidden = {n for n, (a, b) in enumerate(zip(lines, out, strict=True)) if a.strip() and not b}
    return out, hidden


def _rendered(lines: list[str], page_mdx: bool) -> list[str]:
    out: list[str] = []
    fence = ""
    unwrap = ""  # the closing fence of an `mdx-code-block`: MDX inside, not code
    skip_until: re.Pattern[str] | None = None  # the line that ends an ESM statement or tag
    depth = 0  # brackets open in an `export` statement
    for n, original in enumerate(lines):
        line = original
        mdx = page_mdx or bool(unwrap)
        if unwrap and not skip_until and line.strip() == unwrap:
            unwrap = ""
            out.append("")
            continue
        if fence:  # code as written, but Hugo renders its shortcodes there too
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = ""
            out.append(_shortcodes(line) if "{{" in line else line)
            continue
        if skip_until is not None:
            if skip_until.search(line):
                skip_until = None
            out.append("")
            continue
        if depth > 0:
            depth += _balance(line)
            out.append("")
            continue
        opened = _FENCE.match(line)
        if opened and line[opened.end() :].strip() == "mdx-code-block" and not unwrap:
            unwrap = opened.group(1)  # Docusaurus renders its content as MDX
            out.append("")
            continue
        if opened:
            fence = opened.group(1)
            info = line[opened.end() :]
            out.append(line if "{" not in info else line[: opened.end()] + _fence_info(info))
            continue
        if mdx and (_IMPORT.match(line) or _EXPORT.match(line)):
            if _IMPORT.match(line) and not _IMPORT_END.search(line):
                skip_until = _IMPORT_END
            elif _EXPORT.match(line):
                depth = max(_balance(line), 0)
            out.append("")
            continue
        if "{{" in line:
            line = _shortcodes(line)
        if "{" in line:
            line = _without_attributes(line, lines[n + 1] if n + 1 < len(lines) else "")
        admonition = _ADMONITION.match(line)
        if admonition:
            out.append((admonition.group(1) or admonition.group(2) or "").strip())
            continue
        if mdx:
            line = _without_jsx_comments(line) if "{/*" in line else line
            if _TAGS_ONLY.fullmatch(line):
                line = ""
            elif _TAG_OPEN.match(line):
                skip_until, line = re.compile(r">\s*$"), ""
            else:
                line = _COMPONENT.sub("", line)
        out.append(line if line.strip() or line == original else "")  # markup only: blank
    return out


def _balance(line: str) -> int:
    return sum(line.count(c) for c in "{[(") - sum(line.count(c) for c in "}])")
