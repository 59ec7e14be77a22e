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
  40-character base64 word (its secret key, `AKIA...:wJalr...`); Stripe's and Svix's webhook
  secrets `whsec_`, Grafana's service account tokens `glsa_`; and without an `_`
  (`_VENDOR_KEY`): Twilio's `SK` + 32 hex, SendGrid's `SG.`;
- a JWT anywhere (`eyJ...` with at least one `.`), whole;
- a Slack webhook's path, its host kept (`https://hooks.slack.com/services/***`); a Discord
  webhook's token (`discord.com/api/webhooks/<id>/***`); a Telegram bot's token in its API's
  path (`api.telegram.org/bot123456789:***/sendMessage`, as httpx logs each request);
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

__all__ = [
    "may_hold_api_key", "may_hold_platform_token", "may_hold_token", "may_hold_vendor_key",
    "without_api_keys", "without_cut_token", "without_platform_tokens", "without_tokens",
    "without_vendor_keys",
]  # fmt: skip

# Three expressions, each behind its own substring checks: a record that holds one kind's prefix
# is not searched for the other's (one expression of every alternative costs such a record a
# tenth more).
_GITLAB: Final = r"gl(?:pat|ptt|dt|rtr|rt|cbt|ft|imt|agent|soat|oas|ffct)-"
_WORD_START: Final = r"(?:(?<![A-Za-z0-9_])|(?<=%[0-9A-Fa-f]{2}))"
# (a token opens a word, or follows a percent-encoded character: `%3Dghp_...` in a redirect URL)
_TOKEN: Final = re.compile(
    _WORD_START + r"(?:(gh[pousr]_|github_pat_)[A-Za-z0-9_]{30,}+"
    r"|(" + _GITLAB + r")[A-Za-z0-9_-]{20,}+"
    r"|(xox[a-z]-)[A-Za-z0-9-]{10,}+"
    r"|(glsa_)[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}(?![A-Za-z0-9])"
    r"|(AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"
    r"|eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{4,}+(?:\.[A-Za-z0-9_-]*+)*+)"
)
_AWS_GROUP: Final = 5
# an AWS secret access key: 40 characters of base64, a word of its own
# (not 40 hex digits of one case: a git commit, a SHA-1; a random key is that with odds 2**-80)
_AWS_SECRET: Final = re.compile(
    r"(?<![A-Za-z0-9/+=])(?![0-9a-f]{40}(?![A-Za-z0-9/+=])|[0-9A-F]{40}(?![A-Za-z0-9/+=]))"
    r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
)
_API_KEY: Final = re.compile(
    _WORD_START + r"(?:(?<!-)(sk-(?:ant-|proj-|svcacct-|admin-)?+)([A-Za-z0-9_-]{20,}+)"
    r"|([sr]k_(?:live|test)_)[A-Za-z0-9]{16,}+"
    r"|(AIza)[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])"
    r"|(npm_)[A-Za-z0-9]{36}(?![A-Za-z0-9])"
    r"|(hf_)[A-Za-z0-9]{30,}+"
    r"|(whsec_)[A-Za-z0-9+/]{24,}+=*+"
    r"|(hooks\.slack\.com(?:/|%2[Ff])(?:services|workflows|triggers)(?:/|%2[Ff]))"
    r"(?:[A-Za-z0-9_-]|/|%2[Ff])++"
    r"|(discord(?:app)?+\.com/api/webhooks/\d{1,20}+/)[A-Za-z0-9_-]{20,}+"
    r"|(?<=/)(bot\d{5,12}+:)[A-Za-z0-9_-]{30,}+)"
)
_SK_BODY: Final = 2
_KEY_PREFIXES: Final = (1, 3, 4, 5, 6, 7, 8, 9, 10)
# Keys of a vendor's prefix that holds no `_` (so not behind `_`'s check): Twilio's API key
# (`SK` + 32 hex), SendGrid's (`SG.` 22 `.` 43). Shapes as public secret scanners know them
# (gitleaks' rules, MIT), each its prefix and a length or alphabet no prose word has. Each
# prefix more is a substring check more on every record (docs/logs.md, "Cost").
_VENDOR_KEY: Final = re.compile(
    r"(?<![A-Za-z0-9_])(?:(SK)[0-9a-fA-F]{32}(?![A-Za-z0-9])"
    r"|(SG\.)[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-]))"
)
# an Azure SAS token's signature: a query parameter (`?`, `&`) or a connection string's (`;`)
_SAS_SIGNATURE: Final = re.compile(r"(?<=[?&;])(sig=)[^&;\s\"'#]++")


def may_hold_platform_token(text: str) -> bool:
    """Whether `without_platform_tokens` may change the text (substring checks)."""
    # (the shortest token is 15 characters; `IA` stands for AKIA and ASIA; `masking` inlines it)
    return len(text) >= 15 and (
        "eyJ" in text or "IA" in text or "gh" in text or "xox" in text
        or ("gl" in text and ("-" in text or "_" in text))
    )  # fmt: skip


def may_hold_api_key(text: str) -> bool:
    """Whether `without_api_keys` may change the text (substring checks; `masking` inlines it)."""
    return len(text) >= 15 and (
        ("sk-" in text or ("_" in text and (
            "k_" in text or "npm_" in text or "hf_" in text or "sec_" in text
        )))
        or "AIza" in text or "hooks" in text or "/bot" in text or "sig=" in text
    )  # fmt: skip


def may_hold_vendor_key(text: str) -> bool:
    """Whether `without_vendor_keys` may change the text (`masking` inlines it)."""
    return len(text) >= 15 and ("SK" in text or "SG." in text)


def may_hold_token(text: str) -> bool:
    """Whether `without_tokens` may change the text."""
    return may_hold_platform_token(text) or may_hold_api_key(text) or may_hold_vendor_key(text)


def without_platform_tokens(text: str) -> str:
    """The text with every GitHub, GitLab and Slack token, AWS key pair and JWT as `***`."""
    aws = False

    def token(found: re.Match[str]) -> str:
        nonlocal aws
        aws = aws or found.group(_AWS_GROUP) is not None
        return (
            found.group(1) or found.group(2) or found.group(3) or found.group(4)
            or found.group(5) or ""
        ) + MASK  # fmt: skip

    text = _TOKEN.sub(token, text)
    return _AWS_SECRET.sub(MASK, text) if aws else text


def _random(body: str) -> bool:
    """Whether an `sk-` key's body looks random: a digit, a capital and a small letter."""
    return (
        any(c.isdigit() for c in body)
        and any(c.isupper() for c in body)
        and any(c.islower() for c in body)
    )


def _api_key(found: re.Match[str]) -> str:
    if found.group(_SK_BODY) is not None and not _random(found.group(_SK_BODY)):
        return found.group()
    return next(p for g in _KEY_PREFIXES if (p := found.group(g)) is not None) + MASK


def without_api_keys(text: str) -> str:
    """The text with every API key of a known prefix (OpenAI's, Anthropic's, Stripe's,
    Google's, npm's, Hugging Face's), Slack webhook's path and SAS signature as `***`."""
    text = _API_KEY.sub(_api_key, text)
    if "sig=" in text and "sv=" in text:
        text = _SAS_SIGNATURE.sub(r"\1" + MASK, text)
    return text


def without_vendor_keys(text: str) -> str:
    """The text with every key of `_VENDOR_KEY`'s prefixes (Twilio's, SendGrid's) as its
    prefix and `***`."""
    return _VENDOR_KEY.sub(lambda found: next(p for p in found.groups() if p) + MASK, text)


def without_tokens(text: str) -> str:
    """The text with every token, key and signature the three rules know as `***`."""
    return without_vendor_keys(without_api_keys(without_platform_tokens(text)))


# A token's opening (`_TOKEN`'s prefixes, a JWT's `eyJ`) and the characters a token is made of.
_OPENING: Final = re.compile(
    r"(?:(?<![A-Za-z0-9_])|(?<=%[0-9A-Fa-f]{2}))(?:gh[pousr]_|github_pat_|" + _GITLAB
    + r"|xox[a-z]-|glsa_|AKIA|ASIA|eyJ|(?<!-)sk-(?:ant-|proj-|svcacct-|admin-)?+"
    r"|[sr]k_(?:live|test)_|AIza|npm_|hf_|whsec_|SK(?=[0-9a-f]{8})|SG\.)"
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
