"""A URL's password masked: the one rule for every text that leaves the worker.

The worker's own log lines (`workers.logging_setup`) and the log records it serves as evidence
(`workers.sources.logs.masking`, `aci-evidence check`'s example lines) both mask with
`without_url_password`, so a password one of them shows the other cannot hide.

The rule errs towards masking: `scheme://user:` (or `:\\/\\/`, a URL in JSON that escapes its
slashes, `:\\\\/\\\\/` in JSON inside JSON; a user may be empty, a mail address or `DOMAIN\\user`)
opens a password that runs to the last `@` before whitespace, so a password holding `@`, `/`,
`:` or `"` is masked whole. Its cost: a port before an `@` in the path
(`http://npm:4873/@scope/pkg`) is masked too.

A URL inside a JSON string (right after its opening quote, or with its slashes escaped) ends at
the string's closing quote (`"` then `,`, `}` or `]`; a quote inside it is `\\"`) when an `@`
comes before it: compact JSON has no space, and the password would otherwise run to a later
member's mail address, which would be shown as the URL's host. No `@` before it: the rule above.
Its cost: a quoted URL that is no JSON, its password holding `@` and later a bare `",` (`"}`,
`"]`), shows the part of it after that quote (JSON escapes it: `\\",`).

A password holding a literal space is no well-formed URL (RFC 3986 wants `%20`), but people
type one: when no `@` comes before the whitespace, the password runs over whitespace to an
`@` at most `SPACED_MAX` characters from its start, if what precedes the whitespace is no port
(`cache:6379 as alice@example.com` stays), and the span holds no `/`, quote or line break and
the `@` is followed by a host's first character. Percent-encoded passwords (`p%40ss`) are
ordinary characters to the rule.

A URL percent-encoded whole inside another URL's query (`next=https%3A%2F%2Fuser%3AS3cret%40db%2F`,
OAuth's `redirect_uri=`) opens with an encoded `://`, then the user and an encoded `:`; its
password runs to the last `%40` before the parameter ends (whitespace, `&`, a quote) and is
masked so (`user%3A***%40db`). `https://u%3AS3cret%40host` has no `@`: no password (its host's
name, percent-encoded), shown. A URL encoded twice or three times (a redirect's `next=` inside
another's: `%253A%252F%252Fuser%253A...%2540host`, each `%` as `%25`) is read alike, its
password to the last `@` encoded as deep as its opening's `:`.

A password under its name (`password=...`, `PGPASSWORD=...`, `passwd: ...`, `"password":
"..."`, Python's `{'password': '...'}`, a quoted value holding spaces) is masked by
`without_named_values`, given which names are secrets: the worker's own log lines
(`without_passwords`) take a password's names only; the log sources take more
(`workers.sources.logs.masking.secret_name`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

__all__ = [
    "MASK", "SPACED_MAX", "password_name", "without_named_values", "without_passwords",
    "without_url_password",
]  # fmt: skip

MASK: Final = "***"
# `://`, `:\/\/` or deeper escaped, then the user: anything up to the next `/`, `:` or
# whitespace (so the scan from each opening stops at the next one: linear, however hostile).
_OPENING: Final = re.compile(r":(?:\\*/){2}[^/\s:]*:")
_SPACE: Final = re.compile(r"\s")
_FULLWIDTH: Final = re.compile("[\uff1a\uff1d]")  # a fullwidth colon, equals sign
# a JSON string's closing quote: not escaped, then the next member or the container's end
_JSON_END: Final = re.compile(r'(?<!\\)"[,}\]]')
_SCHEME: Final = re.compile(r'"[A-Za-z][A-Za-z0-9+.-]{0,30}\Z')
SPACED_MAX: Final = 64  # characters of a password holding whitespace, at most
SHOWN_MAX: Final = 64  # characters of a named value `without_named_values` may keep, at most
# a port (`6379`, `6379,`): what a URL without a password has before whitespace
_PORT: Final = re.compile(r"\d*[,;.)\]]*")
_HOST_START: Final = re.compile(r"[A-Za-z0-9\[]")


def without_url_password(text: str) -> str:
    """The text with every URL's password shown as `***` (a URL percent-encoded inside
    another's query too: `next=https%3A%2F%2Fuser%3A***%40db`)."""
    if "%40" in text or "%2540" in text:
        text = _without_encoded_password(text)
    if "@" not in text or "/" not in text:
        return text
    parts: list[str] = []
    done = pos = 0
    space = -1  # the whitespace ending the current token (reused: linear in many URLs on it)
    while (opening := _OPENING.search(text, pos)) is not None:
        start = opening.end()
        if space < start:
            found = _SPACE.search(text, start)
            space = len(text) if found is None else found.start()
        pos = space
        at = -1
        escaped = not text.startswith("://", opening.start())  # its slashes escaped: JSON
        if escaped or _SCHEME.search(text, max(0, opening.start() - 32), opening.start()):
            close = _JSON_END.search(text, start, space)
            if close is not None:
                at = text.rfind("@", start, close.start())
                if at >= 0:
                    pos = close.start()  # later members may hold URLs of their own
        if at < 0:
            # no `@` before the whitespace: no opening up to it has a password either
            at = text.rfind("@", start, space)
        if at < 0 and not escaped and space < len(text):
            at = _spaced_at(text, start, space)
            pos = max(pos, at)
        if at >= 0:
            parts += (text[done:start], MASK)
            done = at
    return "".join(parts) + text[done:] if parts else text


# A URL percent-encoded whole (`https%3A%2F%2Fuser%3A...%40host`, a login's `next=`, OAuth's
# `redirect_uri=`): `%3A%2F%2F` (either case), the user (no encoded `:`, `/` or `@`, no
# whitespace, `&` or quote) and its encoded `:`; the password runs to the last `%40` before the
# parameter's end (whitespace, `&`, a quote). Encoded twice or three times, each `%` is `%25`
# (`%253A%252F%252F`, `%2540`): the opening's depth is its first `%`'s. Possessive: each
# opening is read once.
_ENCODED_OPENING: Final = re.compile(
    r"(?P<depth>%(?:25){0,2})3[Aa](?P=depth)2[Ff](?P=depth)2[Ff]"
    r"(?:[^\s%&\"']|%(?!(?:25){0,2}(?:3[Aa]|2[Ff]|40))[0-9A-Fa-f]{2})*+%(?:25){0,2}3[Aa]"
)
_ENCODED_END: Final = re.compile(r"[\s&\"']")


def _without_encoded_password(text: str) -> str:
    """The text with the password of every percent-encoded URL (`_ENCODED_OPENING`) as `***`.
    Linear: the parameter's end is found once per opening, and the search goes on from it."""
    parts: list[str] = []
    done = pos = 0
    while (opening := _ENCODED_OPENING.search(text, pos)) is not None:
        start = opening.end()
        found = _ENCODED_END.search(text, start)
        pos = len(text) if found is None else found.start()
        at = text.rfind(opening.group(1) + "40", start, pos)  # (`%2540`: encoded twice)
        if at > start:
            parts += (text[done:start], MASK)
            done = at
    return "".join(parts) + text[done:] if parts else text


def _spaced_at(text: str, start: int, space: int) -> int:
    """The `@` ending a password that holds whitespace (module docstring), or -1."""
    if _PORT.fullmatch(text, start, space) or _stops(text, start, space):
        return -1
    at = text.find("@", space, min(len(text), start + SPACED_MAX))
    if at < 0 or _stops(text, space, at) or not _HOST_START.match(text, at + 1):
        return -1
    return at


def _stops(text: str, start: int, end: int) -> bool:
    """Whether a path, a quote or a line break lies between: no password runs over it."""
    span = text[start:end]
    return any(c in span for c in "/\"'\n\r")


# A name, bare or quoted (`"password"`, `'password'`, JSON inside JSON's `\"password\"`) or
# in a form's brackets (`user[password]`, PHP's `[password] => ...`), then `=`, `:`, `=>`
# (Ruby's, Rails' parameters, PHP's and Perl's hashes), `:=` (SQL's `SET @db_pass := '...'`)
# or `%3D` (a URL's parameter inside a percent-encoded URL: `next=%2Freset%3Fpassword%3D...`),
# or a fullwidth equals sign or colon
# (U+FF1D, U+FF1A: Chinese and Japanese text, `密码` then U+FF1A); the name bounded, so each
# position is tried in bounded time. (A text of ASCII only is searched with the separators of
# ASCII: a character class holding others costs every record a fifth more.)
_NAME: Final = r"""(?:(?<![\w.-])(\\*["']|)([\w.-]{1,100})\1|\[([\w.-]{1,100})\])"""
_NAMED: Final = re.compile(_NAME + r"(\s*(?:=>|:=|[=:]|%3[Dd])\s*)")
_NAMED_WIDE: Final = re.compile(_NAME + r"(\s*(?:=>|:=|[=:\uff1d\uff1a]|%3[Dd])\s*)")
# a bare value: up to whitespace, `;`, `&`, `,` or a quote; in a text not all ASCII also an
# ideographic comma or full stop, a fullwidth comma or semicolon (U+3001, U+3002, U+FF0C,
# U+FF1B: a Chinese sentence goes on after a password)
_BARE: Final = re.compile(r"[^\s;&,\"']+")
_BARE_WIDE: Final = re.compile(r"[^\s;&,\"'\u3001\u3002\uff0c\uff1b]+")
# A password's names: `password`, `passwd`, `passphrase` anywhere (`PGPASSWORD`, `dbPassword`),
# `pass` and `pwd` as words (`DB_PASS`, `MYSQL_PWD`), `secret` (`client_secret`); not
# `passwords`, `passenger`, `bypass`, `compass`; a name ending in Chinese `密码` or `口令`, or
# Japanese `パスワード` (`数据库密码`; not `密码错误`, "password wrong": the last word says).
_PASSWORD_NAME: Final = re.compile(
    r"(?:pass(?:wd|word|phrase)|(?<![a-z])pass|(?<![a-z])pwd)(?![a-z])|secret(?!ar)"
    r"|(?:密码|口令|パスワード)\Z",
    re.IGNORECASE,
)


def password_name(name: str) -> bool:
    """Whether a name is a password's (the worker's own log lines mask its value)."""
    return _PASSWORD_NAME.search(name) is not None


def without_named_values(
    text: str, secret: Callable[[str], bool], shown: Callable[[str, str], bool] | None = None
) -> str:
    """The text with the value under every name `secret` accepts as `***`: `name=value`,
    `name: value`, `"name": "value"`, `'name': 'value'`, `"name" => "value"`, `user[name]=value`;
    a quoted value to its closing quote
    (spaces and all; to the end when it has none), a bare one to whitespace, `;`, `&`, `,` or
    a quote. `shown(name, value)`: True keeps that value (no secret after all). Linear: each
    name is looked at once, a value only under a secret's name."""
    if not text.isascii() and _STATING.search(text):
        text = _without_stated_values(text, secret)
    if "=" not in text and ":" not in text and (text.isascii() or not _FULLWIDTH.search(text)):
        return text
    parts: list[str] = []
    done = pos = 0
    named = _NAMED if text.isascii() else _NAMED_WIDE
    while (found := named.search(text, pos)) is not None:
        pos = found.end()
        name = found.group(2) or found.group(3)
        if not secret(name):
            continue  # a value under another name may hold `password=...`: look inside it
        value_start, value_end = _value(text, pos)
        if (
            shown is not None
            and value_end - value_start <= SHOWN_MAX
            and shown(name, text[value_start:value_end])
        ):
            continue  # (a long value is never shown: each value is sliced in bounded time)
        if value_end > value_start:
            parts += (text[done:value_start], MASK)
            done = pos = value_end
    return "".join(parts) + text[done:] if parts else text


# A Chinese or Japanese secret's name said to be its value (`密码为 S3cret`, `密码是S3cret`,
# "the password is ..."; `パスワードは S3cret`), maybe a colon after (`密码是` U+FF1A): the value is
# one of Latin letters, digits and marks up to whitespace, an ASCII or ideographic separator or
# the next CJK character, so `密码为空` ("is empty"), `密码是否正确` ("whether it is right"),
# `密码为必填项` ("is required") are prose and stay. The name's last word only: bounded.
_STATING: Final = re.compile("[为為是は]")
_STATED: Final = re.compile(
    r"(密码|口令|密钥|令牌|私钥|パスワード|トークン)[为為是は][ \t]*+(?:[:\uff1a][ \t]*+)?"
    r"([^\s,;&\"'\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]++)"
)


def _without_stated_values(text: str, secret: Callable[[str], bool]) -> str:
    def stated(found: re.Match[str]) -> str:
        if not secret(found.group(1)):
            return found.group()
        return found.group()[: found.start(2) - found.start()] + MASK

    return _STATED.sub(stated, text)


def _value(text: str, start: int) -> tuple[int, int]:
    """Where the value at `start` lies, its quotes left out (empty: none)."""
    quote = start
    if text.startswith(("b'", 'b"'), start):  # Python's bytes: `{'password': b'...'}`
        start = quote = start + 1
    while quote < len(text) and text[quote] == "\\":
        quote += 1
    if quote < len(text) and text[quote] in "\"'":
        opener = text[start : quote + 1]  # `"`, `'` or escaped as the JSON around it: `\"`
        begin = quote + 1
        if opener in "\"'":  # unescaped: a backslash escapes the next character
            end = _closing(text, begin, opener)
        else:  # escaped as JSON in JSON: `\"`, not a quote escaped inside it (`\\\"`)
            end = text.find(opener, begin)
            while end > begin and text[end - 1] == "\\":
                end = text.find(opener, end + 1)
            end = len(text) if end < 0 else end
        return begin, end
    bare = (_BARE if text.isascii() else _BARE_WIDE).match(text, start)
    return (start, bare.end()) if bare is not None else (start, start)


def _closing(text: str, begin: int, quote: str) -> int:
    pattern = _DOUBLE_END if quote == '"' else _SINGLE_END
    found = pattern.match(text, begin)
    return found.end() if found is not None else len(text)


_DOUBLE_END: Final = re.compile(r'(?:[^"\\]|\\.)*')
_SINGLE_END: Final = re.compile(r"(?:[^'\\]|\\.)*")


def without_passwords(text: str) -> str:
    """The worker's own log line with every URL's password and every value under a
    password's name (`password=`, `PGPASSWORD=`, `"password": "..."`) as `***`."""
    return without_named_values(without_url_password(text), password_name)
