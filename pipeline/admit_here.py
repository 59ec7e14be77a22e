"""Admission in the submitter's own round trip, for a client that Redis trusts as a worker.

Admission (`pipeline.admission`) exists because a submitter is not trusted: holding only the
`submitter` role (`pipeline.acl`), it may append requests and nothing else, and a worker
decides what each becomes. That costs an agent's call two round trips and a wake-up more
than writing the invocation itself (request → doorbell → take → admit). A client whose Redis
user may run the admission script (an operator's one URL for everything, a worker's
credentials, a server without ACLs) could write anything a worker writes anyway; for it the
same judge (`pipeline.admission.judge`) and the same script (`pipeline/lua/admit.lua`) run in
its submit's own round trip, so its call is an invocation the moment the submit returns, as
before admission existed. Nothing is trusted that was not already: a `submitter` is refused
the script (`NOPERM`) and its client goes on through the workers' admission, which is then
the only way its calls are admitted; the workers' admission is unchanged.

Per client, `ACI_ADMIT_HERE`: `auto` (the default) tries it as Redis's default user only (a
server without ACLs, or one password for everything), so a named least-privilege user never
meets a refusal in the ACL log; `1` tries it as any user; `0` never. Tried on the first
submit, kept while Redis runs it. A call the judge would refuse, a cancel, or a script that
cannot run (a key of the wrong type, any error) goes through the workers' admission instead,
which answers it as it always did. A log call's window ends at this client's clock (the
workers' admission uses its own). The judge and the script read this client's settings
(`SHARED`: `argument_max_bytes`, `default_lookback`, `stream_maxlen`, `retention_s`), which
must be the workers': every worker writes its own into its partitions' `deployment` hash
with each heartbeat, and this client reads it before it first admits, then in each admit's
own round trip (for the next call), and every `REREAD_S` while they differ. Where they
differ (workers redeployed with a new bound, a client left behind), its calls go through the
workers' admission, which applies the workers' own (said once, in a warning naming the
settings); another `ACI_PARTITIONS` than the workers' is a configuration error
(`SettingsError`; the partitions of two counts have other tags, so the workers write it under
the prefix's own tag too, read when none of this count wrote the partition's). Before any
worker has beaten, its own settings serve.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from typing import Any, Final

from contracts import ErrorResult, Request
from pipeline.admission import ADMIT_CONFLICT, ADMIT_KNOWN, Admission, admit_call, judge
from pipeline.cancel import is_cancel
from pipeline.envelope import Invocation
from pipeline.keys import Keys, Partition
from pipeline.redis_io import Redis, RedisProtocolError, call_redis
from pipeline.scripts import ADMIT_LUA
from pipeline.settings import Settings, SettingsError

__all__ = ["NEW", "SHARED", "AdmitHere", "shared_settings"]

log = logging.getLogger("aci.client")
_SHA: Final = hashlib.sha1(ADMIT_LUA.encode()).hexdigest()
NEW: Final = 1  # per call: admitted now (the others: ADMIT_KNOWN, ADMIT_CONFLICT)
# Calls per script call, as many as a worker's admission takes a round: a script holds Redis
# while it runs (10,000 calls in one: 384 ms in SLOWLOG), so a large submission is several,
# sent in one round trip (each call idempotent, so a later one sees an earlier one's records).
CHUNK: Final = 256
# The settings a client that admits its own calls must share with the workers, as the
# `deployment` hash names them.
SHARED: Final = {
    "partitions": "ACI_PARTITIONS",
    "argument_max_bytes": "ACI_ARGUMENT_MAX_BYTES",
    "default_lookback": "ACI_LOGS_DEFAULT_LOOKBACK",
    "stream_maxlen": "ACI_STREAM_MAXLEN",
    "retention_s": "ACI_RETENTION_S",
}


# While the workers' settings differ from this client's (no admit round trip reads them),
# they are read again this often: a client left behind admits itself again once the workers
# come round (or roll back), without a restart.
REREAD_S: Final = 10.0


def shared_settings(settings: Settings) -> dict[str, str]:
    """This process's `SHARED` settings, as a worker writes them (`pipeline.heartbeat.beat`)."""
    return {name: str(getattr(settings, name)) for name in SHARED}


class AdmitHere:
    """Whether this client admits its own calls, and the script call that does it."""

    def __init__(self, redis: Redis, settings: Settings, keys: Keys) -> None:
        self.redis = redis
        self.settings = settings
        self.keys = keys
        # False for good once Redis refuses the script.
        self.enabled = settings.admit_here == "1" or (
            settings.admit_here == "auto" and _username(redis) in (None, "", "default")
        )
        self._mine = shared_settings(settings)
        self._base = Keys(keys.prefix).parts[0]  # the prefix's own tag (`pipeline.heartbeat`)
        # Per partition: whether its workers' settings are this client's, as last read.
        self._agreed: dict[int, bool] = {}
        self._read_at: dict[int, float] = {}  # per partition: when they were last read
        self._told: set[Any] = set()  # what was said (once)
        # Per partition: another ACI_PARTITIONS than the workers' use, as last read.
        self._mismatch: dict[int, str] = {}
        # Per partition: the last reply `learn` found agreeing (every admit reads it again).
        self._agreeing: dict[int, tuple[Any, ...]] = {}

    async def agrees(self, part: Partition) -> bool:
        """Whether this client's `SHARED` settings are those of the workers of `part`, as last
        read (read here the first time, and again every `REREAD_S` while they differ; then in
        every admit's own round trip: `commands`, `learn`). True while no worker has written
        them. Raises `SettingsError` when the workers use another `ACI_PARTITIONS`."""
        agreed = self._agreed.get(part.index)
        if agreed is None or (
            not agreed and time.monotonic() - self._read_at[part.index] >= REREAD_S
        ):
            try:
                found = await call_redis(self.redis.hmget(part.deployment, list(SHARED)))
                base = self._base.deployment
                if found[0] is None and part.deployment != base:  # `partitions`: SHARED's first
                    # No worker of this count wrote it: one of another count (their tags are
                    # others) writes the prefix's own too, and its partitions are all we take.
                    found = [await call_redis(self.redis.hget(base, "partitions"))]
                    found += [None] * (len(SHARED) - 1)
            except RedisProtocolError as exc:  # a submitter forced to try (`1`): NOPERM
                if str(exc) in ("WRONGPASS", "NOAUTH"):  # no call can go: the caller says it
                    raise
                if not await self.refused(exc) and self.enabled:  # WRONGTYPE: read it later
                    self._agreed[part.index], self._read_at[part.index] = False, time.monotonic()
                    if (exc.args, part.index) not in self._told:
                        self._told.add((exc.args, part.index))
                        log.warning(
                            "calls go through the workers' admission: %s is not readable (%s)",
                            part.deployment, exc,
                        )  # fmt: skip
                return False
            self.learn(part, found)
        if part.index in self._mismatch:
            raise SettingsError(self._mismatch[part.index])
        return self._agreed[part.index]

    def learn(self, part: Partition, found: Sequence[Any]) -> None:
        """Take in the workers' `SHARED` settings of `part` (an HMGET reply of them); never
        raises (the calls of the round trip that read them were admitted)."""
        if self._agreeing.get(part.index) == tuple(found) and self._agreed.get(part.index):
            self._read_at[part.index] = time.monotonic()  # as last time: agreeing still
            return
        self._agreeing.pop(part.index, None)
        theirs = {
            n: v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
            for n, v in zip(SHARED, found, strict=True)
            if v is not None
        }
        self._read_at[part.index] = time.monotonic()
        self._mismatch.pop(part.index, None)
        if "partitions" in theirs and theirs["partitions"] != self._mine["partitions"]:
            self._mismatch[part.index] = (  # raised by the next `agrees`
                f"ACI_PARTITIONS is {self._mine['partitions']} here, {theirs['partitions']} for"
                " the workers: every process of a deployment must use the same"
            )
        differ = tuple(sorted(SHARED[n] for n, v in theirs.items() if v != self._mine[n]))
        told = tuple(n for n in differ if n != SHARED["partitions"])  # that one is raised
        if told and told not in self._told:
            self._told.add(told)
            log.warning(
                "calls go through the workers' admission: the workers' %s differ from this"
                " client's", ", ".join(told),
            )  # fmt: skip
        self._agreed[part.index] = not differ
        if not differ and part.index not in self._mismatch:
            self._agreeing[part.index] = tuple(found)

    def commands(
        self,
        part: Partition,
        session_id: str,
        envelopes: Sequence[bytes],
        decoded: Sequence[tuple[Invocation, Request | ErrorResult, str]] | None = None,
    ) -> list[tuple[Any, ...]] | None:
        """The admit script calls for `envelopes` (this client's, of one session; `CHUNK`
        calls each), then a read of the workers' settings (its reply goes to `learn`), or
        None when one of them must go through the workers' admission (module docstring).
        `decoded`: per envelope, the invocation it encodes, its decoded request and scope key
        (`pipeline.submitter.Prepared.decoded`), judged without decoding them again."""
        settings = self.settings
        admitted: list[Admission] = []
        for n, envelope in enumerate(envelopes):
            verdict = judge(
                self.keys, part, "", envelope,
                argument_max_bytes=settings.argument_max_bytes,
                default_lookback=settings.default_lookback,
                mine=decoded[n] if decoded is not None else None,
            )  # fmt: skip
            if not isinstance(verdict, Admission) or is_cancel(verdict.invocation):
                return None
            if verdict.session_id != session_id:
                return None  # never: an envelope of this client's, of this session
            admitted.append(verdict)
        now_ms, out = int(time.time() * 1000), []
        for start in range(0, len(admitted), CHUNK):
            keys, args = admit_call(
                part, admitted[start : start + CHUNK], [], now_ms=now_ms,
                maxlen=settings.stream_maxlen, retention_ms=settings.retention_s * 1000,
            )  # fmt: skip
            out.append(("EVALSHA", _SHA, len(keys), *keys, *args))
        out.append(("HMGET", part.deployment, *SHARED))  # for the next call: `learn`
        return out

    async def refused(self, error: RedisProtocolError) -> bool:
        """After the script call failed: True to send it again (the script was loaded now);
        False to go through the workers' admission (for good after `NOPERM`)."""
        code = str(error)
        if code == "NOSCRIPT":
            try:
                await call_redis(self.redis.script_load(ADMIT_LUA))
                return True
            except RedisProtocolError as exc:
                code = str(exc)
        if code == "NOPERM":
            self.enabled = False
            log.info("calls go through the workers' admission: this Redis user may not run it")
        return False


def outcomes(replies: Sequence[Any], count: int) -> list[int] | None:
    """Per call: NEW, ADMIT_KNOWN or ADMIT_CONFLICT; None when a script call wrote nothing (a
    key of the wrong type: the workers' admission refuses that call alone)."""
    flat: list[Any] = []
    for reply in replies:
        if not isinstance(reply, list):
            return None
        flat += reply
    if len(flat) != count:
        return None
    out: list[int] = []
    for item in flat:
        if isinstance(item, bytes):
            out.append(NEW)
        elif item in (ADMIT_KNOWN, ADMIT_CONFLICT):
            out.append(int(item))
        else:
            return None
    return out


def _username(redis: Redis) -> str | None:
    # The user this client's connections log in as (None: Redis's default user).
    kwargs = getattr(redis, "connection_pool", None)
    found = kwargs.connection_kwargs if kwargs is not None else {}
    if not found and hasattr(redis, "nodes_manager"):  # a cluster client
        found = redis.nodes_manager.connection_kwargs
    user = found.get("username")
    return user if isinstance(user, str) else None
