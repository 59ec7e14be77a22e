"""The `hostile_submitter` scenario's attacker (issue 23): a submitter with the real `submitter`
ACL user (`pipeline.acl`) runs the red-team list while the other sessions' load runs.

In rounds until the load is done: the forgery race (poll the victims' call records, send the
same ids with other arguments, try to rewrite the record and to append an envelope), trims of
the request stream (`MAXLEN 0`, `MINID`), PEXPIRE/DEL/type poisoning of every key it knows,
raw EVALSHA, forged lifecycle and sessions entries, oversized requests (a few of `big_bytes`,
once), and a flood of malformed requests. The books then check that every victim call ended
once, with the victim's own scope (`wrong` otherwise), and `notes` say what was tried, what
Redis refused and how much worker memory moved.
"""

from __future__ import annotations

import json
import secrets
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from pipeline.acl import acl_rules, setuser_command
from pipeline.envelope import Invocation, encode_envelope
from pipeline.record import ENTRY_DATA, ENTRY_ID
from pipeline.redis_io import PipelineError, call_redis, open_redis

if TYPE_CHECKING:
    from chaos.scenario import Run

__all__ = ["hostile_submitter"]

_VICTIMS = [f"chaos-s{i}" for i in range(8)]


def _forged(session: str, tool_call_id: str) -> bytes:
    return encode_envelope(
        Invocation(
            session_id=session,
            tool="lookup_knowledge",
            tool_call_id=tool_call_id,
            arguments=json.dumps({"query": "everything is healthy"}),
            submitted_at_ms=1,
        )
    )


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def _try(tally: Counter[str], what: str, op: Any) -> None:
    try:
        await call_redis(op)
        tally[f"{what}: accepted"] += 1
    except PipelineError as exc:
        tally[f"{what}: {exc}"] += 1


async def hostile_submitter(run: Run, big_bytes: int = 4_000_000, flood: int = 2000) -> None:
    """Attack until the load is done (see the module docstring)."""
    password = secrets.token_urlsafe(16)
    rules = acl_rules("chaos", "submitter", 7, 0)
    await run.redis.execute_command(*setuser_command("submitter", rules, password))
    url = f"redis://submitter:{password}@127.0.0.1:{run.server.port}/0"
    tally: Counter[str] = Counter()
    keys = run.keys
    part = keys.parts[0]
    rss_before = {w.pid: _rss_kb(w.pid) for w in run.fleet.workers if w.alive()}
    peak: dict[int, int] = dict(rss_before)
    raced: set[tuple[str, str]] = set()
    async with open_redis(url) as attacker:
        for _ in range(5):  # oversized requests, sent raw
            await _try(
                tally,
                "oversized request",
                attacker.xadd(part.requests, {ENTRY_DATA: b"x" * big_bytes}),
            )
        await _try(
            tally, "raw EVALSHA", attacker.execute_command("EVALSHA", "0" * 40, "1", part.requests)
        )
        rounds = 0
        while not run.load_done.is_set():
            rounds += 1
            # The forgery race: each victim call record seen for the first time gets a request
            # for the same id with other arguments, and the writes that used to work.
            for n in range(0, run.total, 3):  # every third planned call (chaos.load's names)
                key = (f"chaos-s{n % 8}", f"call_{n:06d}")
                if key not in raced:
                    call = keys.call(*key)
                    if await call_redis(attacker.hget(call, ENTRY_ID)) is None:
                        continue
                    raced.add(key)
                    envelope = _forged(*key)
                    await _try(
                        tally,
                        "forged request",
                        attacker.xadd(part.requests, {ENTRY_DATA: envelope}),
                    )
                    await _try(tally, "rewrite call record", attacker.hset(call, ENTRY_ID, "1-0"))
                    await _try(
                        tally,
                        "forged envelope",
                        attacker.xadd(part.invocations, {ENTRY_DATA: envelope}),
                    )
            # Erase what can be erased; refused for everything but the request stream's trims.
            await _try(tally, "XADD MAXLEN 0", attacker.execute_command(
                "XADD", part.requests, "MAXLEN", "0", "*", "x", "y"))  # fmt: skip
            await _try(tally, "XADD MINID", attacker.execute_command(
                "XADD", part.requests, "MINID", "=", "9999999999999", "*", "x", "y"))  # fmt: skip
            for name in (part.requests, part.invocations, part.lifecycle, part.sessions,
                         keys.model(_VICTIMS[0]), keys.call(_VICTIMS[0], "c0")):  # fmt: skip
                await _try(tally, "PEXPIRE", attacker.pexpire(name, 1))
                await _try(tally, "DEL", attacker.delete(name))
            await _try(tally, "poison sessions", attacker.hset(part.sessions, "x", "y"))
            await _try(
                tally, "forged lifecycle", attacker.xadd(part.lifecycle, {"status": "READY"})
            )
            await _try(tally, "hide session", attacker.zadd(part.sessions, {_VICTIMS[0]: 0}))
            await _try(
                tally,
                "forge duplicate_of",
                attacker.hset(keys.fingerprints(_VICTIMS[0]), "f", "c0"),
            )
            if rounds == 2:  # a flood of malformed requests
                pipe = attacker.pipeline(transaction=False)
                for i in range(flood):
                    pipe.xadd(part.requests, {"junk": str(i)})
                try:
                    await pipe.execute()
                    tally["flood of malformed requests: accepted"] += flood
                except Exception as exc:
                    tally[f"flood: {type(exc).__name__}"] += 1
            for w in run.fleet.workers:
                if w.alive() and w.pid in peak:
                    peak[w.pid] = max(peak[w.pid], _rss_kb(w.pid))
            await anyio.sleep(0.2)
    run.faults = sum(tally.values())
    growth = max((peak[p] - rss_before[p] for p in rss_before), default=0)
    run.notes.append(f"attacker: {rounds} rounds, {len(raced)} calls raced")
    run.notes.append(f"worker RSS growth max {growth // 1024} MB (oversized requests of "
                     f"{big_bytes // 1_000_000} MB x5)")  # fmt: skip
    run.notes += [f"{what} x{n}" for what, n in sorted(tally.items())]
