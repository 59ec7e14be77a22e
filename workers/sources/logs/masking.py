"""Secrets in text the log sources show: a URL's password, and values under a secret's name.

One rule for the FILE backend's outputs that carry text the app did not choose to log:
`aci-evidence check`'s example lines (an app logs its DSN at start) and Docker's `attrs` (the
daemon copies the container's environment into every line with `--log-opt env=...`). Masked
text is `***`, as `workers.logging_setup` masks a URL's password in the worker's own log.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["MASK", "secret_name", "without_url_password"]

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


def without_url_password(text: str) -> str:
    """The text with every URL's password shown as `***`."""
    return _URL_PASSWORD.sub(rf"\1{MASK}@", text) if "://" in text else text


def secret_name(name: str) -> bool:
    """Whether a key names a secret (its value is then never shown)."""
    return _SECRET_NAME.search(name) is not None
