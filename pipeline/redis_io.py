"""The only importer of `redis.asyncio`: connections, the Lua scripts (their text is in
`pipeline/lua/`, read by `pipeline.scripts`; re-exported here), and typed errors.

Errors, drawn once:

    PipelineError                 base of every infrastructure failure of the pipeline
    ├── RedisUnavailable          connection lost or refused; retryable (back off, try again)
    ├── RedisProtocolError        Redis answered with an error we did not expect; not retryable
    └── RedisConfigError          the Redis URL cannot be used; not retryable

Redis replies such as BUSYGROUP or NOGROUP are turned into these (or absorbed) here only.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Final, TypeAlias, TypeVar, cast

import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterPipeline
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.connection import HiredisRespSerializer
from redis.driver_info import DriverInfo
from redis.exceptions import (
    AuthenticationError,
    ClusterError,
    NoPermissionError,
    NoScriptError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from pipeline.keys import GROUP, Keys, Partition
from pipeline.scripts import ADMIT_LUA, CANCEL_LUA, FINISH_LUA, MARK_LUA, REQUEUE_LUA, TAKE_LUA

__all__ = [
    "ADMIT_LUA",
    "FINISH_LUA",
    "REQUEUE_LUA",
    "TAKE_LUA",
    "PipelineError",
    "Redis",
    "RedisConfigError",
    "RedisProtocolError",
    "RedisUnavailable",
    "Scripts",
    "auth_code",
    "call_redis",
    "decode_fields",
    "ensure_group",
    "execute",
    "is_cluster",
    "is_credentials_refusal",
    "is_refusal",
    "open_redis",
    "refusal_hint",
    "reply_code",
]

# Redis replies are loosely typed; `Any` stays at this boundary.
Redis: TypeAlias = Any
T = TypeVar("T")


class PipelineError(Exception):
    """Base of the pipeline's infrastructure errors."""

    retryable: bool = False


class RedisUnavailable(PipelineError):
    """Redis cannot be reached right now; back off and retry."""

    retryable = True


class RedisProtocolError(PipelineError):
    """Redis answered with an unexpected error."""


class RedisConfigError(PipelineError):
    """The Redis URL cannot be used (the message never quotes it)."""


# Connection trouble, and a cluster in the middle of a failover or a slot move (the cluster
# client has already retried these): retryable.
_UNAVAILABLE: Final = (
    RedisConnectionError, RedisTimeoutError, OSError, ClusterError, TryAgainError,
    RedisClusterException,
)  # fmt: skip


async def call_redis(op: Awaitable[T]) -> T:
    """Await one Redis operation, turning driver errors into the typed hierarchy above."""
    try:
        return await op
    except AuthenticationError as exc:  # a wrong password is not "unavailable"
        raise RedisProtocolError(auth_code(exc)) from exc
    except _UNAVAILABLE as exc:
        if _NEEDS_AUTH in str(exc):  # no password for a protected Redis: not retryable
            raise RedisProtocolError("NOAUTH") from exc
        # The cluster client wraps what its start-up nodes said: a refused password, or a
        # server that is no cluster, was "no Redis answers" (and a worker waited forever).
        if isinstance(exc.__cause__, AuthenticationError):
            raise RedisProtocolError(auth_code(exc.__cause__)) from exc
        if _NOT_A_CLUSTER in str(exc):
            raise RedisConfigError(
                "ACI_REDIS_URL names a Redis Cluster (redis+cluster:// or ACI_REDIS_CLUSTER=1)"
                " but that Redis is not in cluster mode: use a redis:// URL"
            ) from None
        raise RedisUnavailable("redis is unavailable") from exc
    except ResponseError as exc:
        raise RedisProtocolError(reply_code(exc)) from exc


def auth_code(exc: BaseException) -> str:
    """NOAUTH when Redis wants a password and got none, else WRONGPASS: redis-py raises both
    as one AuthenticationError (before, a URL without a password was told "wrong user or
    password")."""
    text = str(exc)
    return "NOAUTH" if _NEEDS_AUTH in text or "Authentication required" in text else "WRONGPASS"


# redis-py raises a plain ConnectionError when the handshake (HELLO) needs a password.
_NEEDS_AUTH: Final = "must be called with the client already authenticated"
_NOT_A_CLUSTER: Final = "Cluster mode is not enabled"
_SCRIPT_NOPERM: Final = "user executing the script can't"
_REFUSED: Final = frozenset({"WRONGPASS", "NOAUTH", "NOPERM"})  # the credentials' fault
_ONE_NODE: Final = (
    "ACI_REDIS_URL names one node of a Redis Cluster: use redis+cluster://host:port"
    " (or ACI_REDIS_CLUSTER=1)"
)
# What an operator does about each refusal (the CLI's one line, the MCP server's log).
_REFUSAL_HINTS: Final = {
    "NOAUTH": "a password is required: put the user and password in ACI_REDIS_URL",
    "WRONGPASS": "wrong user or password in ACI_REDIS_URL",
    "NOPERM": "the Redis user may not do this (see `aci-evidence acl` for each role's rights)",
    "OOM": "Redis is at its maxmemory and refuses every write (submits, finishes, heartbeats):"
    " raise maxmemory or free memory; `aci-evidence status` shows each stream's memory",
    "READONLY": "this Redis is a read-only replica: point ACI_REDIS_URL at the primary",
    # A plain URL at one node of a Redis Cluster (before: a bare `MOVED`, and a worker said
    # it "could not create the consumer group").
    "MOVED": _ONE_NODE,
    "CROSSSLOT": _ONE_NODE,
}
_WRONG_NODE: Final = frozenset({"MOVED", "CROSSSLOT"})
# Every write refused: at maxmemory (noeviction), or a replica (XGROUP CREATE is refused
# before Redis looks for the group, so a worker's start would only say it could not create it).
_FULL_OR_READ_ONLY: Final = frozenset({"OOM", "READONLY"})
_KNOWN_CODES: Final = (
    "NOSCRIPT", "NOGROUP", "BUSYGROUP", "UNBLOCKED", "WRONGTYPE", "OOM", "READONLY", "NOAUTH",
    "WRONGPASS", "NOPERM",
)  # fmt: skip


def refusal_hint(exc: BaseException) -> str | None:
    """What the operator should do about a Redis that refuses (wrong credentials, a missing
    right, a full Redis, a replica), in one sentence; None for any other failure."""
    return _REFUSAL_HINTS.get(str(exc)) if isinstance(exc, RedisProtocolError) else None


def is_credentials_refusal(exc: BaseException) -> bool:
    """Whether Redis refused the credentials or the user's rights (WRONGPASS, NOAUTH,
    NOPERM): trying again cannot help until the configuration changes."""
    return isinstance(exc, RedisProtocolError) and str(exc) in _REFUSED


def reply_code(exc: Exception) -> str:
    # Pipelines prefix the server's reply ("Command # 1 (…) of pipeline caused error: …").
    if isinstance(exc, NoScriptError):
        return "NOSCRIPT"
    if isinstance(exc, NoPermissionError) or _SCRIPT_NOPERM in str(exc):
        return "NOPERM"  # redis-py drops the NOPERM prefix; a script's refusal has none
    # redis-py also strips the code of the replies it has a class for (OOM, READONLY, …) and
    # keeps it as `status_code`: a full Redis was reported as "ERR".
    status = getattr(exc, "status_code", None)
    if isinstance(status, str) and status.isalpha() and status.isupper():
        return status
    text = str(exc)
    found = next((code for code in _KNOWN_CODES if code in text), text.split(" ", 1)[0])
    # A reply's code is one upper-case word; anything else (redis-py stripped it, or a script
    # raised a sentence) is named by a fixed code, never by the first word of a message.
    return found if found.isalpha() and found.isupper() else "ERR"


async def execute(pipe: Any) -> list[Any]:
    """Execute a pipeline and release it, also when Redis fails mid-way."""
    if isinstance(pipe, ClusterPipeline):
        # Entering a cluster pipeline empties its queue; it holds no connection of its own.
        cluster_result: list[Any] = await call_redis(pipe.execute())
        return cluster_result
    async with pipe:
        result: list[Any] = await call_redis(pipe.execute())
        return result


# Typed as Any: redis-py 8.2 dropped this class's annotations (mypy strict: untyped call).
_SERIALIZER: Final[Any] = cast(Any, HiredisRespSerializer)()


def _hiredis_packing(base: type[Any]) -> type[Any]:
    """The pool's connection class, packing commands with hiredis (redis.asyncio packs in
    pure Python; with large script arguments that was ~20% of a worker's CPU)."""

    class HiredisPacking(base):  # type: ignore[misc]
        def pack_command(self, *args: Any) -> list[bytes]:
            return _SERIALIZER.pack(*args)  # type: ignore[no-any-return]

    return HiredisPacking


_CLUSTER_SCHEMES: Final = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


def is_refusal(exc: BaseException) -> bool:
    """Whether `exc` is an error reply (Redis answered and refused: NOPERM, an unknown
    command), as opposed to a lost or refused connection."""
    return isinstance(exc, ResponseError)


def is_cluster(redis: Redis) -> bool:
    """Whether `redis` is a Redis Cluster client (keys are routed by slot)."""
    return isinstance(redis, aioredis.RedisCluster)


def cluster_url(url: str, cluster: bool = False) -> str | None:
    """The plain `redis://` URL of a cluster node when `url` names a cluster
    (`redis+cluster://`, `rediss+cluster://`, or any redis URL with `cluster`), else None."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme in _CLUSTER_SCHEMES:
        return f"{_CLUSTER_SCHEMES[scheme]}://{rest}"
    return url if cluster else None


class _BoundedRetry(Retry):
    """redis-py's retry, which stops once `budget_s` has passed since the first try: a
    Redis that never answers (a black hole, a host that accepts and stays silent) is said in
    one timeout, not in four (before: `status` was silent for 21 s against an address that
    drops packets, 40 s against one that accepts and never answers). A refused connection
    fails at once, so its retries (a Redis restarting) are unchanged; workers retry above."""

    def __init__(self, backoff: Any, retries: int, budget_s: float) -> None:
        super().__init__(backoff, retries)
        self.budget_s = budget_s

    async def call_with_retry(self, do: Any, fail: Any, *rest: Any, **options: Any) -> Any:
        # The arguments after `fail` (`is_retryable`, `with_failure_count`) came with redis-py
        # 6; they are passed on as given, so the range pyproject allows (5.0 up) works alike.
        start = time.monotonic()
        counted = options.get("with_failure_count", len(rest) > 1 and rest[1])

        async def bounded(error: Exception, failures: int | None = None) -> None:
            await (fail(error, failures) if counted else fail(error))
            if time.monotonic() - start >= self.budget_s:
                raise error

        return await super().call_with_retry(do, bounded, *rest, **options)


@contextlib.asynccontextmanager
async def open_redis(
    url: str, *, max_connections: int = 64, cluster: bool = False
) -> AsyncIterator[Any]:
    """A connection pool with retries on connection loss (exponential backoff); for a
    Redis Cluster (`redis+cluster://host:port`, or `cluster=True`: `ACI_REDIS_CLUSTER=1`)
    redis-py's cluster client, which follows MOVED/ASK and refreshes its slot map."""
    node_url = cluster_url(url, cluster)
    if node_url is not None:
        async with _open_cluster(node_url, max_connections) as client:
            yield client
        return
    # A blocking pool: a burst waits for a free connection instead of failing.
    try:
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            max_connections=max_connections,
            timeout=30,
            retry=_BoundedRetry(ExponentialBackoff(cap=2.0, base=0.05), retries=3, budget_s=5),
            retry_on_error=[RedisConnectionError, RedisTimeoutError],
            # No health_check_interval: with it, redis-py 8 loops forever on a connection
            # whose handshake is refused (no password for a protected Redis over a unix
            # socket); a stale pooled connection is caught by retry_on_error instead.
            socket_connect_timeout=5,
            # Bounds every reply wait (blocking reads block ≤ 1 s), so a Redis that stops
            # answering without closing the connection cannot hang a shielded finish.
            socket_timeout=10,
            # Named once: without it every new connection asks importlib.metadata for
            # redis-py's version, which blocked the event loop for tens of ms per connection.
            driver_info=DriverInfo(lib_version=redis.__version__),
        )
    except ValueError:
        # The driver's message can quote part of the URL (a password): never pass it on.
        raise RedisConfigError(
            "ACI_REDIS_URL is not a valid redis://, rediss:// or unix:// URL"
        ) from None
    pool.connection_class = _hiredis_packing(pool.connection_class)
    try:  # a connection object (no I/O): an unknown or bad query option fails here, not later
        pool.connection_class(**pool.connection_kwargs)
    except (TypeError, ValueError, RedisError):
        raise RedisConfigError("ACI_REDIS_URL has an unknown or invalid option after '?'") from None
    client = aioredis.Redis(connection_pool=pool)
    try:
        yield client
    finally:
        await client.aclose()
        await pool.aclose()


@contextlib.asynccontextmanager
async def _open_cluster(url: str, max_connections: int) -> AsyncIterator[Any]:
    try:
        client = aioredis.RedisCluster.from_url(
            url,
            max_connections=max_connections,
            retry=Retry(ExponentialBackoff(cap=2.0, base=0.05), retries=6),
            socket_connect_timeout=5,
            socket_timeout=10,
            driver_info=DriverInfo(lib_version=redis.__version__),
            connection_class=_hiredis_packing(aioredis.Connection),
        )
    except (ValueError, RedisError):
        raise RedisConfigError("ACI_REDIS_URL is not a usable Redis Cluster URL") from None
    try:
        yield client
    finally:
        await client.aclose()


async def ensure_group(redis: Redis, keys: Keys | Partition) -> None:
    """Create the workers' consumer group (and the stream) of one partition if missing;
    idempotent."""
    try:
        await call_redis(redis.xgroup_create(keys.invocations, GROUP, id="0", mkstream=True))
    except RedisProtocolError as exc:
        if str(exc) == "BUSYGROUP":
            return
        if str(exc) in _REFUSED | _FULL_OR_READ_ONLY | _WRONG_NODE:
            raise  # a wrong password or a full Redis is not "unavailable": say it, at once
        raise RedisProtocolError("could not create the consumer group") from exc


class Scripts:
    """The Lua scripts, called by SHA inside pipelines; reloaded once if Redis lost them
    (NOSCRIPT after a restart, or a replica promoted on a cluster: loaded on every master)."""

    def __init__(self, redis: Redis, wait: tuple[int, int] | None = None) -> None:
        self.redis = redis
        # (replicas, timeout ms): lanes WAIT for them after running these scripts
        # (`ACI_WAIT_REPLICAS`), so an acknowledged submit or finish survives a failover.
        self.wait = wait if wait and wait[0] > 0 else None
        self.take_sha = hashlib.sha1(TAKE_LUA.encode()).hexdigest()
        self.admit_sha = hashlib.sha1(ADMIT_LUA.encode()).hexdigest()
        self.finish_sha = hashlib.sha1(FINISH_LUA.encode()).hexdigest()
        self.requeue_sha = hashlib.sha1(REQUEUE_LUA.encode()).hexdigest()
        self.cancel_sha = hashlib.sha1(CANCEL_LUA.encode()).hexdigest()
        self.mark_sha = hashlib.sha1(MARK_LUA.encode()).hexdigest()

    async def load(self) -> None:
        for text in (TAKE_LUA, ADMIT_LUA, FINISH_LUA, REQUEUE_LUA, CANCEL_LUA, MARK_LUA):
            await call_redis(self.redis.script_load(text))

    @staticmethod
    def queue(pipe: Any, sha: str, keys: Sequence[str], args: Sequence[Any]) -> None:
        """Queue one script call on a pipeline."""
        pipe.evalsha(sha, len(keys), *keys, *args)

    async def run(self, fill: Callable[[Any], None]) -> list[Any]:
        """Execute a pipeline of script calls that `fill` queues; idempotent scripts only,
        since the whole batch is sent again after a NOSCRIPT reload."""
        for attempt in (1, 2):
            pipe = self.redis.pipeline(transaction=False)
            fill(pipe)
            try:
                return await execute(pipe)
            except RedisProtocolError as exc:
                if str(exc) != "NOSCRIPT" or attempt == 2:
                    raise
                await self.load()
        raise AssertionError("unreachable")  # pragma: no cover


def decode_fields(fields: dict[Any, Any]) -> dict[str, bytes]:
    """Stream/hash fields with str keys (values stay bytes)."""
    return {
        (k.decode("utf-8", "replace") if isinstance(k, bytes) else str(k)): v
        for k, v in fields.items()
    }
