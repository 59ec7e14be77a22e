"""Tokens known by their well-known prefix, AWS key pairs, JWTs and a few credentials known by
their place in a URL or a connection string: masked wherever they stand, no name before them.

- by prefix, the prefix kept (it says what kind leaked): GitHub's `ghp_` `gho_` `ghu_` `ghs_`
  `ghr_` `github_pat_`; GitLab's `glpat-` and its other kinds (`glptt-` a trigger's, `gldt-` a
  deploy token, `glrt-` a runner's, `glsoat-`, `gloas-`, `glcbt-`, `glft-`, `glimt-`,
  `glagent-`, `glffct-`); Slack's `xoxb-` (`xox?-`); OpenAI's `sk-` and `sk-proj-` (20
  characters or more holding a digit, a capital and a small letter: a random key does, an id
  such as `sk-1a2b3c...` in hex does not; not after a dash: `disk-sk-1`), Anthropic's
  `sk-ant-`; Stripe's secret and restricted keys `sk_live_` `rk_live_` `sk_test_`
  `rk_test_`; Google's API keys `AIza` + 35; npm's `npm_` + 36; Hugging Face's `hf_` + 30 or
  more; AWS access key ids `AKIA`/`ASIA` + 16; and in a text holding such an id, every
  40-character base64 word (its secret key, `AKIA...:wJalr...`);
- a JWT anywhere (`eyJ...` with at least one `.`), whole;
- a Slack webhook's path, its host kept (`https://hooks.slack.com/services/***`);
- an Azure SAS signature, `sig=***` in a text holding `sv=` (a SAS URL, a connection string's
  `SharedAccessSignature=`); `AccountKey=` and `SharedAccessKey=` are secrets' names
  (`masking.secret_name`).

Cheap first: each rule runs only when a substring it needs is in the text (a token's prefix);
every expression is possessive or bounded: linear.
"""

from __future__ import annotations

import re
from typing import Final

from workers.masking import MASK

__all__ = ["may_hold_token", "without_cut_token", "without_tokens"]

_GITLAB: Final = r"gl(?:pat|ptt|dt|rtr|rt|cbt|ft|imt|agent|soat|oas|ffct)-"
# (a token opens a word, or follows a percent-encoded character: `%3Dghp_...` in a redirect URL)
_TOKEN: Final = re.compile(
    r"(?:(?<![A-Za-z0-9_])|(?<=%[0-9A-Fa-f]{2}))(?:(gh[pousr]_|github_pat_)[A-Za-z0-9_]{30,}+"
    r"|(" + _GITLAB + r")[A-Za-z0-9_-]{20,}+"
    r"|(xox[a-z]-)[A-Za-z0-9-]{10,}+"
    r"|(AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"
    r"|eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{4,}+(?:\.[A-Za-z0-9_-]*+)*+"
    r"|(?<!-)(sk-(?:ant-|proj-|svcacct-|admin-)?+)([A-Za-z0-9_-]{20,}+)"
    r"|([sr]k_(?:live|test)_)[A-Za-z0-9]{16,}+"
    r"|(AIza)[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])"
    r"|(npm_)[A-Za-z0-9]{36}(?![A-Za-z0-9])"
    r"|(hf_)[A-Za-z0-9]{30,}+"
    r"|(hooks\.slack\.com(?:/|%2[Ff])(?:services|workflows|triggers)(?:/|%2[Ff]))"
    r"(?:[A-Za-z0-9_-]|/|%2[Ff])++)"
)
_AWS_GROUP: Final = 4
_SK_GROUP: Final = 5
_PREFIX_GROUPS: Final = (1, 2, 3, 4, 5, 7, 8, 9, 10, 11)
# an AWS secret access key: 40 characters of base64, a word of its own
# (not 40 hex digits of one case: a git commit, a SHA-1; a random key is that with odds 2**-80)
_AWS_SECRET: Final = re.compile(
    r"(?<![A-Za-z0-9/+=])(?![0-9a-f]{40}(?![A-Za-z0-9/+=])|[0-9A-F]{40}(?![A-Za-z0-9/+=]))"
    r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
)
# an Azure SAS token's signature: a query parameter (`?`, `&`) or a connection string's (`;`)
_SAS_SIGNATURE: Final = re.compile(r"(?<=[?&;])(sig=)[^&;\s\"'#]++")


def may_hold_token(text: str) -> bool:
    """Whether `without_tokens` may change the text (substring checks, no expression)."""
    # (the shortest token is 15 characters; `IA` stands for AKIA and ASIA; `masking` inlines it)
    return len(text) >= 15 and (
        "eyJ" in text or "IA" in text or "gh" in text or "xox" in text
        or ("-" in text and ("sk-" in text or "gl" in text))
        or ("_" in text and ("k_" in text or "npm_" in text or "hf_" in text))
        or "AIza" in text or "hooks.slack" in text or "sig=" in text
    )  # fmt: skip


def _random(body: str) -> bool:
    """Whether an `sk-` key's body looks random: a digit, a capital and a small letter."""
    return (
        any(c.isdigit() for c in body)
        and any(c.isupper() for c in body)
        and any(c.islower() for c in body)
    )


def without_tokens(text: str) -> str:
    """The text with every token of a known prefix, AWS key pair, JWT, Slack webhook's path
    and SAS signature as `***`."""
    aws = False

    def token(found: re.Match[str]) -> str:
        nonlocal aws
        if found.group(_SK_GROUP) is not None and not _random(found.group(_SK_GROUP + 1)):
            return found.group()
        aws = aws or found.group(_AWS_GROUP) is not None
        prefix = next((p for g in _PREFIX_GROUPS if (p := found.group(g)) is not None), "")
        return prefix + MASK

    text = _TOKEN.sub(token, text)
    if "sig=" in text and "sv=" in text:
        text = _SAS_SIGNATURE.sub(r"\1" + MASK, text)
    return _AWS_SECRET.sub(MASK, text) if aws else text


# A token's opening (`_TOKEN`'s prefixes, a JWT's `eyJ`) and the characters a token is made of.
_OPENING: Final = re.compile(
    r"(?:(?<![A-Za-z0-9_])|(?<=%[0-9A-Fa-f]{2}))(?:gh[pousr]_|github_pat_|" + _GITLAB
    + r"|xox[a-z]-|AKIA|ASIA|eyJ|(?<!-)sk-(?:ant-|proj-|svcacct-|admin-)?+|[sr]k_(?:live|test)_"
    r"|AIza|npm_|hf_)"
)  # fmt: skip
_NOT_TOKEN: Final = re.compile(r"[^A-Za-z0-9_.-]")


def without_cut_token(text: str) -> str:
    """A text cut short (a store's Body cut to `max_line_bytes` before it is masked): a token
    the cut left too short for its shape, at the text's end, shows its opening and `***`.
    Linear: the run of token characters at the end is found once (searched reversed)."""
    if not text or text[-1].isspace():
        return text
    stop = _NOT_TOKEN.search(text[::-1])
    start = len(text) - (stop.start() if stop is not None else len(text))
    found = _OPENING.search(text, start)  # (its look-behind sees the character before)
    if found is None:
        return text
    # the opening's prefix kept as `without_tokens` keeps it (a JWT whole)
    keep = found.start() if text.startswith("eyJ", found.start()) else found.end()
    return text[:keep] + MASK
