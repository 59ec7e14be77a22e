"""What frames the event in a log message, for the template miner (`templates`): an HTTP
request (its method and route name an endpoint) and the context prefixes that open a message
and name a request or an object by its id (oslo.log's `[req-<UUID> <HEX> <HEX> - - -]
[instance: <UUID>]`). Both work on masked tokens."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

__all__ = ["METHODS", "context_length", "merge_contexts", "merge_routes", "request_index"]

# The methods of HTTP: the path after one is a request's target (its route), not a file.
METHODS: Final = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE")

_CONTEXT_TOKENS: Final = 8
# Routes of one method in templates alike but for the route: this many or more are one
# template with the route `<*>` (a scanner probing thousands of paths is one event, not a
# template per path that pushes the real ones past `templates.MAX_KEYS`); fewer stay
# endpoints apart.
MANY_ROUTES: Final = 32


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


# A method word (quoted as a request line starts) followed by a route.
_METHOD: Final = re.compile('"?(?:' + "|".join(METHODS) + ")")


def request_index(tokens: Sequence[str]) -> int:
    """Where a request opens in masked tokens (`"GET /v2/<HEX>/servers/detail`: the method,
    then the route that names the endpoint with it), or -1."""
    if " /" not in " ".join(tokens):
        return -1  # the common case, told at C speed
    return next(
        (
            i
            for i in range(len(tokens) - 1)
            if tokens[i + 1].startswith("/") and _METHOD.fullmatch(tokens[i])
        ),
        -1,
    )


def merge_routes(templates: dict[int, tuple[str, ...]]) -> dict[int, tuple[str, ...]]:
    """Templates (masked tokens) alike but for a request's route, `MANY_ROUTES` or more of
    them, as one with the route `<*>`: a route is never a variable word to the miner, so
    every path a scanner probes was a template of its own."""
    by_route: dict[tuple[str, ...], list[int]] = {}
    for cid in sorted(templates):
        tokens = templates[cid]
        at = request_index(tokens) + 1
        if at > 0:
            by_route.setdefault((*tokens[:at], "<*>", *tokens[at + 1 :]), []).append(cid)
    out = dict(templates)
    for gapped, cids in by_route.items():
        if len(cids) >= MANY_ROUTES:
            out.update(dict.fromkeys(cids, gapped))
    return out
