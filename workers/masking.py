"""A URL's password masked: the one rule for every text that leaves the worker.

The worker's own log lines (`workers.logging_setup`) and the log records it serves as evidence
(`workers.sources.logs.masking`, `aci-evidence check`'s example lines) both mask with
`without_url_password`, so a password one of them shows the other cannot hide.

The rule errs towards masking: `scheme://user:` (or `:\\/\\/`, a URL in JSON that escapes its
slashes; a user may be empty, a mail address or `DOMAIN\\user`) opens a password that runs to
the last `@` before whitespace, so a password holding `@`, `/`, `:` or `"` is masked whole.
Its cost: a port before an `@` in the path (`http://npm:4873/@scope/pkg`) is masked too.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["MASK", "without_url_password"]

MASK: Final = "***"
# `://` or `:\/\/`, then the user: anything up to the next `/`, `:` or whitespace (so the
# scan from each opening stops at the next one: linear, however hostile the line).
_OPENING: Final = re.compile(r":(?:\\?/){2}[^/\s:]*:")
_SPACE: Final = re.compile(r"\s")


def without_url_password(text: str) -> str:
    """The text with every URL's password shown as `***`."""
    if "@" not in text or "/" not in text:
        return text
    parts: list[str] = []
    done = pos = 0
    while (opening := _OPENING.search(text, pos)) is not None:
        start = opening.end()
        space = _SPACE.search(text, start)
        pos = len(text) if space is None else space.start()
        at = text.rfind("@", start, pos)
        # no `@` before the whitespace: no opening up to it has a password either
        if at >= 0:
            parts += (text[done:start], MASK)
            done = at
    return "".join(parts) + text[done:] if parts else text
