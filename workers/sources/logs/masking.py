"""Secrets in text the log sources show: a URL's password, and values under a secret's name.

One rule for the FILE backend's outputs that carry text the app did not choose to log:
`aci-evidence check`'s example lines (an app logs its DSN at start) and Docker's `attrs` (the
daemon copies the container's environment into every line with `--log-opt env=...`). Masked
text is `***`; a URL's password is masked by the rule the worker's own log lines use too
(`workers.masking`).
"""

from __future__ import annotations

import re
from typing import Final

from workers.masking import MASK, without_named_values, without_url_password

__all__ = [
    "MASK", "secret_name", "without_secret_values", "without_secrets", "without_url_password",
]  # fmt: skip

# A name that says its value is a secret: a password (`DB_PASSWORD`, `PGPASS`, `passwd`,
# `DB_PWD`), a secret, a token, a credential (`CREDS`), a private or API key
# (`STRIPE_API_KEY`, `ssh_key`, `key`), `auth` and `Authorization`, a cookie, a session's id or
# key, a JWT, a DSN (Sentry's holds its key as the URL's user); a word only where it stands
# alone, so `MONKEY`, `KEYSPACE`, `passenger`, `author` are not secrets.
_SECRET_NAME: Final = re.compile(
    r"pass(?:wd|word|phrase)?(?![a-z])|secret|token|credential|private|cookie"
    r"|(?<![a-z])(?:api|access|ssh|signing|encryption|master|session)?[_.-]?key(?![a-z])"
    r"|(?<![a-z])(?:auth|authori[sz]ation|authentication|pwd|creds?|jwt|dsn|bearer)(?![a-z])"
    r"|(?<![a-z])session[_.-]?id(?![a-z])",
    re.IGNORECASE,
)
# Inside a value: `name=value` or `name: value` under a secret's name (`-Dx.password=...`, a
# connection string's `Password=...;`, a header `X-Api-Key: ...`, quoted names and values:
# `workers.masking.without_named_values`), and an HTTP credential (`Bearer ...`, `Basic ...`).
_HTTP_CREDENTIAL: Final = re.compile(r"(?i)\b(bearer|basic)(\s+)[\w.~+/=-]+")


# A JSON string member (`"DB_PASSWORD":"hunter2"`), its value up to its closing quote or the
# end of a line cut short; the key bounded, so a hostile line is read in linear time.
_JSON_MEMBER: Final = re.compile(r'"([^"\\]{1,200})"\s*:\s*"((?:[^"\\]|\\.)*)')


def without_secrets(text: str) -> str:
    """Raw text that is no record (a Docker line cut short by a full disk, its `attrs` with
    the container's environment) with a secret's JSON value, a URL's password, a secret's
    `name=value` and an HTTP credential as `***`."""

    def member(found: re.Match[str]) -> str:
        key = found.group(1)
        return f'"{key}":"{MASK}' if secret_name(key) else found.group()

    return without_secret_values(_JSON_MEMBER.sub(member, text) if '"' in text else text)


def without_secret_values(text: str) -> str:
    """A value (an environment variable's, a label's) with every URL's password, every
    `name=value` or `name: value` under a secret's name and every HTTP credential as `***`."""

    # the credential first: `Authorization: Basic dXNl...` would lose only `Basic` to its name
    text = _HTTP_CREDENTIAL.sub(rf"\1\2{MASK}", without_url_password(text))
    return without_named_values(text, secret_name)


def secret_name(name: str) -> bool:
    """Whether a key names a secret (its value is then never shown)."""
    return _SECRET_NAME.search(name) is not None
