"""A URL's password masked: the one rule for every text that leaves the worker.

The worker's own log lines (`workers.logging_setup`) and the log records it serves as evidence
(`workers.sources.logs.masking`, `aci-evidence check`'s example lines) both mask with
`without_url_password`, so a password one of them shows the other cannot hide.

The rule errs towards masking: `scheme://user:` (or `:\\/\\/`, a URL in JSON that escapes its
slashes, `:\\\\/\\\\/` in JSON inside JSON; a user may be empty, a mail address or `DOMAIN\\user`)
opens a password that runs to the last `@` before whitespace, so a password holding `@`, `/`,
`:` or `"` is masked whole. Its cost: a port before an `@` in the path
(`http://npm:4873/@scope/pkg`) is masked too.

A URL inside a JSON string (right after its opening quote, or with its slashes escaped) ends at
the string's closing quote (`"` then `,`, `}` or `]`; a quote inside it is `\\"`) when an `@`
comes before it: compact JSON has no space, and the password would otherwise run to a later
member's mail address, which would be shown as the URL's host. No `@` before it: the rule above.
Its cost: a quoted URL that is no JSON, its password holding `@` and later a bare `",` (`"}`,
`"]`), shows the part of it after that quote (JSON escapes it: `\\",`).
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["MASK", "without_url_password"]

MASK: Final = "***"
# `://`, `:\/\/` or deeper escaped, then the user: anything up to the next `/`, `:` or
# whitespace (so the scan from each opening stops at the next one: linear, however hostile).
_OPENING: Final = re.compile(r":(?:\\*/){2}[^/\s:]*:")
_SPACE: Final = re.compile(r"\s")
# a JSON string's closing quote: not escaped, then the next member or the container's end
_JSON_END: Final = re.compile(r'(?<!\\)"[,}\]]')
_SCHEME: Final = re.compile(r'"[A-Za-z][A-Za-z0-9+.-]{0,30}\Z')


def without_url_password(text: str) -> str:
    """The text with every URL's password shown as `***`."""
    if "@" not in text or "/" not in text:
        return text
    parts: list[str] = []
    done = pos = 0
    space = -1  # the whitespace ending the current token (reused: linear in many URLs on it)
    while (opening := _OPENING.search(text, pos)) is not None:
        start = opening.end()
        if space < start:
            found = _SPACE.search(text, start)
            space = len(text) if found is None else found.start()
        pos = space
        at = -1
        escaped = not text.startswith("://", opening.start())  # its slashes escaped: JSON
        if escaped or _SCHEME.search(text, max(0, opening.start() - 32), opening.start()):
            close = _JSON_END.search(text, start, space)
            if close is not None:
                at = text.rfind("@", start, close.start())
                if at >= 0:
                    pos = close.start()  # later members may hold URLs of their own
        if at < 0:
            # no `@` before the whitespace: no opening up to it has a password either
            at = text.rfind("@", start, space)
        if at >= 0:
            parts += (text[done:start], MASK)
            done = at
    return "".join(parts) + text[done:] if parts else text
