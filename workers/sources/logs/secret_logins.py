"""Secrets in the login lines of protocols and tools (`masking`'s rules, beside
`secret_shapes`): Redis' `AUTH` as MONITOR logs it and typed bare, SMTP's `AUTH PLAIN
<base64>`, FTP's and POP3's `PASS`, `.netrc` lines, Oracle's `user/password@` connect strings,
a password piped into `docker login --password-stdin` or `chpasswd`, kubectl's
`--from-literal=<name>=<value>`, and XML elements and properties under a secret's name.

Cheap first: each rule runs only when a substring it needs is in the text; every expression is
possessive or bounded: linear.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from workers.masking import MASK
from workers.sources.logs.secret_shapes import REFERENCE, VALUE, quoted_mask

__all__ = [
    "without_auth_commands",
    "without_login_lines",
    "without_oracle_password",
    "without_secret_literals",
    "without_xml_secrets",
]  # fmt: skip


# Redis' AUTH as MONITOR logs it (`"AUTH" "S3cret"`, `"auth" "alice" "S3cret"`): its last word
_REDIS_AUTH: Final = re.compile(r'(?i)"auth"(\s++"(?:[^"\\]|\\.)*+"){1,2}+')
# AUTH written bare (redis-cli's prompt, an SMTP or IMAP dialogue): `AUTH S3cret`, `AUTH alice
# S3cret`, SMTP's `AUTH PLAIN <base64>` (`XOAUTH2`, `OAUTHBEARER`); FTP's and POP3's `PASS
# S3cret`; a mechanism alone (`AUTH LOGIN`), a prose word (`AUTH failed for user bob`) or a
# placeholder (`AUTH <password>`) is none
_AUTH: Final = re.compile(r"(?<![\w-])(?:AUTH|PASS)[ \t]++([^\s\"']++)(?:[ \t]++([^\s\"']++))?")
_AUTH_INITIAL: Final = frozenset({"PLAIN", "XOAUTH2", "OAUTHBEARER", "EXTERNAL"})
_MECHANISM: Final = re.compile(r"[A-Z][A-Z0-9-]{2,30}")
_PROSE: Final = re.compile(r"[A-Za-z][a-z]{0,15}[.,:;]?|<[^<>]{1,40}>")


def _auth(found: re.Match[str]) -> str:
    # a mechanism's initial response (`AUTH PLAIN <base64>`); else each word that is no prose
    # word: `AUTH S3cret`, `AUTH alice S3cret` (a user such as `app-1` masked too: errs so)
    first, second = found.group(1), found.group(2)
    if first in _AUTH_INITIAL:
        masked = [2] if second is not None else []
    elif _MECHANISM.fullmatch(first):
        masked = []
    else:
        masked = [n for n, word in ((1, first), (2, second))
                  if word is not None and not _PROSE.fullmatch(word)]  # fmt: skip
    if not masked:
        return found.group()
    text, base = found.group(), found.start()
    for n in reversed(masked):
        text = text[: found.start(n) - base] + MASK + text[found.end(n) - base :]
    return text


def _redis_auth(found: re.Match[str]) -> str:
    last = found.group(1)  # (a repeated group: its last match)
    head = found.group()[: found.start(1) - found.start()]
    return head + last[: last.index('"') + 1] + MASK + '"'


def without_auth_commands(text: str) -> str:
    """The text with Redis' and SMTP's AUTH arguments (its password, an initial response) as
    `***`."""
    if '"' in text:
        text = _REDIS_AUTH.sub(_redis_auth, text)
    return _AUTH.sub(_auth, text) if "AUTH" in text or "PASS" in text else text


# `.netrc` (`machine host login bob password S3cret`, curl's, ftp's, git's): after `machine`,
# the value of `password` (`passwd`); each word read once (possessive).
_NETRC: Final = re.compile(
    r"(?<![\w-])machine\s++\S++(?:\s++(?:login|account|port)\s++\S++)*+\s++pass(?:word|wd)\s++(\S++)"
)
# Oracle's `user/password@` (`jdbc:oracle:thin:app/S3cret@db:1521/ORCL`, `sqlplus app/S3cret@db`)
_ORACLE: Final = re.compile(
    r"(?:jdbc:oracle:\w{1,20}+:|(?<![\w-])sqlplus(?:\s++-\w++)*+\s++)"
    r"[^\s/@:'\"]{1,128}+/([^\s@'\"]++)(?=@)"
)
# A password piped to a registry's login (`echo S3cret | docker login --password-stdin`) or to
# `chpasswd` (`echo 'bob:S3cret' | chpasswd`): the echoed word
_PIPED: Final = re.compile(
    r"(?<![\w-])(?:echo|printf)(?:\s++-\w++)*+\s++" + VALUE
    + r"\s*+\|\s*+(?:sudo\s++)?(?:(?:docker|podman|nerdctl|buildah|skopeo|oras|crane"
    r"|helm\s++registry)\s++login\b[^|;&\n]{0,512}?--password-stdin|chpasswd\b)"
)  # fmt: skip


def _group_masked(found: re.Match[str]) -> str:
    start, end = found.start(1) - found.start(), found.end(1) - found.start()
    return found.group()[:start] + quoted_mask(found.group(1)) + found.group()[end:]


def _piped(found: re.Match[str]) -> str:
    # a variable's reference (`echo $CR_PAT | docker login ...`) says where the secret is
    return found.group() if REFERENCE.fullmatch(found.group(1)) else _group_masked(found)


def without_oracle_password(text: str) -> str:
    """The text with Oracle's `user/password@` (a JDBC URL, sqlplus' argument) as `***`."""
    if "oracle:" in text or "sqlplus" in text:
        text = _ORACLE.sub(_group_masked, text)
    return text


# `kubectl create secret ... --from-literal=name=value`: every value of a Secret is one,
# whatever its name (`--from-literal=stripe=...`)
_FROM_LITERAL: Final = re.compile(r"--from-literal(?:=|\s++)[^\s=]{1,253}+=" + VALUE)


def without_secret_literals(text: str) -> str:
    """The text with the values of `kubectl create secret`'s `--from-literal=name=value` as
    `***` (in a text naming a secret, its `name` kept)."""
    if "--from-literal" not in text:
        return text
    return _FROM_LITERAL.sub(_group_masked, text)


def without_login_lines(text: str) -> str:
    """The text with a `.netrc` line's password and a password piped to `docker login
    --password-stdin` or `chpasswd` as `***`."""
    if "machine" in text:
        text = _NETRC.sub(_group_masked, text)
    if "|" in text and ("password-stdin" in text or "chpasswd" in text):
        text = _PIPED.sub(_piped, text)
    return text


# XML: an element under a secret's name (`<password>S3cret</password>`, `<ns:ApiKey>`), its text
# to the closing tag; a name/value attribute pair (Spring's `<property name="password"
# value="S3cret"/>`, .NET's `<add key="ApiKey" value="S3cret"/>`). Bounded: linear.
_XML_ELEMENT: Final = re.compile(
    r"<(?:[\w.-]{1,40}+:)?+([A-Za-z_][\w.-]{0,100}+)(?:\s[^<>]{0,512}+)?+>([^<]{1,4096}+)"
    r"</(?:[\w.-]{1,40}+:)?+\1\s*+>"
)
_XML_PAIR: Final = re.compile(
    r"""\b(?:name|key)\s*+=\s*+(["'])([\w.:-]{1,100}+)\1\s++value\s*+=\s*+(["'])([^"'<>]*+)\3"""
)


def without_xml_secrets(text: str, secret: Callable[[str], bool]) -> str:
    """The text with the value of every XML element or name/value attribute pair under a
    secret's name (`secret`) as `***`."""

    def element(found: re.Match[str]) -> str:
        if not secret(found.group(1)):
            return found.group()
        start, end = found.start(2) - found.start(), found.end(2) - found.start()
        return found.group()[:start] + MASK + found.group()[end:]

    def pair(found: re.Match[str]) -> str:
        if not secret(found.group(2)) or not found.group(4):
            return found.group()
        start, end = found.start(4) - found.start(), found.end(4) - found.start()
        return found.group()[:start] + MASK + found.group()[end:]

    if "</" in text:
        text = _XML_ELEMENT.sub(element, text)
    return _XML_PAIR.sub(pair, text) if "value" in text else text
