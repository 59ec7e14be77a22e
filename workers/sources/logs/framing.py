"""What frames the event in a log message, for the template miner (`templates`): the methods
of HTTP (a request, its method and target, is a value of its line) and the context prefixes
that open a message and name a request or an object by its id (oslo.log's `[req-<UUID> <HEX>
<HEX> - - -] [instance: <UUID>]`, worked on masked tokens)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

__all__ = ["METHODS", "context_length", "merge_contexts"]

# The methods of HTTP: the path after one is a request's target, not a file.
METHODS: Final = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE")

_CONTEXT_TOKENS: Final = 8


def context_length(tokens: Sequence[str]) -> int:
    """How many tokens of a masked message are context prefixes that open it and name a
    request or an object by its id: bracketed groups holding a placeholder (oslo.log's
    `[req-<UUID> <HEX> <HEX> - - -] [instance: <UUID>]`), or oslo.log's empty context `[-]`;
    0 when there are none, or nothing after them."""
    end = 0
    while end < len(tokens) and tokens[end].startswith("["):
        last = min(end + _CONTEXT_TOKENS, len(tokens))
        close = next((j for j in range(end, last) if tokens[j].endswith("]")), -1)
        empty = close == end and tokens[end] == "[-]"
        if close < 0 or not (empty or any("<" in t for t in tokens[end : close + 1])):
            break
        end = close + 1
    return end if end < len(tokens) else 0


def merge_contexts(contexts: set[tuple[str, ...]]) -> tuple[str, ...]:
    """The context prefix one template shows for the prefixes of its lines: a token they all
    share stays, another is `<*>` (keeping an opening `[` and a closing `]`); prefixes of
    another length are one `[<*>]`."""
    if len(contexts) == 1:
        return next(iter(contexts))
    if len({len(c) for c in contexts}) > 1:
        return ("[<*>]",)
    merged = []
    for column in zip(*contexts, strict=True):
        if len(set(column)) == 1:
            merged.append(column[0])
        else:  # the brackets that open and close a group stay
            opens = "[" if all(t.startswith("[") for t in column) else ""
            merged.append(opens + ("<*>]" if all(t.endswith("]") for t in column) else "<*>"))
    return tuple(merged)
