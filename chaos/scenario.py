"""Running one scenario: a private Redis (AOF, an ACL user with a password), a worker fleet, a
paced load, a fault injector beside it, the drain, and the books.

A scenario is a `Spec`: its fleet (module, environment overrides), its plan (fault markers,
rate) and an async injector that receives the running `Run`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Final

import anyio
import anyio.to_thread
import msgspec

from chaos.books import Books, check_books
from chaos.fleet import Fleet, open_fleet
from chaos.load import LoadStats, Planned, plan_calls, submit_all, wait_acked, wait_final
from chaos.services import READER, OwnMariadb, OwnRedis, own_redis
from pipeline.client import EvidenceClient
from pipeline.keys import GROUP, Keys
from pipeline.local_cluster import LocalCluster, local_cluster
from pipeline.redis_io import PipelineError, open_redis
from pipeline.settings import Settings

__all__ = ["PREFIX", "REDIS_PASSWORD", "Report", "Run", "Scale", "Spec", "run_spec"]

PREFIX: Final = "chaos"
REDIS_PASSWORD: Final = "chaos-Redis-pw-4Xk"
# How long the books wait for entries of final calls to be acked: three visibility timeouts.
_ACKED_S: Final = 12.0


class Scale(msgspec.Struct, frozen=True, kw_only=True):
    """How big each scenario is."""

    calls: int
    rate: float  # calls per second while faults are injected
    workers: int
    concurrency: int
    burst_calls: int
    drain_s: float = 120.0


class Report(msgspec.Struct, kw_only=True):
    """One row of the chaos table (and its detail for `--json`)."""

    scenario: str
    invocations: int
    faults: int
    fault_kind: str
    finals: int
    duplicates: int
    lost: int
    leaked: int
    minted: int
    masked: int
    wrong: int
    pending_left: int
    worker_crashes: int
    submit_retries: int
    submit_p50_ms: float
    submit_p99_ms: float
    submit_max_ms: float
    max_backlog: int
    seconds: float
    states: dict[str, int]
    notes: list[str]
    measures_loss: bool = False

    @property
    def ok(self) -> bool:
        """Zero lost, duplicated, minted, masked, wrong, left pending or leaked (a row that
        measures what a setting loses, `ACI_WAIT_REPLICAS=0` on a failover, reports its lost
        and duplicated calls without failing on them)."""
        bad = [self.leaked, self.minted, self.masked, self.wrong]
        if self.measures_loss:
            return not any(bad) and self.finals + self.lost == self.invocations
        bad += [self.duplicates, self.lost]
        return not any(bad) and not self.pending_left and self.finals == self.invocations


class Run:
    """What an injector works with while the load runs."""

    def __init__(
        self,
        spec: Spec,
        scale: Scale,
        server: OwnRedis | None,
        fleet: Fleet,
        redis: Any,
        keys: Keys | None = None,
    ) -> None:
        self.spec = spec
        self.scale = scale
        self._server = server
        self.cluster: LocalCluster | None = None
        self.fleet = fleet
        self.redis = redis
        self.keys = keys or Keys(PREFIX)
        self.stats = LoadStats()
        self.total = 0
        self.faults = 0
        self.notes: list[str] = []
        self.load_done = anyio.Event()
        self.max_backlog = 0
        self.mariadb: OwnMariadb | None = None
        # The load's client and plan (set by `run_spec`): what the cancellation storm cancels.
        self.client: EvidenceClient | None = None
        self.plan: list[Planned] = []

    @property
    def server(self) -> OwnRedis:
        """The private Redis (scenarios on a single Redis)."""
        assert self._server is not None, "a cluster scenario has `cluster`, not `server`"
        return self._server

    async def until_submitted(self, fraction: float) -> None:
        """Wait until that fraction of the plan is submitted (or the load is done)."""
        # Polls a counter another task updates; an Event per threshold would not be simpler.
        while self.stats.submitted < fraction * self.total and not self.load_done.is_set():  # noqa: ASYNC110
            await anyio.sleep(0.05)

    async def pending_of(self, pid: int) -> int:
        """Entries held (delivered, not acked) by the worker process `pid`."""
        tag, held = f"-{pid}-", 0
        for part in self.keys.parts:
            try:
                consumers = await self.redis.xinfo_consumers(part.invocations, GROUP)
            except Exception:
                continue
            held += sum(int(c["pending"]) for c in consumers if tag in _text(c["name"]))
        return held

    async def fleet_ready(self, limit: float = 60.0) -> bool:
        """Wait until every worker has started (consumers only register on their first read
        of an entry in Redis 7.0, so the workers' own log line is the signal); False, and a
        note in the report, if some have not after `limit` seconds."""
        with anyio.move_on_after(limit):
            while not all(w.started() for w in self.fleet.workers):  # noqa: ASYNC110
                await anyio.sleep(0.1)
            return True
        waiting = sum(not w.started() for w in self.fleet.workers)
        self.notes.append(f"{waiting} worker(s) not started after {limit:.0f}s")
        return False

    async def sample_backlog(self) -> None:
        """Record the largest backlog (entries not yet read + read but unfinished)."""
        backlog = 0
        with contextlib.suppress(Exception):
            for part in self.keys.parts:
                for group in await self.redis.xinfo_groups(part.invocations):
                    backlog += int(group.get("lag") or 0) + int(group.get("pending") or 0)
        self.max_backlog = max(self.max_backlog, backlog)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


Injector = Callable[[Run], Awaitable[None]]


class Spec(msgspec.Struct, frozen=True, kw_only=True):
    """A scenario: its fleet, its plan and its fault injector."""

    name: str
    fault_kind: str
    inject: Any  # Injector (msgspec cannot type a callable)
    module: str = "app.cli"
    env: dict[str, str] = msgspec.field(default_factory=dict)
    fault: str = ""
    burst: bool = False
    own_mariadb: bool = False
    hostile_upstream: bool = False  # knowledge calls go to a `chaos.hostile` RAG server
    # A local Redis Cluster (3 masters + 3 replicas, `ACI_PARTITIONS=16`) instead of one Redis.
    cluster: bool = False
    sessions: int = 8
    drain_s: float | None = None  # instead of the scale's (a row that may lose calls)
    measures_loss: bool = False  # lost/duplicated are the measurement, not a failure


def base_env(redis_url: str, shop_url: str) -> dict[str, str]:
    """The workers' environment: credentials in every URL, short timeouts."""
    return {
        "ACI_REDIS_URL": redis_url,
        "ACI_PREFIX": PREFIX,
        "ACI_MYSQL_SHOP_URL": shop_url,
        "ACI_VISIBILITY_TIMEOUT_S": "4",
        "ACI_DEADLINE_S": "2",
        "ACI_MYSQL_STATEMENT_TIMEOUT_MS": "1500",
    }


@contextlib.contextmanager
def _maybe_mariadb(spec: Spec) -> Iterator[OwnMariadb | None]:
    if not spec.own_mariadb:
        yield None
        return
    from chaos.services import own_mariadb

    with own_mariadb() as server:
        yield server


@contextlib.contextmanager
def _maybe_hostile(spec: Spec) -> Iterator[tuple[dict[str, str], list[str]]]:
    # The hostile RAG upstream, as the workers' ACI_RAG_URL; its port is a secret too.
    if not spec.hostile_upstream:
        yield {}, []
        return
    from chaos.hostile import hostile_server

    with hostile_server() as server:
        _ = server.bombs.gzip, server.bombs.zstd, server.bombs.deflate  # built before the load
        yield {"ACI_RAG_URL": server.url}, [str(server.server_address[1])]


async def _supervise(run: Run, stop: anyio.Event) -> None:
    while not stop.is_set():
        await anyio.to_thread.run_sync(run.fleet.supervise)
        await run.sample_backlog()
        with anyio.move_on_after(0.25):
            await stop.wait()


async def _drive(run: Run, client: EvidenceClient, plan: list[Planned]) -> None:
    rate = None if run.spec.burst else run.scale.rate
    submitters = 16 if run.spec.burst else 4
    try:
        await submit_all(client, plan, rate=rate, submitters=submitters, stats=run.stats)
    finally:
        run.load_done.set()


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Target:
    """Where a scenario runs: one private Redis, or a local cluster."""

    url: str
    server: OwnRedis | None = None
    cluster: LocalCluster | None = None
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    secrets: list[str] = dataclasses.field(default_factory=list)


@contextlib.contextmanager
def _target(spec: Spec) -> Iterator[_Target]:
    if not spec.cluster:
        with own_redis(REDIS_PASSWORD) as server:
            yield _Target(url=server.url, server=server,
                          secrets=[REDIS_PASSWORD, str(server.port)])  # fmt: skip
        return
    # A small node timeout: a killed master's replica is promoted about a second later.
    with local_cluster(3, 1, node_timeout_ms=1000) as cluster:
        env = {"ACI_PARTITIONS": "16"}
        yield _Target(url=cluster.url, cluster=cluster, env=env,
                      secrets=[str(p) for p in cluster.ports])  # fmt: skip


async def run_spec(spec: Spec, scale: Scale, shop_url: str, needles: list[str]) -> Report:
    """Run one scenario end to end and check its books."""
    started = time.monotonic()
    total = scale.burst_calls if spec.burst else scale.calls
    plan = plan_calls(total, fault=spec.fault, sessions=spec.sessions)
    drain_s = spec.drain_s if spec.drain_s is not None else scale.drain_s
    with (
        _target(spec) as target,
        _maybe_mariadb(spec) as mariadb,
        _maybe_hostile(spec) as (hostile_env, hostile_secrets),
    ):
        url = mariadb.reader_url if mariadb else shop_url
        env = {**base_env(target.url, url), **target.env, **spec.env, **hostile_env}
        settings = Settings.from_env(env)
        secrets = [*needles, *target.secrets, "127.0.0.1", *hostile_secrets]
        if mariadb:
            secrets += [READER[1], str(mariadb.port)]
        async with open_redis(target.url) as redis, EvidenceClient(redis, settings) as client:
            with open_fleet(
                env, scale.workers, module=spec.module, concurrency=scale.concurrency
            ) as fleet:
                run = Run(spec, scale, target.server, fleet, redis, settings.keys())
                run.total, run.mariadb, run.cluster = total, mariadb, target.cluster
                run.client, run.plan = client, plan
                # Faults start once every worker reads: a worker that starts while Redis is
                # away is a separate case (tests/chaos/test_worker_startup.py).
                await run.fleet_ready()
                stop = anyio.Event()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_supervise, run, stop)
                    async with anyio.create_task_group() as load:
                        load.start_soon(_drive, run, client, plan)
                        load.start_soon(spec.inject, run)
                    unfinished = await wait_final(redis, client, plan, drain_s)
                    # Entries of calls final already, held by a killed worker, are acked by
                    # the takeover after the visibility timeout (4 s): the books then count
                    # only what was never acked.
                    waited = time.monotonic()
                    if left := await wait_acked(redis, settings.keys(), _ACKED_S):
                        run.notes.append(f"{left} entries of final calls not acked in {_ACKED_S}s")
                    elif (took := time.monotonic() - waited) > 0.5:
                        run.notes.append(f"entries of final calls acked {took:.1f}s after")
                    stop.set()
                if unfinished:
                    run.notes.append(f"{unfinished} not final after {drain_s}s")
            books = await _books(redis, settings.keys(), plan, secrets, fleet)
    return _report(spec, run, books, time.monotonic() - started)


async def _books(
    redis: Any, keys: Keys, plan: list[Planned], secrets: list[str], fleet: Fleet
) -> Books:
    for _ in range(20):
        try:
            return await check_books(redis, keys, plan, needles=secrets, logs=fleet.logs())
        except PipelineError:
            await anyio.sleep(0.5)
    return await check_books(redis, keys, plan, needles=secrets, logs=fleet.logs())


def _report(spec: Spec, run: Run, books: Books, seconds: float) -> Report:
    return Report(
        scenario=spec.name,
        invocations=books.planned,
        faults=run.faults,
        fault_kind=spec.fault_kind,
        finals=books.finals,
        duplicates=books.duplicates,
        lost=books.lost,
        leaked=books.leaked,
        minted=books.minted,
        masked=books.masked,
        wrong=books.wrong,
        pending_left=books.pending_left,
        worker_crashes=run.fleet.crashes,
        submit_retries=run.stats.retries,
        submit_p50_ms=run.stats.percentile(0.50),
        submit_p99_ms=run.stats.percentile(0.99),
        submit_max_ms=run.stats.percentile(1.0),
        max_backlog=run.max_backlog,
        seconds=round(seconds, 1),
        states=books.states,
        notes=run.notes + books.examples,
        measures_loss=spec.measures_loss,
    )
