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
a port), `<PATH>` (`/var/log/x.log`, `C:\\Windows\\x`), `"<*>"` (a quoted value), `<HEX>`
(`0x1f`, `a3f9c2d1e5`), `<NUM>` (integers and decimals with a sign or a unit:
`blk_-6952295868487656571`, `250ms`, `1.5s`, `42%`, `uid=0`). Lines are then grouped by Drain
(He et al., ICWS 2017: a fixed-depth prefix tree over the token count and the first tokens,
then a similarity threshold), drain3's implementation with a similarity over constant words.
docs/logs.md states the choices and their accuracy on loghub (`bench/logs_patterns_eval.py`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Final

from drain3.drain import Drain

__all__ = ["KEY_CHARS", "MAX_KEYS", "mask", "mine"]

# A masked message is cut to this many characters (a template of a 1 MiB line is its head).
KEY_CHARS: Final = 2000
# Distinct masked messages a backend keeps per call; past it they are folded into their
# templates (`records.Digest`), then counted only.
MAX_KEYS: Final = 4_000
# Clusters of one tree leaf compared with a new line, the newest first: bounds mining at
# MAX_KEYS x _LEAF_SCAN comparisons (10,000 lines no two alike in one leaf took 3 minutes).
_LEAF_SCAN: Final = 16

_HEXD: Final = r"[0-9a-fA-F]"
_DIGIT: Final = re.compile(r"\d")
# Masks that can match text without a digit need one of these characters.
_NO_DIGIT_NEEDED: Final = ('"', "'", "/", "\\")
# (pattern, placeholder, strings of which one must be in the text for the mask to run)
_MASKS: Final = (
    # UUIDs before anything reads their groups as numbers.
    (re.compile(rf"\b{_HEXD}{{8}}-{_HEXD}{{4}}-{_HEXD}{{4}}-{_HEXD}{{4}}-{_HEXD}{{12}}\b"), "<UUID>", ("-",)),  # noqa: E501
    # IPv4; IPv6 (three or more groups, a digit, and `::` or a letter: not a clock time).
    (re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w.])"), "<IP>", (".",)),
    (re.compile(r"(?<![\w:])(?=[0-9a-fA-F:]*\d)(?=[0-9a-fA-F:]*(?:::|[a-fA-F]))[0-9a-fA-F]{0,4}(?::[0-9a-fA-F]{0,4}){2,7}(?![\w:])"), "<IP>", (":",)),  # noqa: E501
    # A quoted value (up to 200 characters, no quote inside).
    (re.compile(r"(?<![\w\\])\"[^\"\n]{1,200}\"(?!\w)"), '"<*>"', ('"',)),
    (re.compile(r"(?<![\w\\])'[^'\n]{1,200}'(?!\w)"), "'<*>'", ("'",)),
    # Paths: two or more segments after a leading / (or a drive letter).
    (re.compile(r"(?<![\w/.])(?:[A-Za-z]:\\|/)(?:[\w.@+~-]+[/\\])+[\w.@+~-]*"), "<PATH>", ("/", "\\")),  # noqa: E501
    # A host name with a port (`db-1.shop.internal:3306`; not `Class.method:42`, `a.b:12`).
    (re.compile(r"(?<![\w.-])[\w-]+(?:\.[\w-]+)*\.[a-z]{2,10}(?=:\d{1,5}(?![\w.]))"), "<HOST>", (":",)),  # noqa: E501
    # Hex: 0x-prefixed, or 8+ hex characters holding a digit and a letter.
    (re.compile(r"\b0[xX][0-9a-fA-F]+\b"), "<HEX>", ("x", "X")),
    (re.compile(r"(?<![A-Za-z0-9])(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}(?![A-Za-z0-9])"), "<HEX>", ()),  # noqa: E501
    # Numbers with a sign, decimals and a unit, not glued to a letter on the left (`blk_-42`,
    # `_7`, `=3`, `250ms`, `1.5s`, `42%`); a dotted version (`2.3.1`) stays.
    (re.compile(r"(?<![A-Za-z0-9])(?<!\d\.)[-+]?\d+(?:\.\d+)?(?:[a-zA-Z%]{1,3})?(?![A-Za-z0-9])(?!\.\d)"), "<NUM>", ()),  # noqa: E501
)  # fmt: skip

_SIM_TH: Final = 0.7
_DEPTH: Final = 4


def mask(message: str) -> str:
    """The message with its variable parts replaced by placeholders (cut to `KEY_CHARS`)."""
    text = " ".join(message[:KEY_CHARS].split())
    if not _DIGIT.search(text) and not any(c in text for c in _NO_DIGIT_NEEDED):
        return text  # nothing to mask: the common cheap case
    for pattern, placeholder, triggers in _MASKS:
        if not triggers or any(t in text for t in triggers):
            text = pattern.sub(placeholder, text)
    return text


_PLACEHOLDER: Final = re.compile(r"<(?:UUID|IP|PATH|HOST|HEX|NUM|\*)>")


class _Drain(Drain):  # type: ignore[misc]
    """Drain whose similarity weighs only the constant words of a line: two lines that share
    their placeholders but differ in one of three words (`Ending TrustedInstaller
    initialization.` / `finalization.`) are two events, not 5 of 6 tokens alike."""

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
        constant = same = params = 0
        for template_token, token in zip(seq1, seq2, strict=True):
            if template_token == self.param_str:
                params += 1
                continue
            if "<" in token and _alike(template_token, token):
                continue
            constant += 1
            same += template_token == token
        if include_params:
            same += params
            constant += params
        return (same / constant if constant else 1.0), params


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
    for line in masked:
        if line not in cluster_of:
            cluster, _ = drain.add_log_message(line)
            cluster_of[line] = cluster.cluster_id
    final = _merge_heads(
        {cid: drain.id_to_cluster[cid].log_template_tokens for cid in set(cluster_of.values())}
    )
    return {line: final[cid] or line for line, cid in cluster_of.items()}


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
