"""Secrets in text the log sources show: a URL's password, values under a secret's name, HTTP
credentials and private keys.

Two rules, both masking with `***` (a URL's password by the rule the worker's own log lines use
too, `workers.masking`):

- `without_secrets` / `without_secret_values`: text the app did not choose to log, masked the
  most: `aci-evidence check`'s example lines (an app logs its DSN at start) and Docker's
  `attrs` (the daemon copies the container's environment into every line with
  `--log-opt env=...`): every name `secret_name` accepts.
- `without_log_secrets` / `mask_fields`: every record's message and field values on every
  backend (FILE, CLICKHOUSE, MOCK), before it is matched, mined into patterns or served, so the
  same line shows the same masked text whichever backend read it (docs/logs.md, "Secrets"). A
  message is evidence, so the names are narrower (`log_secret_name`: a cache's `key=`, a
  `token_count=` stay), a prose word under a secret's name other than a password's stays
  (`token: expired`), and a text holding none of the names, no `@`, costs one lowering and a
  few substring searches.
"""

from __future__ import annotations

import re
from typing import Final

from contracts.results import JsonScalar
from workers.masking import (
    MASK,
    SHOWN_MAX,
    without_named_values,
    without_url_password,
)
from workers.sources.logs.private_keys import (
    PEM_END,
    PRIVATE_KEY,
    opens_key,
    without_private_keys,
)
from workers.sources.logs.secret_logins import (
    without_auth_commands,
    without_login_lines,
    without_oracle_password,
    without_secret_literals,
    without_xml_secrets,
)
from workers.sources.logs.secret_names import NAMES, WORD, log_secret_name, secret_name, shown
from workers.sources.logs.secret_objects import without_secret_objects
from workers.sources.logs.secret_shapes import (
    may_hold_flag,
    names_key_file,
    without_cli_secrets,
    without_colour,
    without_flag_secrets,
    without_header_pairs,
    without_invisible,
)
from workers.sources.logs.sql_secrets import may_hold_sql_secret, without_sql_secrets
from workers.sources.logs.tokens import (
    without_api_keys,
    without_platform_tokens,
    without_vendor_keys,
)

__all__ = [
    "MASK", "KeyLines", "log_secret_name", "mask_fields", "secret_name", "without_cut_url_password",
    "without_log_secrets",
    "without_private_keys", "without_secret_values", "without_secrets", "without_url_password",
]  # fmt: skip

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
    text = _HTTP_CREDENTIAL.sub(rf"\1\2{MASK}", without_url_password(without_private_keys(text)))
    return without_named_values(text, secret_name)


# An HTTP credential: `Bearer <token>`, `Basic <base64>` anywhere, and `Authorization: token
# <token>` (GitHub's), `Negotiate`, `NTLM` (whatever follows them), any other scheme (`ApiKey`,
# Okta's `SSWS`) but Digest's and AWS's signatures (a `name=value` or a word under 8
# characters after it is no credential: `authorization: denied user=42`, `policy v2`);
# possessive, so a hostile line is read linearly.
_LOG_CREDENTIAL: Final = re.compile(
    r"((?:\b|(?<=%20))(?:bearer|basic)|\bauthori[sz]ation[\"']?\s*+[:=]\s*+[\"']?(?:(?:token|negotiate|ntlm)"
    r"(?=\s)|(?!digest\b|aws4-)[a-z][\w-]{0,30}+(?=\s++[\w.~+/-]{8,}+=*+(?![\w.~+/=-]))))"
    r"(\s++|%20)([\w.~+/=-]++)",
    re.IGNORECASE,
)


def _credential(found: re.Match[str]) -> str:
    value = found.group(3)
    word = value.rstrip(".")  # a sentence's full stop: systemd's `Reached target Basic System.`
    if WORD.fullmatch(word.rstrip("=")):  # prose: `Basic authentication`, `bearer token`
        return found.group()
    return found.group(1) + found.group(2) + MASK + value[len(word) :]


# A password in SQL (a slow or general query log, an ORM's statement log): MySQL's `IDENTIFIED
# [WITH plugin] BY|AS '...'`, `SET PASSWORD [FOR user] = '...'`, PostgreSQL's `PASSWORD '...'`;
# the quoted literal to its closing quote (to the end when it has none). Possessive: linear.
_SQL_PASSWORD: Final = re.compile(
    r"(\b(?:identified\s++(?:with\s++\S++\s++)?(?:by|as)\s++|password(?:\s++for\s++\S++)?"
    r"(?:\s*+=\s*+|\s++))(?:password\s*+\(\s*+)?)('|\")((?:(?!\2)[^\\]|\\.)*+)",
    re.IGNORECASE,
)


def _sql_literal(found: re.Match[str]) -> str:
    return found.group(1) + found.group(2) + MASK


# A setting under a secret's name in SQL, its quoted value (`name = '...'` and `:=` are
# `without_named_values`'): PostgreSQL's `set_config('app.api_key', '...', false)` and `SET
# [SESSION|LOCAL] app.secret TO '...'` (`ALTER ROLE r SET ... TO`, `ALTER SYSTEM SET`); the
# literal to its closing quote (`''` inside), to the end when it has none. Possessive: linear.
_SQL_SETTING: Final = re.compile(
    r"(\bset_config\s*+\(\s*+'([\w.-]{1,100}+)'\s*+,\s*+"
    r"|\bset\s++(?:session\s++|local\s++)?([\w.-]{1,100}+)\s++to\s++)'((?:[^'\\]|\\.|'')*+)",
    re.IGNORECASE,
)


def _sql_setting(found: re.Match[str]) -> str:
    if not log_secret_name(found.group(2) or found.group(3)):
        return found.group()
    return found.group(1) + "'" + MASK


# Erlang terms as RabbitMQ's crash reports print them (its issues 1837, 3210, 3803): a pair
# `{password,"..."}`, `{default_pass,<<"...">>}`, `{<<"password">>,<<"...">>}` whose name is
# a secret's, and the Erlang AMQP client's parameters, `{amqp_params_network,<<"user">>,
# <<"password">>,...}` (the password second, maybe on the next line). Possessive: linear.
_ERLANG_PAIR: Final = re.compile(
    r"""\{\s*+(?:<<"([^"\\]{1,64}+)">>|'?([A-Za-z]\w{0,63}+)'?)\s*+,\s*+"""
    r"""(?:(<<"|")((?:[^"\\]|\\.)*+)|(')((?:[^'\\]|\\.)*+))"""
)
_AMQP_PARAMS: Final = re.compile(
    r"""(amqp_params_(?:network|direct)\s*+,\s*+<<"(?:[^"\\]|\\.)*+">>\s*+,\s*+<<")"""
    r"""(?:[^"\\]|\\.)*+"""
)


# A word that is an authority with a password and no scheme (`app:***@db-1:5432`, a quoted
# `"admin:***@api.local"`: a Host header, an Envoy line read as text, a connection string):
# it starts after a space, a quote, `=`, `(`, `[` or `<`, and neither its user nor its
# password holds one of them (each is read to the next start at most: linear); a URI of a
# scheme without `//` (`mailto:`, `sip:`) is an address, an image's `name:tag@sha256:...`
# no host and port. (A password holding such a character or an `@` is masked only as a
# field's whole value, `_AUTHORITY`.)
_WORD_AUTHORITY: Final = re.compile(
    r"(?<![^\s\"'=(\[<])(?!(?:mailto|sips?|tel|xmpp):)([^\s:/@\"'=(\[<>)\],]{1,64}+:)"
    r"[^\s/@\"'=(\[<]++(?=@[\w.-]++(?::\d{1,5}+)?+(?![^\s\"'),\]>;]))"
)


def _erlang_pair(found: re.Match[str]) -> str:
    opening = 3 if found.group(3) is not None else 5  # a binary or a string, or an atom
    name, value = found.group(1) or found.group(2), found.group(opening + 1)
    if not value or not log_secret_name(name) or _shown_in_log(name, value):
        return found.group()
    return found.string[found.start() : found.end(opening)] + MASK


def without_log_secrets(text: str) -> str:
    """A log record's text (its message, a field's value) with every private key, URL
    password, HTTP credential, password in SQL and value under a secret's name
    (`log_secret_name`) as `***`."""
    # What a secret's name, an HTTP credential or a private key holds is looked for in the
    # lowered text (`@`: a URL's password) with `in`, spelt out: a loop over the words, or one
    # regular expression of them, costs a third more (its case-insensitive form ten times).
    # Colour codes and zero-width characters first (`password\x1b[0m=...`, `pass\u200bword`),
    # then what is known by its shape (`secret_shapes`, `tokens`): a token's prefix, a
    # client's password option, before the names.
    if "\x1b" in text:
        text = without_colour(text)
    if not text.isascii():  # (O(1): CPython knows; zero-width characters, names in CJK)
        text = without_invisible(text)
        cjk = (  # (`密` stands for 密码 and 密钥)
            "密" in text or "口令" in text or "令牌" in text or "私钥" in text
            or "パスワード" in text or "トークン" in text
        )  # fmt: skip
    else:
        cjk = False
    if "@" in text or "%40" in text or "%2540" in text:
        text = without_url_password(without_oracle_password(text))
        if ":" in text:
            text = _WORD_AUTHORITY.sub(lambda found: found.group(1) + MASK, text)
    if "amqp_params_" in text:  # (no secret's name in it: before the test for one below)
        text = _AMQP_PARAMS.sub(lambda found: found.group(1) + MASK, text)
    if len(text) >= 15:  # `tokens.may_hold_platform_token`, `may_hold_api_key`, inlined
        if (
            "eyJ" in text or "IA" in text or "gh" in text or "xox" in text
            or ("gl" in text and ("-" in text or "_" in text))
        ):  # fmt: skip
            text = without_platform_tokens(text)
        if (
            ("sk-" in text or ("_" in text and (
                "k_" in text or "npm_" in text or "hf_" in text or "sec_" in text
            )))
            or "AIza" in text or "hooks" in text or "/bot" in text or "sig=" in text
        ):  # fmt: skip
            text = without_api_keys(text)
        if "SK" in text or "SG." in text:  # (`tokens.may_hold_vendor_key`, inlined)
            text = without_vendor_keys(text)
    if (" -" in text or "\t-" in text or "'-" in text or '"-' in text) and (
        "mysql" in text or "mariadb" in text or "sshpass" in text or "curl" in text
        or "redis-cli" in text or "docker" in text or "podman" in text or "mongo" in text
        or "sqlcmd" in text or "ldap" in text or "openssl" in text or "login" in text
        or "htpasswd" in text
    ):  # fmt: skip
        text = without_cli_secrets(text)  # (its commands' names are matched lower-case)
    low = text.lower()
    if not (
        "pass" in low or "pwd" in low or "secret" in low or "token" in low or "key" in low
        or "auth" in low or "cred" in low or "cookie" in low or "private" in low or "jwt" in low
        or "dsn" in low or "session" in low or "bearer" in low or "basic" in low
        or "identified" in low or cjk or "signature" in low or "crypt" in low
    ):  # fmt: skip
        return text
    if may_hold_sql_secret(low):  # a row's value under a secret's column, a cipher's key
        text = without_sql_secrets(text, log_secret_name)
    if "auth" in low or "pass" in low:  # Redis', SMTP's AUTH, FTP's PASS (before the names)
        text = without_auth_commands(text)
    if "secret" in low:  # `kubectl create secret generic x --from-literal=key=***`
        text = without_secret_literals(text)
    if "</" in text or "value=" in text:  # XML: `<password>***</password>`, `value="***"`
        text = without_xml_secrets(text, log_secret_name)
    if "pass" in low:  # `.netrc`'s `machine ... password`, `echo ... | docker login`
        text = without_login_lines(text)
    if "secret" in low and "ata" in text:  # a Kubernetes Secret's data, stringData
        text = without_secret_objects(text)
    if may_hold_flag(text):  # `--password S3cret`, `--token=abc`: a flag's value, whatever
        text = without_flag_secrets(text, log_secret_name)
    if "identified" in low or "password" in low:
        text = _SQL_PASSWORD.sub(_sql_literal, text)
    if "set" in low and "'" in text:
        text = _SQL_SETTING.sub(_sql_setting, text)
    if "private key" in low:
        text = without_private_keys(text)
    if "bearer" in low or "basic" in low or "auth" in low:
        text = _LOG_CREDENTIAL.sub(_credential, text)
    if ("'," in text or '",' in text) and (  # `["Cookie","sid=..."]`: a header's two words
        "cookie" in low or "authori" in low or "-key" in low or "-token" in low
        or "-auth" in low
    ):  # fmt: skip
        text = without_header_pairs(text, log_secret_name, shown)
    if "{" in text and "," in text:  # (an Erlang tuple)
        text = _ERLANG_PAIR.sub(_erlang_pair, text)
    return without_named_values(text, log_secret_name, _shown_in_log)


def _shown_in_log(name: str, value: str) -> bool:
    """`_shown`, and a key's file under a key's name (`ssl_key=/etc/ssl/client-key.pem`)."""
    return shown(name, value) or names_key_file(name, value)


# A URL's opening up to its password (`scheme://user:`), as `workers.masking`'s rule finds it.
_URL_OPENING: Final = re.compile(r":(?:\\*/){2}[^/\s:]*:")


def without_cut_url_password(text: str) -> str:
    """A text cut short (a store's Body cut to `max_line_bytes` before it is masked): a URL in
    its last word whose password the cut left without its `@` shows `***` to the end, not the
    head of its password. Linear: the last word is split off once, searched once."""
    if not text or text[-1].isspace() or "/" not in text:
        return text
    word = text.rsplit(None, 1)[-1]
    found = _URL_OPENING.search(word)
    if found is None or "@" in word[found.end() :]:
        return text  # no URL, or its password ends in the text: masked by the usual rule
    return text[: len(text) - len(word) + found.end()] + MASK


# A value that is an authority with a password and no scheme (`admin:pw@api.local:8443`, an
# HTTP request's Host or :authority as a proxy logs it; the host a name or an IPv6 literal,
# a numeric port: `nginx:1.25@sha256:...`, an image, is none; the password to the last `@`,
# given back one character at a time, each tried at an `@` only: linear): the URL rule
# wants `://`.
_AUTHORITY: Final = re.compile(
    r"([^\s:/@]{1,256}:)[^\s/]+(?=@(?:[\w.-]++|\[[0-9A-Fa-f:.]++\])(?::\d{1,5})?$)"
)


def _without_authority_password(value: str) -> str:
    found = _AUTHORITY.match(value)
    return value if found is None else found.group(1) + MASK + value[found.end() :]


def mask_fields(fields: dict[str, JsonScalar]) -> None:
    """Mask a record's field values in place: a value under a secret's name whole (a number
    too: a PIN), unless a prose word or a yes/no; any other text by `without_log_secrets`,
    and the password of an authority that is the whole value (`user:***@host`)."""
    names = NAMES
    for name, value in fields.items():
        secret = names.get(name)  # (inlined: a call per field costs more than the rest)
        if secret is None:
            secret = log_secret_name(name)
        if not secret:
            if type(value) is str:
                value = without_log_secrets(value)
                fields[name] = _without_authority_password(value) if "@" in value else value
        elif type(value) is str:
            if len(value) > SHOWN_MAX or not _shown_in_log(name, value):
                fields[name] = MASK
        elif value is not None and type(value) is not bool:
            fields[name] = MASK


class KeyLines:
    """The lines of one file read as plain text (no record of its format), in order: a PEM
    private key written over lines (`-----BEGIN PRIVATE KEY-----`, its body, its end) shows
    no line of its body, which alone says nothing a rule could see."""

    __slots__ = ("inside",)

    def __init__(self) -> None:
        self.inside = False

    def see(self, line: str) -> None:
        """Note a line that is not shown (the prefilter skipped it)."""
        if self.inside:
            self.inside = PEM_END not in line
        elif PRIVATE_KEY in line:
            self.inside = opens_key(line)

    def body(self, text: str) -> str:
        """A record's text where each line of the file is a record (Docker's, the kubelet's,
        syslog's lines of a key an app printed): inside a key, `***` up to its closing line;
        the rest is masked as every record is (`without_log_secrets`, later)."""
        if not self.inside:
            self.see(text)
            return text
        end = text.find(PEM_END)
        if end < 0:
            return MASK
        self.inside = False
        self.see(text[end:])
        return MASK + text[end:]

    def masked(self, line: str) -> str:
        """The line as shown: inside a key, `***` up to the key's closing line."""
        if self.inside:
            end = line.find(PEM_END)
            if end < 0:
                return MASK
            self.inside = False
            return MASK + without_log_secrets(line[end:])
        self.see(line)
        return without_log_secrets(line)
