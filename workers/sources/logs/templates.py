"""Log templates mined like Drain, the same on every backend (FILE, CLICKHOUSE, MOCK).

Use `mask` on each message a backend reads (context-free, cached per text by the caller if it
likes) and `mine` over the distinct masked messages of one answer, in the order their first
record appeared: the result maps every masked message to its template. A backend keeps one
figure per masked message (bounded by `MAX_KEYS`), mines once at the end of the call and
merges the figures of the messages that share a template. Given the same matched lines the
templates are the same whichever backend read them and whatever the order of arrival, which
replay relies on.

Masking replaces what varies in a real log by a typed placeholder before Drain sees the line:
`<UUID>`, `<IP>` (v4 or v6; a port stays apart as `<IP>:<NUM>`), `<HOST>` (a host name before
a port), `<PATH>` (`/var/log/x.log`, `C:\\Windows\\x`), `<*> <*>` (an HTTP request's method
and target: one logging statement writes every request line, whatever the route, so they
are its values, as Khan et al., ICSE 2022 count templates), `"<*>"` (a quoted word,
or the quoted value of a key: `tag="View Lock"`; a quoted phrase elsewhere keeps its words),
`<HEX>` (`0x1f`, `a3f9c2d1e5`), `<NUM>` (integers and decimals with a sign or a unit:
`blk_-6952295868487656571`, `250ms`, `250 ms`, `1.5s`, `42%`, `uid=0`; a clock time or
duration `00:02`; a `-` is a sign only after a space, `=`, `(`, `[`, `:`, `,`, `_` or at the
start, else a separator: `<IP>-<NUM>`). One combined pattern, one pass after the requests.
Lines are then grouped by Drain
(He et al., ICWS 2017: a fixed-depth prefix tree over the token count and the first tokens,
then a similarity threshold), drain3's implementation with a similarity over constant words
(tokens holding a digit or a placeholder count as values; a differing last word weighs
double; a context prefix such as
`[req-<UUID> <HEX> <HEX> - - -] [instance: <UUID>]` is kept out of Drain's sight and shown as
its lines share it), then templates alike but for three or more words in one place, and
templates of another length alike but for a span of values, are merged.
docs/logs.md states the choices and their accuracy on loghub (`bench/logs_patterns_eval.py`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Final

from drain3.drain import Drain

from workers.sources.logs.framing import METHODS, context_length, merge_contexts

__all__ = ["KEY_CHARS", "MAX_KEYS", "MINE_TOKENS", "mask", "mine"]

# A masked message is cut to this many characters (a template of a 1 MiB line is its head).
KEY_CHARS: Final = 2000
# Distinct masked messages a backend keeps per call; past it they are folded into their
# templates (`records.Digest`), then counted only.
MAX_KEYS: Final = 4_000
# Clusters of one tree leaf compared with a new line, the newest first: bounds mining at
# MAX_KEYS x _LEAF_SCAN comparisons (10,000 lines no two alike in one leaf took 3 minutes).
_LEAF_SCAN: Final = 16
# Tokens of a masked message Drain sees: each comparison costs a step per token, and 4,000
# distinct 600-token lines took 9 s to mine (twice per call: at the fold and at the end).
# A longer message is mined by its head, and its template ends in `MORE` (the model is shown
# 240 characters of a template: a difference past its head would not show anyway).
MINE_TOKENS: Final = 100
MORE: Final = " …"

_HEXD: Final = r"[0-9a-fA-F]"
# An abbreviated unit written after a space: the number and it are one quantity (`250 ms`,
# `<1 sec`, `1.16 KB`); a unit written out stays a word (`over <NUM> seconds`).
_UNITS: Final = r"(?:ms|us|ns|sec|secs|mins?|hrs?|[KMGT]i?B)"
# An HTTP request, its method and target (a route from `/` or an absolute URL): the values of
# one logging statement's `%(request_line)s` or `%(method)s %(url)s`, never its event.
_REQUEST: Final = re.compile(r"(?<![\w/])(?:" + "|".join(METHODS) + r") (?:/|https?://)[^\s\"]*")
# One pattern, tried once from left to right: at each place the first alternative that
# matches wins, and `_PLACEHOLDERS` names what it becomes (see `mask`).
_MASK: Final = re.compile(
    # Every placeholder starts where no letter or digit is before it, in a run of non-space
    # characters holding a digit, a quote or a slash: two cheap tests reject most places
    # (inside words, words without a digit) before any alternative is tried.
    r"(?<![A-Za-z0-9])(?=\S*[\d\"'/\\])(?:"
    # UUIDs before anything reads their groups as numbers.
    rf"(?P<uuid>\b{_HEXD}{{8}}-{_HEXD}{{4}}-{_HEXD}{{4}}-{_HEXD}{{4}}-{_HEXD}{{12}}\b)"
    # IPv4; IPv6 (three or more groups, a digit, and `::` or a letter: not a clock time).
    r"|(?P<ip4>(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w.]))"
    r"|(?P<ip6>(?<![\w:])(?=[0-9a-fA-F]{0,4}:)(?=[0-9a-fA-F:]*\d)(?=[0-9a-fA-F:]*(?:::|[a-fA-F]))"
    r"[0-9a-fA-F]{0,4}(?::[0-9a-fA-F]{0,4}){2,7}(?![\w:]))"
    # A quoted value (up to 200 characters, no quote inside): a quoted word, or whatever is
    # quoted right after a key's `=` or `:` (`tag="View Lock"`). A quoted phrase elsewhere
    # keeps its words, each masked on its own (`"GET /v2/<HEX> HTTP/<NUM>"`: the method matters).
    r"|(?P<dq>(?<![\w\\])\"(?:(?<=[=:]\")|(?=[^\"\s]{1,200}\"))[^\"\n]{1,200}\"(?!\w))"
    r"|(?P<sq>(?<![\w\\])'(?:(?<=[=:]')|(?=[^'\s]{1,200}'))[^'\n]{1,200}'(?!\w))"
    # Paths: two or more segments after a leading / (or a drive letter).
    r"|(?P<path>(?<![\w/.])(?:[A-Za-z]:\\|/)(?:[\w.@+~-]+[/\\])+[\w.@+~-]*)"
    # A host name with a port (`db-1.shop.internal:3306`; not `Class.method:42`, `a.b:12`).
    r"|(?P<host>(?<![\w.-])[\w-]+(?:\.[\w-]+)*\.[a-z]{2,10}(?=:\d{1,5}(?![\w.])))"
    # Hex: 0x-prefixed, or 8+ hex characters holding a digit and a letter.
    r"|(?P<hex>\b0[xX][0-9a-fA-F]+\b"
    r"|(?<![A-Za-z0-9])(?=[0-9a-fA-F]{8})(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}(?![A-Za-z0-9]))"
    # A clock time or duration (`12:30:45`, `00:02`, `10:01:02.250`) is one value.
    r"|(?P<time>(?<![\w:.])\d{1,2}(?::\d{2}){1,2}(?:[.,]\d+)?(?![\w:]))"
    # Numbers, not glued to a letter on the left, with decimals and a unit (`250ms`, `1.5s`,
    # `42%`, `250 ms`, `1.16 KB`); a dotted version (`2.3.1`) stays. A sign only where one
    # is plausible: at the start, after a space, `=`, `(`, `[`, `:`, `,` or `_` (`blk_-42`,
    # `x=-3`; `<`, `>` after a space: `<1 sec`); after anything else `-` is a separator
    # (`<IP>-<NUM>`, `v2-7`). A size restated in parentheses after it (`1190 bytes
    # (1.16 KB)`) is dropped: one event written with and without it is one template.
    r"|(?P<num>(?:(?<![^\s=(\[:,_])[-+~]|(?<!\S)[<>]=?)?(?<![A-Za-z0-9])(?<!\d\.)"
    rf"\d+(?:\.\d+)?(?:[a-zA-Z%]{{1,3}}(?![A-Za-z0-9])| {_UNITS}(?![A-Za-z0-9]))?"
    r"(?![A-Za-z0-9])(?!\.\d)"
    rf"(?P<restated>(?P<word> [A-Za-z]{{1,12}})? \(~?\d+(?:\.\d+)? ?(?:{_UNITS}|bytes)\))?))"
)  # fmt: skip
_PLACEHOLDERS: Final = {
    "uuid": "<UUID>", "ip4": "<IP>", "ip6": "<IP>", "dq": '"<*>"', "sq": "'<*>'",
    "path": "<PATH>", "host": "<HOST>", "hex": "<HEX>", "time": "<NUM>", "num": "<NUM>",
}  # fmt: skip
# A character that every masked word holds (a digit, a quote, a slash).
_CANDIDATE: Final = re.compile(r"[\d\"'/\\]")

_SIM_TH: Final = 0.7
_DEPTH: Final = 4
# Constant words a template has at most when one word differing keeps a line apart from it
# (a last word weighs double: 4 of 6 is below `_SIM_TH`, 5 of 7 above; another word: 2 of 3,
# 3 of 4), and templates alike but for one word in one place that are one event.
_SPLIT_WORDS: Final = 5
_MERGE_WORDS: Final = 3


def _placeholder(match: re.Match[str]) -> str:
    kind = match.lastgroup or "num"
    if kind == "num" and match.group("restated"):
        return "<NUM>" + (match.group("word") or "")
    return _PLACEHOLDERS[kind]


def mask(message: str) -> str:
    """The message with its variable parts replaced by placeholders (cut to `KEY_CHARS`).
    A pure function of the text: a caller caches it per text if it likes (`records` keeps the
    masks of recent short texts, since a log repeats its lines)."""
    text = " ".join(message[:KEY_CHARS].split())
    if "/" in text:
        text = _REQUEST.sub("<*> <*>", text)
    first = _CANDIDATE.search(text)
    if first is None:
        return text  # nothing to mask: the common cheap case
    # Every placeholder starts in a word holding a digit, a quote or a slash: skip the words
    # before the first one.
    start = text.rfind(" ", 0, first.start()) + 1
    return text[:start] + _MASK.sub(_placeholder, text[start:])


_PLACEHOLDER: Final = re.compile(r"<(?:UUID|IP|PATH|HOST|HEX|NUM|\*)>")


class _Drain(Drain):  # type: ignore[misc]
    """Drain whose similarity weighs only the constant words of a line: two lines that share
    their placeholders but differ in one of three words (`Ending TrustedInstaller
    initialization.` / `finalization.`) are two events, not 5 of 6 tokens alike. Two tokens
    that both hold a digit or a placeholder (`eth0` / `eth1`) are values, neither alike nor
    different, unless they are values of two keys. A differing last word counts twice: it
    often says the outcome or the kind (`... client UpdateAgent.` / `... client Spp.`,
    `... HTTPS` / `... SOCKS5`), where a word inside is often a name (`user bob logged in`)."""

    @staticmethod
    def has_numbers(s: str) -> bool:
        # A placeholder routes like a number: `<NUM>` and `<HEX>` in one place share a branch.
        return "<" in s or any(char.isdigit() for char in s)

    def fast_match(
        self, cluster_ids: Sequence[int], tokens: list[str], sim_th: float, include_params: bool
    ) -> Any:
        return super().fast_match(cluster_ids[-_LEAF_SCAN:], tokens, sim_th, include_params)

    def get_seq_distance(
        self, seq1: Sequence[str], seq2: Sequence[str], include_params: bool
    ) -> tuple[float, int]:
        constant = same = params = values = words = 0
        last = len(seq1) - 1
        for i, (template_token, token) in enumerate(zip(seq1, seq2, strict=True)):
            if template_token == self.param_str:
                params += 1
                words += _VALUE.search(token) is None
                continue
            if "<" in token and _alike(template_token, token):
                continue
            if template_token != token and _same_key(template_token, token):
                continue  # `name=android,` / `name=audioserver,`: the key is the constant
            if template_token != token and _both_values(template_token, token):
                values += 1  # `eth0` / `eth1`, `<IP>,` / `LOCAL(<NUM>),`: a value either way
                continue
            constant += 1
            if template_token == token:
                same += 1
            elif i == last:
                constant += 1  # the last word, often the outcome or kind, weighs double
        if include_params:
            same += params
            constant += params
        if not constant:
            # Nothing constant to weigh: alike if they differ in placeholders only, not when
            # every word differs (`ready=true,x=<NUM>` / `cancel,index:<NUM>`), nor when a
            # template of placeholders only (`<*> <*>`: a request) meets words.
            return (0.0 if values or words else 1.0), params
        return same / constant, params

    def create_template(self, seq1: Sequence[str], seq2: Sequence[str]) -> list[str]:
        # seq1 is the new line, seq2 the template: a position where they differ becomes
        # `<*>`, or `key=<*>` when both are values of one key.
        out = list(seq2)
        for i, (token, template_token) in enumerate(zip(seq1, seq2, strict=True)):
            if token != template_token:
                key = _same_key(template_token, token)
                # a separator both end with stays (`name=<*>,`)
                end = (
                    token[-1]
                    if token[-1:] in (",", ";") and template_token[-1:] == token[-1:]
                    else ""
                )
                out[i] = f"{key}{self.param_str}{end}" if key else self.param_str
        return out


_KEY: Final = re.compile(r"[A-Za-z_][^=\s]*=")


def _same_key(a: str, b: str) -> str:
    # The `key=` both tokens start with, or "" (`uid=0` / `uid=1000,` -> "uid=").
    match = _KEY.match(a)
    return match.group() if match and b.startswith(match.group()) else ""


# A token holding a digit or a placeholder: what the tree routes as a variable.
_VALUE: Final = re.compile(r"[\d<]")


def _both_values(a: str, b: str) -> bool:
    # Two different tokens that both hold a digit or a placeholder are two values of one
    # variable, unless they are values of two different keys (`size=<NUM>` / `count=<NUM>`).
    if _VALUE.search(a) is None or _VALUE.search(b) is None:
        return False
    key_a, key_b = _KEY.match(a), _KEY.match(b)
    return not (key_a and key_b and key_a.group() != key_b.group())


def _alike(a: str, b: str) -> bool:
    # Tokens that differ only in their placeholders (`<NUM>` / `<HEX>`) are alike.
    return a == b or (
        _PLACEHOLDER.search(a) is not None
        and _PLACEHOLDER.sub("<*>", a) == _PLACEHOLDER.sub("<*>", b)
    )


def _drain() -> Drain:
    return _Drain(depth=_DEPTH, sim_th=_SIM_TH, max_children=100, parametrize_numeric_tokens=True)


def mine(masked: Iterable[str]) -> dict[str, str]:
    """Template of each distinct masked message, fed to Drain in the order given (the order of
    each message's first record, so the same lines give the same templates on every backend)."""
    drain = _drain()
    cluster_of: dict[str, int] = {}
    context_of: dict[str, tuple[str, ...]] = {}
    cut: set[str] = set()
    for line in masked:
        if line not in cluster_of:
            tokens = line.split()
            # A context prefix (`[req-<UUID> <HEX> <HEX> - - -] [instance: <UUID>]`) says which
            # request or object: Drain routes and weighs the words after it, the event.
            start = context_length(tokens)
            if start:
                context_of[line] = tuple(tokens[:start])
            if len(tokens) - start > MINE_TOKENS:
                cut.add(line)
            elif not start:
                cluster, _ = drain.add_log_message(line)
                cluster_of[line] = cluster.cluster_id
                continue
            cluster, _ = drain.add_log_message(" ".join(tokens[start : start + MINE_TOKENS]))
            cluster_of[line] = cluster.cluster_id
    final = _merge_heads(
        _merge_spans(
            _merge_words(
                {
                    cid: drain.id_to_cluster[cid].log_template_tokens
                    for cid in set(cluster_of.values())
                }
            )
        )
    )
    # The context prefix each template shows: what its lines share of theirs.
    prefix: dict[str, str] = {}
    if context_of:
        contexts: dict[str, set[tuple[str, ...]]] = {}
        for line, cid in cluster_of.items():
            contexts.setdefault(final[cid], set()).add(context_of.get(line, ()))
        prefix = {
            body: " ".join(merge_contexts(found)) + " "
            for body, found in contexts.items()
            if found != {()}
        }
    return {
        line: (prefix.get(final[cid], "") + final[cid] if final[cid] else line)
        + (MORE if line in cut else "")
        for line, cid in cluster_of.items()
    }


def _merge_words(templates: dict[int, tuple[str, ...]]) -> dict[int, tuple[str, ...]]:
    # The similarity keeps apart lines of a few constant words that differ in one word
    # (`... client UpdateAgent.` / `... client Spp.`, `tunnel via HTTPS` / `... SOCKS5`): two
    # words in one place may be two events. Three or more templates alike but for one word in
    # one place are one event with a variable there (`disconnected from alpha`, `... beta`,
    # `... gamma`); the first token is `_merge_heads`' business (a word there names the event:
    # `getTasks:`). Only a template with at most `_SPLIT_WORDS` constant words can have been
    # kept apart for one word.
    by_gap: dict[tuple[int, tuple[str, ...]], list[int]] = {}
    for cid in sorted(templates):
        tokens = templates[cid]
        words = [i for i, token in enumerate(tokens) if "<" not in token]
        if len(words) <= _SPLIT_WORDS:
            for i in words[1:] if words[:1] == [0] else words:
                by_gap.setdefault((i, (*tokens[:i], "<*>", *tokens[i + 1 :])), []).append(cid)
    out = dict(templates)
    merged: set[int] = set()
    # The groups in the order of their first template, a template in the first group only.
    for (i, gapped), cids in sorted(by_gap.items(), key=lambda item: item[1][0]):
        free = [cid for cid in cids if cid not in merged]
        if len({templates[cid][i] for cid in free}) >= _MERGE_WORDS:
            out.update(dict.fromkeys(free, gapped))
            merged.update(free)
    return out


# Constant words two templates of another length share around a span of values to be one.
_SPAN_WORDS: Final = 4
# Templates of one first token compared with each other (the bound of a pairwise pass).
_SPAN_SCAN: Final = 64


def _merge_spans(templates: dict[int, tuple[str, ...]]) -> dict[int, tuple[str, ...]]:
    # Drain groups lines by their token count, so one argument printed as a varying number of
    # tokens (a list of one or of two uuids, an error text) makes one template per length.
    # Two templates of another length that share a head and a tail holding `_SPAN_WORDS`
    # constant words, and differ only in a span of values (or of Drain's `<*>` in one of
    # them), are one with the span `<*>`.
    merged: dict[int, tuple[str, ...]] = {}  # a group's first template -> the group's template
    members: dict[int, list[int]] = {}
    by_head: dict[str, list[int]] = {}
    for cid in sorted(templates):
        groups = by_head.setdefault(templates[cid][0] if templates[cid] else "", [])
        for first in groups[:_SPAN_SCAN]:
            joined = _span(merged[first], templates[cid])
            if joined is not None:
                merged[first] = joined
                members[first].append(cid)
                break
        else:
            groups.append(cid)
            merged[cid], members[cid] = templates[cid], [cid]
    return {cid: merged[first] for first, cids in members.items() for cid in cids}


def _span(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...] | None:
    if len(a) == len(b):
        return None
    shortest = min(len(a), len(b))
    head = 0
    while head < shortest and _alike(a[head], b[head]):
        head += 1
    tail = 0
    while tail < shortest - head and _alike(a[-1 - tail], b[-1 - tail]):
        tail += 1
    middles = a[head : len(a) - tail], b[head : len(b) - tail]
    # a span of values only (`[u'<UUID>']` / `[u'<UUID>', u'<UUID>']`), or any span where the
    # other template has only words Drain saw vary (`unreachable: <*> <*> Trying` / `...
    # [Errno <NUM>] <*> Trying`: an error text of two words or three); a span holding words
    # on both sides is as often another event (`Error creating node map from <PATH>: ...` /
    # `Error loading <PATH>: invalid ...`) as one argument written in words
    if not all(middles):
        return None
    if not all(_VALUE.search(t) for m in middles for t in m) and not any(
        all(t == "<*>" for t in m) for m in middles
    ):
        return None
    if _words(a[:head]) + _words(a[len(a) - tail :]) < _SPAN_WORDS:
        return None
    # one `<*>` for the span and the variable words beside it, whichever template came first
    while head and a[head - 1] == "<*>":
        head -= 1
    while tail and a[len(a) - tail] == "<*>":
        tail -= 1
    return (*a[:head], "<*>", *a[len(a) - tail :])


def _words(tokens: Sequence[str]) -> int:
    return sum(1 for t in tokens if _VALUE.search(t) is None)


_MERGE_REST: Final = 3
# A first token that reads as a name of something (dotted, a path, a number in it), not a word.
_VARIABLE_HEAD: Final = re.compile(r"[./\\\d]\w|<")


def _merge_heads(templates: dict[int, tuple[str, ...]]) -> dict[int, str]:
    # Drain's tree routes a line by its first token, so one event whose first token varies
    # (`com.apple.X: scheduler ... told me to run this job`) lands in many clusters. Clusters
    # alike in every token but the first, with enough constant words after it, are one when
    # those first tokens are names (dotted, paths, numbered), not words (`getTasks:`).
    by_rest: dict[tuple[str, ...], list[int]] = {}
    for cid in sorted(templates):
        tokens = templates[cid]
        rest = tuple(_PLACEHOLDER.sub("<*>", t) for t in tokens[1:])
        if sum(1 for t in rest if "<" not in t) >= _MERGE_REST:
            by_rest.setdefault(rest, []).append(cid)
    out = {cid: " ".join(tokens) for cid, tokens in templates.items()}
    for cids in by_rest.values():
        heads = {templates[c][0] for c in cids}
        if len(heads) > 1 and all(_VARIABLE_HEAD.search(h) for h in heads):
            merged = " ".join(("<*>", *templates[cids[0]][1:]))
            out.update(dict.fromkeys(cids, merged))
    return out
