"""Text from Redis made safe for a terminal.

Stream entries, consumer names and tool call ids are written by other processes (a submitter
may be hostile): printed raw, an OSC or CSI sequence could retitle the terminal, hide lines or
fake output, and a bidi override could reorder what a reader sees. Every such character is
shown as a visible escape instead (`\\x1b`, `\\x9b`, `\\u202e`), and rich cells are plain
`Text`, never markup (`[red]` in a value stays `[red]`).
"""

from __future__ import annotations

import re
from typing import Any, Final

__all__ = ["safe_cell", "safe_json", "safe_text"]

# C0 controls (ESC among them) and DEL, C1 controls (CSI 0x9b, OSC 0x9d, ...), the line and
# paragraph separators, and the bidi embeddings, overrides, isolates and marks.
_UNSAFE_RE: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]"
)


# The same less the line feed: JSON escapes it inside strings, so a raw one is indentation.
_UNSAFE_JSON_RE: Final = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def safe_text(value: object) -> str:
    """`str(value)` with every control, separator and bidi character as a visible escape."""
    return _UNSAFE_RE.sub(_escape, "" if value is None else str(value))


def safe_cell(value: object) -> Any:
    """A rich `Text` of `safe_text(value)`: printed as is, never read as markup."""
    from rich.text import Text

    return Text(safe_text(value))


def safe_json(line: str) -> str:
    """A JSON text with those characters as `\\uXXXX` escapes: the same JSON value, safe to
    print (JSON has no raw control characters outside strings but its indentation's line
    feeds, which are kept)."""
    return _UNSAFE_JSON_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", line)
