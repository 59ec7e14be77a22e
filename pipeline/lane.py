"""A lane: one dedicated Redis connection for one hot loop (a worker's reader or finisher,
a client's submitter or session listener).

Commands are packed with hiredis, sent together, and their raw replies read back, without
the connection pool's per-call machinery: measured here, a round trip costs about 35 µs of
CPU on a lane against 110 µs for a pooled command and 175 µs for a pooled pipeline, and at
a thousand calls a second those round trips were most of the CPU spent.

A lane has one user at a time. It connects with the pool's settings (URL, credentials,
TLS), reconnects after a lost connection and retries once (what the pool's `Retry` did),
and maps failures to the typed errors of `pipeline.redis_io`.

About 400 lines on purpose: a lane is one connection's state machine (send, read, reconnect,
and on a cluster the MOVED/ASK/TRYAGAIN routing to a node's own link), and its two helpers for
callers (`run_scripts` with its NOSCRIPT reload, `stream_entries`) parse the raw replies only a
lane returns. Split, each part would have to know the others' invariants about raw replies.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

import anyio
import hiredis
from redis.exceptions import (
    AskError,
    AuthenticationError,
    ClusterDownError,
    MovedError,
    NoScriptError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from pipeline.redis_io import (
    PipelineError,
    Redis,
    RedisProtocolError,
    RedisUnavailable,
    Scripts,
    auth_code,
    call_redis,
    is_cluster,
    reply_code,
)

__all__ = ["Lane", "command_key", "run_scripts", "stream_entries", "stream_pages"]

log = logging.getLogger("aci.redis")
_CLUSTER_ATTEMPTS = 8  # sends of one command through MOVED/ASK/TRYAGAIN/failover

_LOST = (RedisConnectionError, RedisTimeoutError, OSError)
_IDLE_S = 15.0  # a lane idle longer than this reconnects before its next call


class _Link:
    """One dedicated connection to one server."""

    def __init__(self, connection_class: Any, connection_kwargs: dict[str, Any]) -> None:
        # No socket timeout on the connection itself (it costs a task per send); every call
        # is bounded by its own `timeout` instead.
        self._kwargs = {**connection_kwargs, "socket_timeout": None}
        self._connection_class = connection_class
        self._conn: Any = None
        self._used_at = 0.0

    @property
    def open(self) -> bool:
        """Whether the lane holds a connection (it drops it on any failure)."""
        return self._conn is not None

    async def call(self, commands: Sequence[Sequence[Any]], timeout: float) -> list[Any]:
        """Raw replies to `commands`, in order. Each command is its name (one word) and its
        arguments: str (sent as UTF-8), bytes, int or float. An error reply is returned in its
        place as a `ResponseError`, not raised. Raises `RedisUnavailable` when Redis cannot be
        reached (after one reconnect) or does not answer within `timeout` seconds."""
        if not all(commands):
            raise ValueError("an empty command gets no reply: every command needs a name")
        for attempt in (1, 2):
            try:
                # asyncio's own timeout (a lane is asyncio-only, like redis.asyncio): about
                # 6 µs where anyio.fail_after costs 20 µs, on every round trip.
                async with asyncio.timeout(timeout):
                    return await self._round_trip(commands)
            except AuthenticationError as exc:
                await self.aclose()
                raise RedisProtocolError(auth_code(exc)) from None
            except (*_LOST, TimeoutError) as exc:
                await self.aclose()
                if attempt == 2 or isinstance(exc, TimeoutError | RedisTimeoutError):
                    raise RedisUnavailable("redis is unavailable") from exc
            except BaseException:
                # Cancelled mid-call: the connection may hold a half-read reply.
                await self.aclose()
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _round_trip(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        now = time.monotonic()
        if self._conn is not None and now - self._used_at > _IDLE_S:
            # Idle a while: a NAT or a failover may have left it half-open, which would only
            # show as a timeout. A new connection is cheaper than finding out.
            await self.aclose()
        self._used_at = now
        if self._conn is None:
            self._conn = self._connection_class(**self._kwargs)
        conn = self._conn
        if not conn.is_connected:
            await conn.connect()
        await conn.send_packed_command(_pack(commands), check_health=False)
        replies: list[Any] = []
        for _ in commands:
            try:
                replies.append(await conn.read_response(disconnect_on_error=True))
            except ResponseError as exc:
                replies.append(exc)
        return replies

    async def aclose(self) -> None:
        """Drop the connection (the next call makes a new one)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with anyio.CancelScope(shield=True):
                await conn.disconnect(nowait=True)


class Lane:
    """One dedicated connection per server for one hot loop, made from `redis`'s settings.

    On a single Redis that is one connection. On a Redis Cluster (`redis` is a cluster
    client) each command goes to the master of its key's slot, as the cluster client's slot
    map says: the commands of one call are grouped per node, each group is sent on that
    node's connection, and the groups travel concurrently. A `MOVED` reply refreshes the slot
    map and the command is sent again; `ASK` sends it once to the named node after `ASKING`;
    `TRYAGAIN` (a slot half-migrated) and `CLUSTERDOWN` (a failover in progress) back off and
    retry; a lost node connection refreshes the map and retries. None of these replies
    executed the command, so retrying never runs anything twice.
    """

    def __init__(self, redis: Redis) -> None:
        self._cluster: Any = redis if is_cluster(redis) else None
        self._links: dict[str, _Link] = {}
        self._single: _Link | None = None
        self.wait_short = 0  # calls whose WAIT saw fewer replicas than asked
        if self._cluster is None:
            pool = redis.connection_pool
            self._single = _Link(pool.connection_class, pool.connection_kwargs)

    @property
    def open(self) -> bool:
        """Whether the lane holds a connection (it drops one on any failure)."""
        if self._single is not None:
            return self._single.open
        return any(link.open for link in self._links.values())

    async def call(
        self,
        commands: Sequence[Sequence[Any]],
        timeout: float,
        wait: tuple[int, int] | None = None,
    ) -> list[Any]:
        """Raw replies to `commands`, in order. Each command is its name (one word) and its
        arguments: str (sent as UTF-8), bytes, int or float. An error reply is returned in its
        place as a `ResponseError`, not raised. Raises `RedisUnavailable` when Redis cannot be
        reached (after one reconnect) or does not answer within `timeout` seconds.

        `wait=(replicas, timeout_ms)` sends `WAIT replicas timeout_ms` after the commands on
        each connection they used: the call returns once that many replicas have the writes,
        or the timeout passed; a shortfall is logged and counted (`wait_short`)."""
        if not all(commands):
            raise ValueError("an empty command gets no reply: every command needs a name")
        if self._single is not None:
            if wait is None or not wait[0]:
                return await self._single.call(commands, timeout)
            replies = await self._single.call([*commands, ("WAIT", *wait)], timeout)
            self._check_wait(replies.pop(), wait[0])
            return replies
        return await self._cluster_call(commands, timeout, wait)

    def _check_wait(self, reply: Any, wanted: int) -> None:
        got = reply if isinstance(reply, int) else -1
        if got < wanted:
            self.wait_short += 1
            log.warning(
                "WAIT: %s of %d replicas acknowledged the writes in time",
                got if got >= 0 else "none",
                wanted,
            )

    # -- cluster ---------------------------------------------------------------------
    def _link(self, node: Any) -> _Link:
        link = self._links.get(node.name)
        if link is None:
            link = self._links[node.name] = _Link(node.connection_class, node.connection_kwargs)
        return link

    def _node_of(self, command: Sequence[Any]) -> Any:
        return self._cluster.get_node_from_key(command_key(command))

    async def _refresh(self) -> None:
        try:
            await self._cluster.nodes_manager.initialize()
        except Exception:  # the next attempt retries; a dead cluster surfaces as unavailable
            log.debug("cluster slot map refresh failed", exc_info=True)

    async def _cluster_call(
        self, commands: Sequence[Sequence[Any]], timeout: float, wait: tuple[int, int] | None
    ) -> list[Any]:
        cluster = self._cluster
        if cluster._initialize:  # first use: learn the slot map
            await call_redis(cluster.initialize())
        replies: list[Any] = [None] * len(commands)
        todo = list(range(len(commands)))
        asked: dict[int, Any] = {}  # command index → node named by an ASK reply
        backoff = 0.05
        for _attempt in range(_CLUSTER_ATTEMPTS):
            groups: dict[str, tuple[Any, list[int]]] = {}
            try:
                for i in todo:
                    node = asked.get(i) or self._node_of(commands[i])
                    groups.setdefault(node.name, (node, []))[1].append(i)
            except Exception:  # a slot not covered right now (failover in progress)
                await self._refresh()
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
                continue
            sent = [
                self._send(node, [commands[i] for i in idx], [i in asked for i in idx],
                           timeout, wait)
                for node, idx in groups.values()
            ]  # fmt: skip
            if len(sent) == 1:
                results: list[Any] = [await _settle(sent[0])]
            else:
                results = await asyncio.gather(*(_settle(s) for s in sent))
            retry: list[int] = []
            moved = lost = busy = False
            for (_node, idx), got in zip(groups.values(), results, strict=True):
                if isinstance(got, BaseException):
                    if not isinstance(got, RedisUnavailable):
                        raise got
                    lost = True
                    retry.extend(idx)
                    for i in idx:
                        asked.pop(i, None)
                    continue
                for i, reply in zip(idx, got, strict=True):
                    asked.pop(i, None)
                    kind = _redirect(reply)
                    if kind is None:
                        replies[i] = reply
                        continue
                    retry.append(i)
                    if kind == "ASK":
                        # redis-py parses "ASK slot host:port" into "slot host:port".
                        host, _, port = str(reply).split()[-1].rpartition(":")
                        asked[i] = _AskedNode(host, int(port), cluster)
                    elif kind == "MOVED":
                        moved = True
                    else:
                        busy = True
            if not retry:
                return replies
            if lost:
                for node, idx in groups.values():
                    if any(i in retry for i in idx):
                        await self._drop(node.name)
            if moved or lost:
                await self._refresh()
            if busy or lost:
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
            todo = sorted(retry)
        raise RedisUnavailable("the cluster kept redirecting or could not be reached")

    async def _send(
        self,
        node: Any,
        commands: list[Sequence[Any]],
        asking: list[bool],
        timeout: float,
        wait: tuple[int, int] | None,
    ) -> list[Any]:
        link = self._link(node)
        out: list[Sequence[Any]] = []
        for command, ask in zip(commands, asking, strict=True):
            if ask:
                out.append(("ASKING",))
            out.append(command)
        waiting = wait is not None and wait[0] > 0
        if waiting:
            assert wait is not None
            out.append(("WAIT", *wait))
        replies = await link.call(out, timeout)
        if waiting:
            self._check_wait(replies.pop(), wait[0])  # type: ignore[index]
        if any(asking):
            kept: list[Any] = []
            it = iter(replies)
            for ask in asking:
                if ask:
                    next(it)  # ASKING's +OK
                kept.append(next(it))
            return kept
        return replies

    async def _drop(self, name: str) -> None:
        link = self._links.pop(name, None)
        if link is not None:
            await link.aclose()

    async def aclose(self) -> None:
        """Drop the connections (the next call makes new ones)."""
        if self._single is not None:
            await self._single.aclose()
        links, self._links = list(self._links.values()), {}
        for link in links:
            await link.aclose()


class _AskedNode:
    """The node an ASK reply names: reached with the cluster's connection settings."""

    def __init__(self, host: str, port: int, cluster: Any) -> None:
        self.name = f"{host}:{port}"
        self.connection_class = cluster.get_default_node().connection_class
        self.connection_kwargs = {**cluster.get_default_node().connection_kwargs,
                                  "host": host, "port": port}  # fmt: skip


async def _settle(op: Any) -> Any:
    """The replies of one node's group, or the `PipelineError` it raised."""
    try:
        return await op
    except PipelineError as exc:
        return exc


def _redirect(reply: Any) -> str | None:
    """MOVED, ASK, or TRYAGAIN (also for CLUSTERDOWN) when `reply` asks to send it again."""
    if not isinstance(reply, ResponseError):
        return None
    if isinstance(reply, MovedError):  # before AskError: redis-py derives one from the other
        return "MOVED"
    if isinstance(reply, AskError):
        return "ASK"
    if isinstance(reply, TryAgainError | ClusterDownError):
        return "TRYAGAIN"
    return None


def command_key(command: Sequence[Any]) -> Any:
    """The key a command is routed by: the first key of EVAL/EVALSHA, the first stream of
    XREAD/XREADGROUP, else the first argument."""
    name = str(command[0]).upper()
    if name in ("EVAL", "EVALSHA"):
        return command[3]
    if name in ("XREAD", "XREADGROUP"):
        for i, arg in enumerate(command):
            if isinstance(arg, str) and arg.upper() == "STREAMS":
                return command[i + 1]
    return command[1]


def _pack(commands: Sequence[Sequence[Any]]) -> bytes:
    """The commands in the Redis protocol, in one piece, packed by hiredis (redis-py walks
    every argument in Python first: about a tenth of a busy worker's CPU)."""
    try:
        return b"".join([hiredis.pack_command(tuple(command)) for command in commands])
    except TypeError:  # a bytearray (or, in older hiredis, a memoryview): sent as bytes
        return b"".join([hiredis.pack_command(_as_bytes(command)) for command in commands])


def _as_bytes(command: Sequence[Any]) -> Any:
    return tuple(bytes(a) if isinstance(a, bytearray | memoryview) else a for a in command)


async def run_scripts(
    lane: Lane,
    scripts: Scripts,
    sha: str | Sequence[str],
    calls: Sequence[tuple[Sequence[str], Sequence[Any]]],
    timeout: float = 10.0,
    errors_in_place: bool = False,
    wait: tuple[int, int] | None = None,
) -> list[Any]:
    """Replies of one script (by SHA) run for each (keys, args) in `calls`, sent together on
    `lane`. After NOSCRIPT (a restarted Redis) the scripts are loaded and the whole batch is
    sent again, so only idempotent scripts belong here. Another error reply raises
    `RedisProtocolError` with its code, or with `errors_in_place` comes back in its place
    (a `ResponseError`): one call's failure is then not every call's. `wait` as in
    `Lane.call` (WAIT for replicas after the scripts; default: `scripts.wait`). `sha` may
    also name one script per call (several scripts in one round trip)."""
    shas = [sha] * len(calls) if isinstance(sha, str) else sha
    commands = [
        ("EVALSHA", s, len(keys), *keys, *args) for s, (keys, args) in zip(shas, calls, strict=True)
    ]
    for attempt in (1, 2):
        replies = await lane.call(commands, timeout, wait or scripts.wait)
        errors = [r for r in replies if isinstance(r, ResponseError)]
        if not errors:
            return replies
        if attempt == 1 and any(isinstance(e, NoScriptError) for e in errors):
            await scripts.load()
            continue
        if errors_in_place:
            return replies
        raise RedisProtocolError(reply_code(errors[0]))
    raise AssertionError("unreachable")  # pragma: no cover


def stream_pages(reply: Any) -> Any:
    """(stream, its entries as Redis sends them: [entry id, flat fields or None]) of a raw
    XREAD/XREADGROUP reply (None when it timed out: none)."""
    if isinstance(reply, ResponseError):
        raise RedisProtocolError(reply_code(reply))
    # RESP3 answers a map of stream → entries, RESP2 a list of [stream, entries].
    return reply.items() if isinstance(reply, dict) else (reply or ())


def stream_entries(reply: Any) -> list[tuple[bytes, bytes, dict[str, bytes]]]:
    """(stream, entry id, fields) of a raw XREAD/XREADGROUP reply (None when it timed out).
    An entry deleted while pending comes with no fields: it is skipped."""
    out: list[tuple[bytes, bytes, dict[str, bytes]]] = []
    for stream, entries in stream_pages(reply):
        for entry_id, flat in entries:
            if flat is None:
                continue
            # Anyone who may XADD chooses field names: not UTF-8 must not raise here.
            fields = {
                flat[i].decode("utf-8", "replace"): flat[i + 1] for i in range(0, len(flat), 2)
            }
            out.append((stream, entry_id, fields))
    return out
