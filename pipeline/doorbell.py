"""The doorbell: admission learns that a request stream was written, without polling, and
without reading anything a submitter wrote.

A connection per Redis server (per master on a cluster: notifications are node-local) asks
for client-side caching invalidations in broadcast mode on the partitions' request streams
(`CLIENT TRACKING on BCAST PREFIX {P}:requests …`, RESP3). Redis then pushes the *names* of
those keys whenever a command modifies them (an `XADD`, or admission's own `XDEL`), coalesced
per event-loop turn; reads (`XREADGROUP`, `XAUTOCLAIM`, `XACK`, an empty take) push nothing.
A push names only keys of the worker's own prefix, so it carries nothing a submitter chose:
the requests themselves are read by the take script alone, which refuses oversized ones
inside Redis (`pipeline/lua/take.lua`). Needs no server configuration (keyspace
notifications would need `CONFIG SET`), only `CLIENT TRACKING` in the worker's ACL
(`pipeline.acl`); Redis 6.2+.

`Doorbell.run` keeps the connections (reconnecting with backoff, following a cluster's
masters); `armed` says whether every one of them is tracking; `wait` returns once a partition
rang; `clear` forgets the rings of partitions about to be taken (call it *before* sending the
take: a request appended after the take ran rings again). While not armed (a refused ACL, a
lost connection, an older server) the caller polls as before.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from typing import Any, Final

import anyio
import anyio.lowlevel

from pipeline.keys import Partition
from pipeline.redis_io import Redis, call_redis, is_cluster, is_refusal

__all__ = ["Doorbell"]

log = logging.getLogger("aci.worker")
_TOPOLOGY_S: Final = 10.0  # a cluster's masters are looked up again this often
_BACKOFF_MAX_S: Final = 5.0
_ANSWER_S: Final = 5.0  # a server that takes longer to turn tracking on is retried


class Doorbell:
    """Rings for the request streams of `parts` (module docstring)."""

    def __init__(self, redis: Redis, parts: Sequence[Partition]) -> None:
        self._redis = redis
        self._parts = {p.requests.encode(): p.index for p in parts}
        self._all = frozenset(self._parts.values())
        self._prefixes = [a for p in parts for a in ("PREFIX", p.requests)]
        self._rung: set[int] = set()
        self._event = asyncio.Event()
        self._tracking: dict[str, bool] = {}  # node name → tracking now
        self._lost = asyncio.Event()  # a node's connection failed: look at the masters again
        self.refused = False  # the server or the ACL refused CLIENT TRACKING: poll

    @property
    def armed(self) -> bool:
        """Whether every server's connection is tracking (else: poll)."""
        return bool(self._tracking) and all(self._tracking.values()) and not self.refused

    def clear(self, indexes: Iterable[int]) -> None:
        """Forget the rings of these partitions (before sending their take)."""
        self._rung.difference_update(indexes)
        if not self._rung:
            self._event.clear()

    def rung(self) -> set[int]:
        """The partitions that rang since they were last cleared."""
        return set(self._rung)

    async def wait(self, timeout: float, stop: anyio.Event) -> set[int]:
        """The partitions that rang, once one did; an empty set after `timeout` s or once
        `stop` is set."""
        if self._rung:
            await anyio.lowlevel.checkpoint()  # a caller looping on rings still yields
        else:
            with anyio.move_on_after(timeout):
                await _first(stop.wait, self._event.wait)
        return set(self._rung)

    def _ring(self, indexes: Iterable[int]) -> None:
        self._rung.update(indexes)
        if self._rung:
            self._event.set()

    async def run(self, stop: anyio.Event) -> None:
        """Keep the tracking connections until `stop` (or until the server refuses)."""
        if not is_cluster(self._redis):
            pool = self._redis.connection_pool
            self._tracking["single"] = False
            await self._node("single", pool.connection_class, pool.connection_kwargs, stop)
            return
        cluster = self._redis
        scopes: dict[str, anyio.CancelScope] = {}
        async with anyio.create_task_group() as group:
            while not stop.is_set() and not self.refused:
                try:
                    if cluster._initialize:
                        await call_redis(cluster.initialize())
                    else:
                        await cluster.nodes_manager.initialize()
                    masters = {n.name: n for n in cluster.get_primaries()}
                except Exception:  # the cluster is away: keep what we have, try again
                    log.debug("doorbell: no cluster map", exc_info=True)
                    masters = dict.fromkeys(scopes)
                for name in [n for n in scopes if n not in masters]:  # no longer a master
                    scopes.pop(name).cancel()
                    self._tracking.pop(name, None)
                for name, node in masters.items():
                    if name not in scopes and node is not None:
                        scopes[name] = scope = anyio.CancelScope()
                        self._tracking[name] = False
                        group.start_soon(self._scoped, scope, name, node, stop)
                # Follow the masters: a failover or a new shard shows in the slot map, looked
                # up again after a while or at once when a node's connection failed.
                self._lost.clear()
                with anyio.move_on_after(_TOPOLOGY_S):
                    await _first(stop.wait, self._lost.wait)
            group.cancel_scope.cancel()

    async def _scoped(
        self, scope: anyio.CancelScope, name: str, node: Any, stop: anyio.Event
    ) -> None:
        with scope:
            await self._node(name, node.connection_class, node.connection_kwargs, stop)

    async def _node(
        self, name: str, connection_class: Any, kwargs: dict[str, Any], stop: anyio.Event
    ) -> None:
        backoff = 0.05
        while not stop.is_set():
            conn = connection_class(**{**kwargs, "protocol": 3, "socket_timeout": None})
            try:
                await conn.connect()
                await conn.send_command("CLIENT", "TRACKING", "on", "BCAST", *self._prefixes)
                reply = await conn.read_response(timeout=_ANSWER_S)  # None: no answer
                if reply not in (b"OK", "OK"):
                    raise RuntimeError("CLIENT TRACKING did not answer OK")
                conn._parser.set_invalidation_push_handler(_keys_of)
                self._tracking[name] = True
                self._ring(self._all)  # whatever came while it was not tracking
                backoff = 0.05
                while True:
                    pushed = await conn.read_response(push_request=True)
                    self._ring(self._indexes(pushed))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if is_refusal(exc):  # refused, not lost
                    self.refused = True
                    log.warning(
                        "admission polls: this Redis refuses CLIENT TRACKING (%s); give the "
                        "worker user '+client|tracking' (pipeline.acl) or use Redis >= 6.2",
                        type(exc).__name__,
                    )
                    return
                log.debug("doorbell: connection lost; again in %.2fs", backoff)
                self._lost.set()
            finally:
                if name in self._tracking:
                    self._tracking[name] = False
                with anyio.CancelScope(shield=True):
                    await conn.disconnect(nowait=True)
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, _BACKOFF_MAX_S)

    def _indexes(self, pushed: Any) -> Iterable[int]:
        # An invalidation names keys (a flush: none, so every partition); anything else
        # (another push kind, a stray reply) rings every partition: a ring is only a hint.
        if isinstance(pushed, list) and pushed:
            found = [self._parts.get(k) for k in pushed if isinstance(k, bytes)]
            if found and all(i is not None for i in found):
                return [i for i in found if i is not None]
        return self._all


async def _keys_of(response: Any) -> Any:
    """The keys an invalidation push names (`[b'invalidate', [keys]]`), or None (a flush)."""
    return response[1] if isinstance(response, list) and len(response) > 1 else None


async def _first(*waits: Any) -> None:
    """Return once the first of `waits` (async callables) returns."""
    async with anyio.create_task_group() as group:

        async def one(wait: Any) -> None:
            await wait()
            group.cancel_scope.cancel()

        for wait in waits:
            group.start_soon(one, wait)
