"""How the console renders: one Jinja2 environment with autoescape on for every template, and a
`finalize` that makes invisible characters visible before escaping.

Every `{{ value }}` is escaped by Jinja2 (a payload holding `<script>` is shown as text), and
every plain string first has its control characters (ANSI escapes, NUL, DEL, C1) and bidi
controls (the RTL override U+202E and its kin, which would reorder the text around them)
replaced by their `\\x1b` / `\\u202e` spelling, so a hostile payload shows as what it is.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import jinja2
from markupsafe import Markup

from contracts.text import INVISIBLE_CLASS

__all__ = ["TREE_VALUES", "environment", "visible"]

TEMPLATES: Final = Path(__file__).parent / "templates"
# Values of one stored body the call page shows as a JSON tree (containers and scalars): 200
# a level alone let a 119 KB raw answer of nested lists fill a 14 MB page.
TREE_VALUES: Final = 10_000
# C0 controls but tab and newline, DEL, C1; the bidi embeddings, overrides and isolates, the
# directional marks, and the BOM / zero-width no-break space.
# Also every code point `contracts.text.INVISIBLE` names (tag characters, soft hyphen,
# variation selectors, Hangul fillers, line separators ...): spelled out, never hidden.
_INVISIBLE: Final = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff"
    + INVISIBLE_CLASS
    + "]"
)


def _spell(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str) -> str:
    """`text` with every control, bidi and invisible character spelled out (`\\x1b`, `\\u202e`,
    `\\U000e0041`)."""
    return _INVISIBLE.sub(_spell, text)


def _finalize(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, str) and not isinstance(value, Markup):
        return visible(value)
    return value


def _when(ms: Any) -> str:
    if not isinstance(ms, int) or ms <= 0:
        return ""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _duration(ms: Any) -> str:
    if not isinstance(ms, int | float) or ms < 0:
        return ""
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 120_000:
        return f"{ms / 1000:.1f} s"
    return f"{ms / 60_000:.1f} min"


def _size(n: Any) -> str:
    if not isinstance(n, int):
        return ""
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB"


def _head(items: Iterable[Any], n: int) -> list[Any]:
    return list(itertools.islice(items, n))


def environment() -> jinja2.Environment:
    """The console's templates (autoescaped, strict about undefined names)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        finalize=_finalize,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=["jinja2.ext.loopcontrols"],
    )
    env.globals["tree_values"] = TREE_VALUES
    env.filters.update(when=_when, duration=_duration, size=_size, head=_head)
    return env
