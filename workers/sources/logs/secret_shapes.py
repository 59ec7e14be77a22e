"""Secrets known by their shape rather than by a `name=` before them (`masking`'s rules):
command lines' flags, the password options of a few clients, a header written as a pair of
words, and the terminal control sequences and zero-width characters that would hide them
(tokens by their well-known prefixes, AWS key pairs and JWTs: `tokens`).

- a flag under a secret's name (`log_secret_name`), its value after a space or `=`:
  `--password S3cret`, `--db-password=S3cret`, `-token 'a b'` (Go's single dash): the value is
  masked whatever it is (a word too: `--token abc`), unless it is another flag (`-`...), or,
  after a space, a word of English's glue (`use --token to authenticate`: the flag named in
  prose) or a shell variable's reference or a placeholder (`--token $GH_TOKEN`, `<token>`);
- the clients whose short option is a password: MySQL's and MariaDB's (`mysql`,
  `mysqldump`, `mariadb-dump`, ...: `-pS3cret`, written glued; `-p name` prompts and `name`
  is the database, kept), `sshpass -p S3cret` (its own options only: a later `ssh -p 2222`
  is a port), `curl -u user:S3cret` (`--user`, `-U`, `--proxy-user`; `-u user` alone prompts),
  `redis-cli -a S3cret`, `docker login -p S3cret` (`podman login`), MongoDB's `mongosh -p
  S3cret` (`mongodump`, ...; `-p` alone prompts), `sqlcmd -P S3cret`, OpenLDAP's `ldapsearch
  -w S3cret` (`ldapadd`, `ldapmodify`, ...; `-W` prompts), `openssl enc -k S3cret` (`-K`, a
  raw key), the `-p` of `az login`, `helm registry login`, `oras login`, `nerdctl login`,
  `buildah login`, `skopeo login` (as docker's), `htpasswd -b file user S3cret`; each within
  its command, up to `|`, `;`, `&`, a line break, the next such command or 1,024 characters; a
  value quoted, JSON-escaped (`\\"a b\\"`) or with an escaped space (`a\\ b`) whole; a
  command line logged as a list of its words too (`['mysql', '-pS3cret']`, `["--token","x"]`);
- an HTTP header written as a pair of quoted words (`["Cookie","sid=..."]`).

Cheap first: each rule runs only when a substring it needs is in the text (`"-"`, a
command's name); every expression is possessive or bounded: linear.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from workers.masking import MASK

__all__ = [
    "CONTROL_SEQUENCE",
    "INVISIBLE",
    "hides_text",
    "may_hold_flag",
    "names_key_file",
    "without_cli_secrets",
    "without_colour",
    "without_flag_secrets",
    "without_header_pairs",
    "without_invisible",
]  # fmt: skip

# Terminal control sequences, as `files.without_colour` strips them from a file's bytes: in a
# ClickHouse Body, a JSON-escaped Docker or jsonl line (`\u001b[0m`). Colour and style codes
# (SGR, `ESC[...m`) and every other CSI (`ESC[K` erases, `ESC[?25l` hides the cursor), an OSC
# ended by BEL or ST on its line (a title, a hyperlink), a character set's choice (`ESC(B`: `tput
# sgr0`): a terminal shows none of them, so `password\x1b[K=...` reads `password=...`.
# An OSC's body is possessive and holds no ESC: read once, never given back (linear), and
# of any length, as CLICKHOUSE takes it out (RE2 allows no bound over 1,000): a bound of
# 1,024 left a hyperlink to a longer address shown, and found, on FILE only.
CONTROL_SEQUENCE: Final = (
    r"\x1b(?:\[[0-?]{0,64}[ -/]{0,4}[@-~]|\][^\x07\x1b\n]*+(?:\x07|\x1b\\)|[()*+][0-9A-Za-z])"
)
_SGR: Final = re.compile(CONTROL_SEQUENCE)


def without_colour(text: str) -> str:
    """The text without its terminal control sequences (`password\\x1b[0m=...` is
    `password=...`)."""
    return _SGR.sub("", text) if "\x1b" in text else text


# Characters a reader does not see (zero-width space, non-joiner, joiner, word joiner, a BOM, a
# soft hyphen): `pass\u200bword=...` reads `password=...`.
INVISIBLE: Final = "\u00ad\u200b\u200c\u200d\u2060\ufeff"
_INVISIBLE: Final = re.compile(f"[{INVISIBLE}]")


def hides_text(text: str) -> bool:
    """Whether the text holds what masking takes out (a control sequence, a zero-width
    character), so that a word of the shown text may not be in it as it is."""
    return "\x1b" in text or (not text.isascii() and _INVISIBLE.search(text) is not None)


def without_invisible(text: str) -> str:
    """The text without zero-width characters and soft hyphens (an ASCII text: as it is)."""
    return text if text.isascii() else _INVISIBLE.sub("", text)


# A value as a shell or JSON writes it: quoted as JSON escapes a quote (`\\"a b\\"`, a command
# in a JSON string) to the next quote, in single quotes, in double quotes (`\\"` inside), or
# bare to whitespace, a quote or an ideographic comma, full stop or semicolon (U+FF0C after
# `--password S3cret`: a Chinese sentence goes on; `a\\ b`: an escaped space is no end); to the
# end when it has no closing quote.
VALUE: Final = (
    r"""(\\++"[^"]*+"?|'[^']*+'?|"(?:[^"\\]|\\.)*+"?"""
    r"""|(?:[^\s'"\\\u3001\u3002\uff0c\uff1b]|\\.)++)"""
)
# from one word of a list to the next: `', '`, `","`
_NEXT_WORD: Final = r"'\s*+,\s*+'|\"\s*+,\s*+\""

# `--name value`, `--name=value`, `-name value`: a flag at the start, after whitespace or a
# quote (`(?<!...-)` after its first dash: the expression opens with a literal, searched fast),
# its value (`VALUE`), never another flag; the words of a command line logged as a list
# (`['--password', 'S3cret']`, JSON's `["--token","S3cret"]`) too.
_FLAG: Final = re.compile(
    r"-(?<![^\s'\"]-)-?+([A-Za-z][\w.-]{0,60}+)(=|\s++|" + _NEXT_WORD + r")(?=[^\s-])" + VALUE
)


def may_hold_flag(text: str) -> bool:
    """Whether `without_flag_secrets` may change the text: a dash opening a word."""
    return (
        " -" in text or "\t-" in text or "\n-" in text or "'-" in text or '"-' in text
        or text[:1] == "-"
    )  # fmt: skip


def without_flag_secrets(text: str, secret: Callable[[str], bool]) -> str:
    """The text with the value of every flag under a secret's name (`secret`) as `***`."""

    def flag(found: re.Match[str]) -> str:
        if (
            not secret(found.group(1))
            or names_key_file(found.group(1), found.group(3))
            or (found.group(2).isspace() and _names_no_value(found.group(3)))
        ):
            return found.group()
        return found.group()[: found.start(3) - found.start()] + quoted_mask(found.group(3))

    return _FLAG.sub(flag, text)


# A flag named in prose (`use --token to authenticate`, `pass --password or set DB_PASSWORD`):
# the word after it is English's glue, not its value; or the value is a shell variable's
# reference (`--token $GH_TOKEN`, `--api-key ${API_KEY}`) or a placeholder (`--token <token>`),
# which says where the secret is, not what. After a space only: `--token=to` is a value.
_PROSE_AFTER_FLAG: Final = frozenset(
    "to for or and the a an in on of is are was with when if from as at by instead option flag "
    "argument parameter not only also then must should can will may which that this it you we "
    "were be".split()
)
REFERENCE: Final = re.compile(r"\$\{?[A-Z_][A-Z0-9_]{0,63}\}?|<[\w .-]{1,40}>")


def _names_no_value(value: str) -> bool:
    return value in _PROSE_AFTER_FLAG or REFERENCE.fullmatch(value) is not None


def names_key_file(name: str, value: str) -> bool:
    """Whether a value under a key's name (`--ssl-key`, `tls_key`) is the key's file, no
    secret: a path whose last part has an extension (a key itself, base64 or hex, holds no
    `.`): `/etc/mysql/client-key.pem`, `./certs/tls.key`."""
    path = value.strip("'\"")
    return (
        name[-3:].lower() == "key"
        and path.startswith(("/", "./", "../", "~/"))
        and "." in path.rpartition("/")[2]
        and not any(c.isspace() or c in "'\"" for c in path)
    )


def quoted_mask(value: str) -> str:
    """`***` in place of a value, its quotes kept (`'***'`, a JSON string's `\\"***\\"`)."""
    bare = value.lstrip("\\")
    if bare[:1] not in ("'", '"'):
        return MASK
    quote = value[: len(value) - len(bare) + 1]
    return quote + MASK + (quote if len(value) > len(quote) and value.endswith(quote) else "")


# The clients whose short option holds a password, by the name they are run as.
_COMMANDS: Final = (
    r"(?<![\w.-])(?:(mysql(?:dump|admin|import|show|check|slap|binlog)?"
    r"|mariadb(?:-dump|-admin|-import|-show|-check|-slap|-binlog)?)|(sshpass)|(curl)"
    r"|(redis-cli)|((?:docker|podman)\s++login"
    r"|mongo(?:sh|dump|restore|export|import|stat|top|files)?)|(sqlcmd)"
)
_COMMAND_END: Final = r")(?:\.exe)?(?=\s|" + _NEXT_WORD + ")"
_COMMAND: Final = re.compile(_COMMANDS + _COMMAND_END)
# with OpenLDAP's tools and OpenSSL: searched only in a text naming them (each alternative more
# costs every line with ` -` that is searched: an access log's `"-"`)
_COMMAND_MORE: Final = re.compile(
    _COMMANDS + r"|(ldap(?:search|add|modify|delete|compare|whoami|modrdn|exop|passwd))"
    r"|(openssl)|((?:az|oras|nerdctl|buildah|skopeo|crane\s++auth|helm\s++registry)\s++login)"
    r"|(htpasswd)" + _COMMAND_END
)
_SEGMENT_MAX: Final = 1024
_SEGMENT_END: Final = re.compile(r"[\n|;&]")
# glued: `-pS3cret`, `'-pS3cret'` (not `'-p'`: a word alone, which prompts)
_MYSQL: Final = re.compile(r"""(?:(?<=\s)|(?<=['"])(?!-p['"]))(-p)""" + VALUE)
# (its words apart by whitespace, or as a list's: `'sshpass', '-p', '...'`)
_TO_VALUE: Final = r"(?:" + _NEXT_WORD + r"|\s*+)"
_SSHPASS: Final = re.compile(
    r"(?:\s++|" + _NEXT_WORD + r")(?:-[fdP]" + _TO_VALUE + "(?:" + VALUE[1:]
    + r"|-[evh]|(-p" + _TO_VALUE + ")" + VALUE + ")"
)  # fmt: skip
# curl's `user:password`, whole quoted (the password to the closing quote) or bare (to the
# end of a `VALUE`: `alice:'a b'`)
_CURL: Final = re.compile(r"(?<=[\s'\"])(?:-[uU]|--(?:proxy-)?user(?=[=\s'\"]))(?:" + _NEXT_WORD
                          + r"|=|\s*+)(\\*+['\"]|)[^\s:'\"\\]*+:")  # fmt: skip
_BARE_VALUE: Final = re.compile(VALUE)
_REDIS: Final = re.compile(r"(?<=[\s'\"])(-a(?:\s++|" + _NEXT_WORD + "))" + VALUE)
# docker's, podman's, mongo's `-p`, sqlcmd's `-P`: never a flag, nor the end of a word (`'-p']`)
_ALONE: Final = r"(?!-|['\"][,\]])"
_LOGIN: Final = re.compile(r"(?<=[\s'\"])(-p(?:" + _NEXT_WORD + r"|\s*+))" + _ALONE + VALUE)
_SQLCMD: Final = re.compile(r"(?<=[\s'\"])(-P(?:" + _NEXT_WORD + r"|\s*+))" + _ALONE + VALUE)
# OpenLDAP's tools' bind password `-w` (`-W` prompts), OpenSSL's `-k` password and `-K` raw key
_LDAP: Final = re.compile(r"(?<=[\s'\"])(-w(?:" + _NEXT_WORD + r"|\s++))" + _ALONE + VALUE)
_OPENSSL: Final = re.compile(r"(?<=[\s'\"])(-[kK](?:" + _NEXT_WORD + r"|\s++))" + _ALONE + VALUE)


def _sshpass(segment: str) -> str:
    # sshpass's own options come first (`-f file`, `-e`, ...); the first other word is the
    # command it runs, whose `-p` (ssh's port) is no password
    pos = 0
    while (found := _SSHPASS.match(segment, pos)) is not None:
        if found.group(1) is not None:
            return segment[: found.start(2)] + MASK + segment[found.end() :]
        pos = found.end()
    return segment


def _curl(segment: str) -> str:
    parts: list[str] = []
    done = 0
    for found in _CURL.finditer(segment):
        start = found.end()
        if start < done:
            continue  # (inside a password masked already)
        if quote := found.group(1):
            end = segment.find(quote, start)
            end = len(segment) if end < 0 else end
        else:
            value = _BARE_VALUE.match(segment, start)
            end = start if value is None else value.end()
        if end > start:
            parts += (segment[done:start], MASK)
            done = end
    return "".join(parts) + segment[done:]


_WORD_SPAN: Final = re.compile(r"\S++")


def _htpasswd(segment: str) -> str:
    # `htpasswd -b[c...] file user password`, `-bn user password`: the password is the last
    # of the words after the options, only with `-b` (else it prompts)
    words = list(_WORD_SPAN.finditer(segment))
    flags = ""
    while words and words[0].group().startswith("-"):
        flags += words.pop(0).group()[1:]
    need = 2 if "n" in flags else 3
    if "b" not in flags or len(words) < need:
        return segment
    secret = words[need - 1]
    return segment[: secret.start()] + MASK + segment[secret.end() :]


def _masked_group(pattern: re.Pattern[str], group: int) -> Callable[[str], str]:
    def sub(segment: str) -> str:
        def one(found: re.Match[str]) -> str:
            return found.group()[: found.start(group) - found.start()] + MASK

        return pattern.sub(one, segment)

    return sub


_RULES: Final = (_masked_group(_MYSQL, 2), _sshpass, _curl, _masked_group(_REDIS, 2),
                 _masked_group(_LOGIN, 2), _masked_group(_SQLCMD, 2), _masked_group(_LDAP, 2),
                 _masked_group(_OPENSSL, 2), _masked_group(_LOGIN, 2), _htpasswd)  # fmt: skip


def without_cli_secrets(text: str) -> str:
    """The text with the password options of MySQL/MariaDB clients, sshpass, curl,
    redis-cli, `docker login`, MongoDB's tools and sqlcmd (module docstring) as `***`.
    Linear: the commands' segments do not overlap."""
    more = "ldap" in text or "openssl" in text or "login" in text or "htpasswd" in text
    commands = list((_COMMAND_MORE if more else _COMMAND).finditer(text))
    if not commands:
        return text
    parts: list[str] = []
    done = 0
    for n, found in enumerate(commands):
        start = found.end()
        limit = commands[n + 1].start() if n + 1 < len(commands) else len(text)
        limit = min(limit, start + _SEGMENT_MAX)
        stop = _SEGMENT_END.search(text, start, limit)
        end = limit if stop is None else stop.start()
        kind = found.lastindex or 1  # (the one alternative's group that matched)
        parts += (text[done:start], _RULES[kind - 1](text[start:end]))
        done = end
    return "".join(parts) + text[done:]


# An HTTP header written as a pair of quoted words (`["Cookie","sid=..."]`, ASGI's `(b'cookie',
# b'sid=...')`, `('X-Api-Key', '...')`): the name bounded, the value to its closing quote.
_HEADER_PAIR: Final = re.compile(r"""(?<![\w.-])b?(['"])([\w-]{1,100})\1\s*+,\s*+b?(['"])""")
_CREDENTIAL_HEADERS: Final = frozenset(
    {"authorization", "proxy-authorization", "cookie", "set-cookie"}
)


def without_header_pairs(
    text: str, secret: Callable[[str], bool], shown: Callable[[str, str], bool]
) -> str:
    """The text with the value of every header pair under a credential's header (Cookie,
    Authorization, a dashed secret's name: `X-Api-Key`) as `***`, unless `shown(name,
    value)` keeps it (a prose word) or it is masked already (`Bearer ***`)."""
    parts: list[str] = []
    done = 0
    for found in _HEADER_PAIR.finditer(text):
        name, start = found.group(2), found.end()
        if start < done or not (
            name.lower() in _CREDENTIAL_HEADERS or ("-" in name and secret(name))
        ):
            continue
        end = text.find(found.group(3), start)
        end = len(text) if end < 0 else end
        value = text[start:end]
        if MASK in value or (end - start <= 64 and shown(name, value)):
            continue
        parts += (text[done:start], MASK)
        done = end
    return "".join(parts) + text[done:] if parts else text
