"""The fault scenarios and their injectors, and the two scales (`ci`, `full`)."""

from __future__ import annotations

import contextlib
import random
import signal
from typing import Final

import anyio
import anyio.to_thread

from chaos.attacker import hostile_submitter
from chaos.fleet import WorkerProc
from chaos.hostile import HOSTILE
from chaos.scenario import Run, Scale, Spec
from chaos.worker import GARBAGE, HANG
from pipeline.keys import key_slot
from pipeline.redis_io import PipelineError

__all__ = ["SCALES", "SPECS"]

SCALES: Final = {
    "ci": Scale(calls=280, rate=70.0, workers=2, concurrency=16, burst_calls=600, drain_s=60.0),
    "full": Scale(calls=2100, rate=120.0, workers=3, concurrency=16, burst_calls=6000),
}


async def _nothing(run: Run) -> None:
    return None


async def _holding(run: Run, limit: float = 1.5) -> list[tuple[WorkerProc, int]]:
    """Workers holding delivered entries, polled for up to `limit` s (a fast fleet holds
    entries only for moments)."""
    with anyio.move_on_after(limit):
        while True:
            found = [(w, await run.pending_of(w.pid)) for w in run.fleet.workers if w.alive()]
            if holding := [(w, held) for w, held in found if held > 0]:
                return holding
            await anyio.sleep(0.005)
    return []


async def _sigkill(run: Run) -> None:
    """SIGKILL a random worker that holds entries, at a random moment; restart it; repeat
    until the load ends (a worker still starting up holds nothing and is not a target)."""
    rng = random.Random(11)
    while not run.load_done.is_set():
        with anyio.move_on_after(rng.uniform(0.8, 2.0)):
            await run.load_done.wait()
        if run.load_done.is_set():
            return
        holding = await _holding(run)
        if not holding:
            continue
        victim, held = rng.choice(holding)
        victim.signal(signal.SIGKILL)
        run.faults += 1
        run.notes.append(f"SIGKILL pid {victim.pid} holding {held}")
        await anyio.to_thread.run_sync(run.fleet.replace, victim)


async def _zombie(run: Run) -> None:
    """SIGSTOP a worker while it holds entries, past the visibility timeout, then SIGCONT."""
    for fraction in (0.2, 0.6):
        await run.until_submitted(fraction)
        victim = run.fleet.workers[0]
        # A load already over (the CI scale's, during the first freeze) leaves nothing to
        # hold: that round is skipped after a second, not frozen with nothing held.
        over = run.load_done.is_set()
        with anyio.move_on_after(1 if over else 10):
            while await run.pending_of(victim.pid) == 0:  # noqa: ASYNC110 (polls Redis)
                await anyio.sleep(0.01)
        if over and await run.pending_of(victim.pid) == 0:
            run.notes.append(f"load over before the {fraction:.0%} SIGSTOP: nothing to hold")
            continue
        victim.signal(signal.SIGSTOP)
        held = await run.pending_of(victim.pid)
        await anyio.sleep(4)  # the visibility timeout
        # Then the janitors' next pass (every second): frozen until all it held is taken
        # over, at most 3 s more (a fixed 3 s sleep before).
        with anyio.move_on_after(3):
            while await run.pending_of(victim.pid) > 0:  # noqa: ASYNC110 (polls Redis)
                await anyio.sleep(0.05)
        taken = held - await run.pending_of(victim.pid)
        victim.signal(signal.SIGCONT)
        run.faults += 1
        run.notes.append(f"SIGSTOP pid {victim.pid} holding {held}; {taken} taken over")


async def _redis_restart(run: Run) -> None:
    """Stop Redis (SIGTERM, AOF flushed) and start it again at once, twice."""
    for fraction in (0.3, 0.65):
        await run.until_submitted(fraction)
        await anyio.to_thread.run_sync(run.server.stop)
        await anyio.to_thread.run_sync(run.server.start)
        run.faults += 1


async def _redis_outage(run: Run) -> None:
    """Redis refuses connections for 5 s, later hangs (SIGSTOP, a partition) for 3 s."""
    await run.until_submitted(0.3)
    await anyio.to_thread.run_sync(run.server.stop)
    await anyio.sleep(5)
    await anyio.to_thread.run_sync(run.server.start)
    run.faults += 1
    await run.until_submitted(0.65)
    run.server.freeze()
    await anyio.sleep(3)
    run.server.thaw()
    run.faults += 1


def _busiest_slot(run: Run) -> int:
    """The hash slot of the partition holding the first planned session."""
    return key_slot(run.keys.for_session("chaos-s0").tag)


async def _cluster_failover(run: Run) -> None:
    """SIGKILL the master serving the first session's partition at 40% of the load; its
    replica is promoted; the killed node restarts and rejoins as a replica."""
    cluster = run.cluster
    assert cluster is not None
    await run.until_submitted(0.4)
    victim = await anyio.to_thread.run_sync(cluster.master_of, _busiest_slot(run))
    await anyio.to_thread.run_sync(cluster.kill, victim)
    run.faults += 1
    took = await anyio.to_thread.run_sync(cluster.wait_failover, victim)
    run.notes.append(f"SIGKILL master; replica promoted, cluster ok after {took:.1f}s")
    await anyio.to_thread.run_sync(cluster.restart, victim)


async def _cluster_reshard(run: Run) -> None:
    """Move the first 1,024 slots of a master (partition 0's among them) to another master
    with `redis-cli --cluster reshard` at 30% of the load, and back at 65%."""
    cluster = run.cluster
    assert cluster is not None
    slot = key_slot(run.keys.parts[0].tag)
    for fraction in (0.3, 0.65):
        await run.until_submitted(fraction)
        source = await anyio.to_thread.run_sync(cluster.master_of, slot)
        target = next(p for p in await anyio.to_thread.run_sync(cluster.master_ports)
                      if p != source)  # fmt: skip
        started = anyio.current_time()
        await anyio.to_thread.run_sync(cluster.reshard, source, target, 1024)
        run.faults += 1
        run.notes.append(f"resharded 1024 slots in {anyio.current_time() - started:.1f}s")


def _cluster_specs() -> tuple[Spec, ...]:
    """Each cluster fault with `ACI_WAIT_REPLICAS` 0 (measured: what an acknowledged write
    may lose on a failover) and 1 (must lose and duplicate nothing)."""
    faults = (
        ("cluster_failover", "SIGKILL master", _cluster_failover),
        ("cluster_reshard", "reshard 1024 slots x2", _cluster_reshard),
    )
    return tuple(
        Spec(
            name=f"{name}_wait{wait}",
            fault_kind=kind,
            inject=inject,
            cluster=True,
            sessions=32,
            env={"ACI_WAIT_REPLICAS": str(wait)},
            measures_loss=wait == 0,
            drain_s=30.0 if wait == 0 else None,
        )
        for name, kind, inject in faults
        for wait in (0, 1)
    )


async def _mariadb_restart(run: Run) -> None:
    """Stop the private MariaDB for 3 s, twice, while queries run."""
    assert run.mariadb is not None
    for fraction in (0.3, 0.65):
        await run.until_submitted(fraction)
        await anyio.to_thread.run_sync(run.mariadb.stop)
        await anyio.sleep(3)
        await anyio.to_thread.run_sync(run.mariadb.start)
        run.faults += 1


async def _count_marked(run: Run) -> None:
    """The faults of the hang/garbage scenarios are the marked calls themselves."""
    await run.load_done.wait()
    run.faults = sum(1 for i in range(run.total) if i % 10 == 9)


async def _hostile_submitter(run: Run) -> None:
    """A submitter (the real ACL user) runs the red-team list of issue 23 meanwhile; the
    oversized requests are 40 MB at full scale (as in the issue), 4 MB in CI."""
    big = 40_000_000 if run.scale.calls >= 1000 else 4_000_000
    await hostile_submitter(run, big_bytes=big)


async def _cancel_storm(run: Run) -> None:
    """Issue 32: every other call of the plan is cancelled at a random moment (0-1 s after the
    load reached it: before admission, queued, running or already final) while workers are
    SIGKILLed and restarted. The books then check every call final exactly once (CANCELLED
    or its own result), nothing lost."""
    assert run.client is not None
    client, rng = run.client, random.Random(23)
    chosen = [p for n, p in enumerate(run.plan) if n % 2 == 0]
    sent, ended = 0, list[float]()

    async def cancel_later(session: str, tool_call_id: str, delay: float) -> None:
        # A cancel finds nothing to cancel until the load has sent the call: tried again
        # every 50 ms (for up to 5 s); then the time from the cancel to the call's end.
        nonlocal sent
        await anyio.sleep(delay)
        for _ in range(100):
            with contextlib.suppress(PipelineError):
                if await client.cancel(session, tool_call_id):
                    sent += 1
                    started = anyio.current_time()
                    if await client.wait(session, [tool_call_id], 20.0):
                        ended.append(anyio.current_time() - started)
                    return
            await anyio.sleep(0.05)

    async with anyio.create_task_group() as group:
        group.start_soon(_sigkill, run)
        for n, planned in enumerate(chosen):
            await run.until_submitted((2 * n + 1) / max(1, run.total))
            group.start_soon(cancel_later, planned.session, planned.call.tool_call_id,
                             rng.uniform(0.0, 1.0))  # fmt: skip
    run.notes.append(f"{sent} cancels sent for {len(chosen)} calls; {_spread(ended)}")


def _spread(seconds: list[float]) -> str:
    """p50, p99 and max of the cancel-to-final times, in ms."""
    if not seconds:
        return "no cancel ended in time"
    ordered = sorted(seconds)

    def at(q: float) -> int:
        return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))])

    return f"cancel to final p50 {at(0.5)} ms, p99 {at(0.99)} ms, max {at(1.0)} ms"


async def _burst(run: Run) -> None:
    """The burst itself is the fault: everything is submitted at once."""
    await run.load_done.wait()
    run.faults = 1
    run.notes.append(f"burst of {run.total} submitted in {run.stats.seconds:.2f}s")


SPECS: Final = (
    Spec(name="baseline", fault_kind="none", inject=_nothing),
    Spec(name="worker_sigkill", fault_kind="SIGKILL+restart", inject=_sigkill),
    Spec(name="worker_zombie", fault_kind="SIGSTOP>visibility", inject=_zombie),
    Spec(name="redis_restart", fault_kind="restart (AOF)", inject=_redis_restart),
    Spec(name="redis_outage", fault_kind="down 5s, frozen 3s", inject=_redis_outage),
    Spec(name="mariadb_restart", fault_kind="down 3s", inject=_mariadb_restart, own_mariadb=True),
    Spec(
        name="source_hang",
        fault_kind="hang -> deadline",
        inject=_count_marked,
        module="chaos.worker",
        env={"ACI_DEADLINE_S": "1"},
        fault=HANG,
    ),
    Spec(
        name="source_garbage",
        fault_kind="garbage answer",
        inject=_count_marked,
        module="chaos.worker",
        fault=GARBAGE,
    ),
    Spec(name="burst", fault_kind="burst >> capacity", inject=_burst, burst=True),
    Spec(name="cancel_storm", fault_kind="cancel half + SIGKILL", inject=_cancel_storm),
    Spec(
        name="hostile_upstream",
        fault_kind="bomb/surrogate/drip",
        inject=_count_marked,
        env={"ACI_RAG_MAX_BYTES": str(1024 * 1024)},
        fault=HOSTILE,
        hostile_upstream=True,
    ),
    Spec(
        name="hostile_submitter",
        fault_kind="submitter red team",
        inject=_hostile_submitter,
        # Its victims send requests (the attack's target), not admit their own calls.
        env={"ACI_ADMIT_RESEND_S": "1", "ACI_ADMIT_HERE": "0"},
    ),
    *_cluster_specs(),
)
