"""Which names in a log record are a secret's, and which values under one are no secret
(`masking`'s rules read them): `secret_name` (a key whose value is never shown),
`log_secret_name` (a log message's: less the names of figures about a secret, `token_count`,
and a store's keys, `cache_key`), and `shown` (a prose word under one: `token: expired`)."""

from __future__ import annotations

import re
from typing import Final

from workers.masking import password_name
from workers.sources.logs.secret_shapes import without_invisible

__all__ = ["NAMES", "WORD", "log_secret_name", "secret_name", "shown"]

# A name that says its value is a secret: a password (`DB_PASSWORD`, `PGPASS`, `passwd`,
# `DB_PWD`), a secret, a token, a credential (`CREDS`), a private or API key
# (`STRIPE_API_KEY`, `ssh_key`, `key`), `auth` and `Authorization`, a cookie, a session's id or
# key, a JWT, a DSN (Sentry's holds its key as the URL's user); a word only where it stands
# alone, so `MONKEY`, `KEYSPACE`, `passenger`, `author` are not secrets; Azure's `AccountKey`
# and `SharedAccessKey` (not `SharedAccessKeyName`); a name ending in Chinese or Japanese for a
# password, a key, a token or a private key (`数据库密码`, `访问令牌`, `パスワード`; not
# `密码错误`, "password wrong": the last word says).
_SECRET_NAME: Final = re.compile(
    r"pass(?:wd|word|phrase)?(?![a-z])|secret|token|credential|private|cookie"
    r"|(?<![a-z])(?:api|access|ssh|signing|encryption|master|session)?[_.-]?key(?![a-z])"
    r"|(?<![a-z])(?:auth|authori[sz]ation|authentication|pwd|creds?|jwt|dsn|bearer)(?![a-z])"
    r"|(?<![a-z])session[_.-]?id(?![a-z])|(?<![a-z])session\Z|(?:account|sharedaccess)key(?![a-z])"
    r"|(?<![a-z])(?:amz|goog)[_.-]?signature(?![a-z])"
    r"|(?:密码|口令|密钥|令牌|私钥|パスワード|トークン)\Z",
    re.IGNORECASE,
)


def secret_name(name: str) -> bool:
    """Whether a key names a secret (its value is then never shown)."""
    return _SECRET_NAME.search(without_invisible(name)) is not None


# A log message's names of a secret: `secret_name` less the names of what is no secret but
# figures about one (`token_count`, `max_tokens`, `key_id`, `token_url`: the last word says)
# and the keys of a store (a cache's `key=user:42`, `partition_key`, `cacheKey`): a
# `password_file` names where a password is, a `secret_name` which one. A session's id is a
# credential: it stays a secret.
_WORDS: Final = re.compile(r"[_.\-\s]+|(?<=[a-z0-9])(?=[A-Z])")
_FIGURE_WORDS: Final = frozenset(
    "count counts num number len length size limit limits usage used total type kind ttl "
    "expiry expires exp expiration in id ids name names index remaining budget version ms "
    "seconds age enabled present valid missing status source provider method scheme mode "
    "format file path url uri endpoint tokens keys stdin".split()
)
_STORE_KEYS: Final = frozenset(
    "cache partition sort primary row object routing idempotency dedup dedupe lock redis map "
    "hash foreign shard bucket cursor group lookup index unique composite message event "
    "record item rate job task queue topic stream metric label tag config feature flag file "
    "table column field s3 memcache memcached kv".split()
)
_SESSION_ID: Final = re.compile(r"(?i)(?<![a-z])session[_.-]?id(?![a-z])")


# Names seen (fields repeat theirs on every record): bounded in number and length, so a
# hostile file of long or ever new keys holds at most 4,096 names of 200 characters.
NAMES: dict[str, bool] = {}
_NAMES_MAX: Final = 4096
_NAME_CHARS: Final = 200


def log_secret_name(name: str) -> bool:
    """Whether a name in a log record (a field's, or `name=` in its message) is a secret's."""
    found = NAMES.get(name)
    if found is None:
        found = _secret_in_log(name)
        if len(name) <= _NAME_CHARS:
            if len(NAMES) >= _NAMES_MAX:
                NAMES.clear()  # (racing threads at worst work a name out twice)
            NAMES[name] = found
    return found


def _secret_in_log(name: str) -> bool:
    name = without_invisible(name)  # (`pass\u200bword` is `password`)
    if not secret_name(name):
        return False
    if _SESSION_ID.search(name):
        return True
    words = [w.lower() for w in _WORDS.split(name) if w]
    if not words or words[-1] in _FIGURE_WORDS:
        return False
    if words[-1] == "key":  # a bare `key`, or a store's: `cache_key`
        return len(words) > 1 and words[-2] not in _STORE_KEYS
    return True


# A prose word: letters, the first one maybe a capital (`expired`, `Bearer`, `invalid`); a
# token, a key or a hash holds a digit, a mark or a capital further in, or is longer.
WORD: Final = re.compile(r"[A-Za-z][a-z]{0,15}")
# Chinese or Japanese prose, 16 characters at most (`令牌` U+FF1A `已过期`, "token: expired")
_CJKWORD: Final = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]{1,16}")


# An enhanced mail status code (RFC 3463: class, subject, detail), Postfix's `dsn=5.1.1`
_STATUS_CODE: Final = re.compile(r"[245]\.\d{1,3}\.\d{1,3}")
# The shell's variables for the working directory (sudo logs `PWD=/home/vagrant`)
_WORKING_DIRECTORY: Final = frozenset({"PWD", "OLDPWD"})
# MySQL's and MariaDB's refused login, `Access denied for user 'u'@'h' (using password: YES)`:
# whether a password was sent (YES: a wrong one; NO: none), the value taken up to whitespace
_PASSWORD_SENT: Final = frozenset({"YES)", "NO)"})


def shown(name: str, value: str) -> bool:
    """Whether a value under a secret's name is no secret: a prose word, unless the name is a
    password's (`token: expired`, `Authorization: Bearer ***` stay; `password=hunter` never),
    Chinese or Japanese prose (the same rule: "token: expired" in Chinese stays), the shell's
    working directory (sudo's `PWD=/home/vagrant`; `MYSQL_PWD`, `pwd` stay masked), MySQL's
    `(using password: YES)` / `NO)`, which says whether one was sent, or a mail status code
    under `dsn` (Postfix's `dsn=4.4.1`)."""
    if name in _WORKING_DIRECTORY and value.startswith("/"):
        return True
    if name == "password" and value in _PASSWORD_SENT:
        return True
    if name.lower() == "dsn" and _STATUS_CODE.fullmatch(value):
        return True  # a mail server's delivery status (Postfix's `dsn=4.4.1`), no DSN's URL
    word = WORD.fullmatch(value) or (not value.isascii() and _CJKWORD.fullmatch(value))
    return bool(word) and not password_name(name)
