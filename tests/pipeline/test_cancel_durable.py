"""A cancel is durable the moment its request is acked (review of issue 32): `admit.lua` sets
the call's cancel mark `cx` in the step that acks the cancel, so a worker that dies before
`cancel.lua` runs (simulated here by `apply_cancels` raising or never running) loses nothing:
whoever meets the call next ends it ERROR/CANCELLED, and its source never runs or is stopped.
The mark is written only on the call of the cancel's own scope, never on a final call."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from pipeline.cancel import Stage, cancel_envelope
from pipeline.client import EvidenceClient
from pipeline.envelope import Invocation, encode_envelope
from pipeline.keys import Keys
from pipeline.record import ENTRY_DATA, read_records
from pipeline.redis_io import RedisUnavailable
from tests.pipeline.helpers import admit, assert_exactly_once, books, loads, running_worker
from tests.pipeline.test_cancel import RecordingSource, code_of, kcall, settings_for

pytestmark = pytest.mark.redis


def _crash_once(monkeypatch: Any) -> list[int]:
    """`apply_cancels` raises the first time (the connection is lost, or the worker dies,
    between the admit that acked the cancel and `cancel.lua`), then never runs at all (no
    later round applies it either)."""
    import workers.runtime.admission as admission_module

    calls: list[int] = []

    async def lost(*_args: Any, **_kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            # What a lost connection raises: the admission loop logs it and carries on.
            raise RedisUnavailable("connection lost before cancel.lua")

    monkeypatch.setattr(admission_module, "apply_cancels", lost)
    return calls


async def _record(redis: Any, prefix: str, session: str, call: str) -> dict[Any, Any]:
    [record] = await read_records(redis, Keys(prefix), [(session, call)])
    return dict(record)


def _has_mark(record: dict[Any, Any]) -> bool:
    return b"cx" in record or "cx" in record


async def test_a_cancel_acked_then_lost_still_ends_a_queued_call_cancelled(
    redis: Any, prefix: str, monkeypatch: Any
) -> None:
    lost = _crash_once(monkeypatch)
    settings = settings_for(prefix)
    source = RecordingSource()
    async with EvidenceClient(redis, settings) as client:
        await client.submit_many("s1", [kcall(1)])
        await admit(redis, settings)  # admitted, not taken: no worker yet
        assert await client.cancel("s1", "call_1") is True
        with pytest.raises(RedisUnavailable):
            await admit(redis, settings)  # acks the cancel, then "dies"
        assert lost == [1]
        stream = Keys(prefix).for_session("s1").requests
        assert await redis.xlen(stream) == 0  # the cancel's request is gone: acked, deleted
        assert await client.result("s1", "call_1") is None  # cancel.lua never ran
        assert _has_mark(await _record(redis, prefix, "s1", "call_1"))
        progress = await client.progress("s1", "call_1")
        assert progress.stage is Stage.ADMITTED and progress.cancelled
        async with running_worker(redis, settings, {"lookup_knowledge": source}):
            final = (await client.wait("s1", ["call_1"], timeout=5))["call_1"]
    assert code_of(final) == "CANCELLED"
    assert "before it ran" in loads(final.model)["error"]["message"]
    assert source.calls == 0  # never executed
    assert_exactly_once(await books(redis, prefix, "s1"), ["call_1"])


async def test_a_cancel_acked_then_lost_still_stops_a_running_call(
    redis: Any, prefix: str, monkeypatch: Any
) -> None:
    lost = _crash_once(monkeypatch)
    settings = settings_for(prefix)
    source = RecordingSource(delay=8.0)
    async with (
        EvidenceClient(redis, settings) as client,
        running_worker(redis, settings, {"lookup_knowledge": source}),
    ):
        await client.submit_many("s1", [kcall(2)])
        with anyio.fail_after(5):
            await source.started.wait()
        assert await client.cancel("s1", "call_2") is True
        # The worker's admission acks the cancel and "dies" before cancel.lua (logged by the
        # loop, which carries on); its own poll of the mark stops the source.
        final = (await client.wait("s1", ["call_2"], timeout=5)).get("call_2")
        assert final is not None, "the cancel was lost: the call ran on"
        with anyio.fail_after(2):
            await source.stopped_event.wait()
    assert lost  # apply_cancels was reached and never applied anything
    assert code_of(final) == "CANCELLED"
    assert "while it ran" in loads(final.model)["error"]["message"]
    assert source.calls == 1 and source.stopped == 1
    assert_exactly_once(await books(redis, prefix, "s1"), ["call_2"])


async def test_a_cancel_that_overtook_its_request_and_was_lost_never_runs(
    redis: Any, prefix: str, monkeypatch: Any
) -> None:
    _crash_once(monkeypatch)
    settings = settings_for(prefix)
    source = RecordingSource()
    async with EvidenceClient(redis, settings) as client:
        await client.submit_many("s1", [kcall(3)])
        assert await client.cancel("s1", "call_3") is True
        stream = Keys(prefix).for_session("s1").requests
        [(first, _f), _cancel] = await redis.xrange(stream, "-", "+")
        await redis.xdel(stream, first)  # only the cancel reaches admission
        with pytest.raises(RedisUnavailable):
            await admit(redis, settings)
        assert _has_mark(await _record(redis, prefix, "s1", "call_3"))
        async with running_worker(redis, settings, {"lookup_knowledge": source}):
            final = (await client.wait("s1", ["call_3"], timeout=5))["call_3"]
    assert code_of(final) == "CANCELLED" and source.calls == 0
    assert_exactly_once(await books(redis, prefix, "s1"), ["call_3"])


async def test_the_mark_is_written_only_for_the_same_scope_and_never_on_a_final_call(
    redis: Any, prefix: str, monkeypatch: Any
) -> None:
    _crash_once(monkeypatch)
    settings = settings_for(prefix)
    async with EvidenceClient(redis, settings) as client:
        await client.submit_many("victim", [kcall(4)])
        await admit(redis, settings)
        # A cancel forged with another scope under the victim's id: a conflict, no mark.
        forged = cancel_envelope(
            encode_envelope(
                Invocation(session_id="victim", tool="lookup_knowledge", tool_call_id="call_4",
                           arguments=json.dumps({"query": "other"}), submitted_at_ms=1)
            )
        )  # fmt: skip
        await redis.xadd(Keys(prefix).for_session("victim").requests, {ENTRY_DATA: forged})
        await admit(redis, settings)  # no cancel of this scope: apply_cancels not reached
        assert not _has_mark(await _record(redis, prefix, "victim", "call_4"))
        # A final call: its cancel changes nothing, and progress never reads "cancelled".
        async with running_worker(redis, settings, {"lookup_knowledge": RecordingSource()}):
            final = (await client.wait("victim", ["call_4"], timeout=5))["call_4"]
        assert code_of(final) is None
        assert await client.cancel("victim", "call_4") is True
        with pytest.raises(RedisUnavailable):
            await admit(redis, settings)
        assert not _has_mark(await _record(redis, prefix, "victim", "call_4"))
        progress = await client.progress("victim", "call_4")
        assert progress.stage is Stage.FINAL and not progress.cancelled


async def test_a_cancel_acked_then_lost_ends_a_call_taken_over_cancelled(
    redis: Any, prefix: str, monkeypatch: Any
) -> None:
    # A worker read the call's entry, marked its attempt and died (its entry stays pending);
    # the cancel is acked and cancel.lua lost. The worker that takes the entry over finds the
    # mark and never runs the source.
    from pipeline.keys import GROUP

    _crash_once(monkeypatch)
    settings = settings_for(prefix, visibility_timeout_s=1.0, deadline_s=0.5)
    source = RecordingSource()
    part = Keys(prefix).for_session("s1")
    async with EvidenceClient(redis, settings) as client:
        await client.submit_many("s1", [kcall(5)])
        await admit(redis, settings)
        await redis.xgroup_create(part.invocations, GROUP, id="0", mkstream=True)
        [[_stream, [(_entry, _fields)]]] = await redis.xreadgroup(
            GROUP, "dead-worker", {part.invocations: ">"}, count=1
        )
        await redis.hset(part.call("s1", "call_5"), mapping={"tk": 1, "ta": 1})
        assert (await client.progress("s1", "call_5")).stage is Stage.RUNNING
        assert await client.cancel("s1", "call_5") is True
        with pytest.raises(RedisUnavailable):
            await admit(redis, settings)
        async with running_worker(redis, settings, {"lookup_knowledge": source}):
            final = (await client.wait("s1", ["call_5"], timeout=8))["call_5"]
    assert code_of(final) == "CANCELLED" and source.calls == 0
    assert_exactly_once(await books(redis, prefix, "s1"), ["call_5"])
    assert (await redis.xpending(part.invocations, GROUP))["pending"] == 0
