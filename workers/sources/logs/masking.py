"""Secrets in text the log sources show: a URL's password, and values under a secret's name.

One rule for the FILE backend's outputs that carry text the app did not choose to log:
`aci-evidence check`'s example lines (an app logs its DSN at start) and Docker's `attrs` (the
daemon copies the container's environment into every line with `--log-opt env=...`). Masked
text is `***`, as `workers.logging_setup` masks a URL's password in the worker's own log.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["MASK", "secret_name", "without_secrets", "without_url_password"]

MASK: Final = "***"
# `scheme://user:password@host`: anchored on `://`, the user without `/`, `:` or `@`, the
# password up to the `@` (no space or `/`: `http://host:8080/a@b` keeps its port).
_URL_PASSWORD: Final = re.compile(r"(://[^/\s:@]*:)[^\s@/]*@")
# A name that says its value is a secret: a password (`DB_PASSWORD`, `PGPASS`, `passwd`), a
# secret, a token, a credential, a private or API key (`STRIPE_API_KEY`, `ssh_key`, `key`),
# `auth`; a word only where it stands alone, so `MONKEY`, `KEYSPACE`, `passenger`, `author` are
# not secrets.
_SECRET_NAME: Final = re.compile(
    r"pass(?:wd|word|phrase)?(?![a-z])|secret|token|credential|private"
    r"|(?<![a-z])(?:api|access|ssh|signing|encryption|master)?[_.-]?key(?![a-z])"
    r"|(?<![a-z])auth(?![a-z])",
    re.IGNORECASE,
)


# A JSON string member (`"DB_PASSWORD":"hunter2"`), its value up to its closing quote or the
# end of a line cut short; the key bounded, so a hostile line is read in linear time.
_JSON_MEMBER: Final = re.compile(r'"([^"\\]{1,200})"\s*:\s*"((?:[^"\\]|\\.)*)')


def without_secrets(text: str) -> str:
    """Raw text that is no record (a Docker line cut short by a full disk, its `attrs` with
    the container's environment) with a secret's JSON value and a URL's password as `***`."""

    def member(found: re.Match[str]) -> str:
        key = found.group(1)
        return f'"{key}":"{MASK}' if secret_name(key) else found.group()

    return without_url_password(_JSON_MEMBER.sub(member, text) if '"' in text else text)


def without_url_password(text: str) -> str:
    """The text with every URL's password shown as `***`."""
    return _URL_PASSWORD.sub(rf"\1{MASK}@", text) if "://" in text else text


def secret_name(name: str) -> bool:
    """Whether a key names a secret (its value is then never shown)."""
    return _SECRET_NAME.search(name) is not None
