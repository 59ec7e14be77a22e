"""Cancellation end to end on the real Redis (issue 32): a cancel is a request, admission
checks its scope and ends the call ERROR/CANCELLED once, a running source is stopped, and a
cancel that loses the race to finish changes nothing."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from pipeline.cancel import Stage
from pipeline.client import EvidenceClient, ToolCall
from pipeline.keys import Keys
from pipeline.record import read_records
from pipeline.settings import Settings
from tests.pipeline.helpers import admit, assert_exactly_once, books, loads, running_worker
from tests.pipeline.sources import InstantSource

pytestmark = pytest.mark.redis


class RecordingSource(InstantSource):
    """Records every call of its source; each takes `delay` seconds, and notes whether it was
    stopped (cancelled) before it ended."""

    def __init__(self, delay: float = 0.0) -> None:
        super().__init__(delay)
        self.stopped = 0
        self.started = anyio.Event()
        self.stopped_event = anyio.Event()

    async def fetch(self, request: Any) -> Any:
        self.started.set()
        try:
            return await super().fetch(request)
        except anyio.get_cancelled_exc_class():
            self.stopped += 1
            self.stopped_event.set()
            raise


def kcall(i: int | str, query: str = "pool exhausted") -> ToolCall:
    return ToolCall(
        tool="lookup_knowledge", tool_call_id=f"call_{i}", arguments=json.dumps({"query": query})
    )


def settings_for(prefix: str, **kw: Any) -> Settings:
    # Through the workers' admission (a call can be cancelled while still a request).
    base: dict[str, Any] = {
        "prefix": prefix, "visibility_timeout_s": 12.0, "deadline_s": 10.0, "admit_here": "0",
    }  # fmt: skip
    base.update(kw)
    return Settings(**base)


def code_of(result: Any) -> str | None:
    error = loads(result.model).get("error")
    return error["code"] if error else None


async def test_a_cancelled_queued_call_never_runs(redis: Any, prefix: str) -> None:
    settings = settings_for(prefix)
    source = RecordingSource()
    async with EvidenceClient(redis, settings) as client:
        assert await client.submit_many("s1", [kcall(1)]) == [None]
        assert (await client.progress("s1", "call_1")).stage is Stage.QUEUED
        await admit(redis, settings)  # admitted, not taken: no worker yet
        assert (await client.progress("s1", "call_1")).stage is Stage.ADMITTED
        assert await client.cancel("s1", "call_1") is True
        await admit(redis, settings)  # the cancel: the call ends CANCELLED here
        final = await client.result("s1", "call_1")
        assert final is not None and final.lifecycle.value == "ERROR"
        assert code_of(final) == "CANCELLED"
        assert "before it ran" in loads(final.model)["error"]["message"]
        assert loads(final.control)["error_code"] == "CANCELLED"
        async with running_worker(redis, settings, {"lookup_knowledge": source}):
            await anyio.sleep(0.8)  # the worker reads the entry, finds it final, acks it
        progress = await client.progress("s1", "call_1")
        assert progress.stage is Stage.FINAL and progress.cancelled
    assert source.calls == 0  # never executed
    book = await books(redis, prefix, "s1")
    assert_exactly_once(book, ["call_1"])
    pending = await redis.xpending(Keys(prefix).invocations, "workers")
    assert pending["pending"] == 0
    # Replay shows it as cancelled: nothing ran, so nothing to re-project or re-execute.
    from workers.replay import Selection, load_redis
    from workers.replay_diff import CANCELLED_REASON, reexecute, reproject

    [recording] = await load_redis(redis, settings, Selection(session="s1"))
    for verdict in (
        reproject(recording, settings),
        await reexecute(recording, settings, {"lookup_knowledge": source}),
    ):
        assert (verdict.outcome, verdict.reason) == ("skipped", CANCELLED_REASON)
    assert source.calls == 0


async def test_a_cancel_that_overtook_its_request_admits_the_call_cancelled(
    redis: Any, prefix: str
) -> None:
    # The client has not seen the call admitted: its cancel carries the envelope, so even a
    # cancel admitted before (or instead of) its request ends the call, never running it.
    settings = settings_for(prefix)
    source = RecordingSource()
    async with EvidenceClient(redis, settings) as client:
        await client.submit_many("s1", [kcall(2)])
        assert await client.cancel("s1", "call_2") is True
        async with running_worker(redis, settings, {"lookup_knowledge": source}):
            [final] = await client.call_many("s1", [kcall(2)], timeout=5)
        assert final is not None and code_of(final) == "CANCELLED"
    assert source.calls == 0
    assert_exactly_once(await books(redis, prefix, "s1"), ["call_2"])


@pytest.mark.serial
async def test_a_running_call_is_stopped_in_its_source(redis: Any, prefix: str) -> None:
    settings = settings_for(prefix)
    source = RecordingSource(delay=8.0)
    seen: list[tuple[str, Stage, int]] = []
    async with (
        EvidenceClient(redis, settings) as client,
        running_worker(redis, settings, {"lookup_knowledge": source}),
    ):

        async def call() -> Any:
            return await client.call(
                "s1", kcall(3), timeout=10,
                on_progress=lambda i, p: seen.append((i, p.stage, p.attempt)),
            )  # fmt: skip

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            with anyio.fail_after(5):
                await source.started.wait()
            await anyio.sleep(0.3)
            started = anyio.current_time()
            assert await client.cancel("s1", "call_3")
            final = await client.wait("s1", ["call_3"], timeout=5)
            assert code_of(final["call_3"]) == "CANCELLED"
            with anyio.fail_after(2):
                await source.stopped_event.wait()
            stopped_after = anyio.current_time() - started
    assert stopped_after < 1.0
    assert "while it ran" in loads(final["call_3"].model)["error"]["message"]
    assert source.calls == 1 and source.stopped == 1
    stages = [stage for _i, stage, _a in seen]
    assert stages[-1] is Stage.FINAL and Stage.RUNNING in stages
    assert (("call_3", Stage.RUNNING, 1)) in seen
    assert_exactly_once(await books(redis, prefix, "s1"), ["call_3"])


async def test_cancelling_the_awaiting_coroutine_cancels_the_call(redis: Any, prefix: str) -> None:
    settings = settings_for(prefix)
    source = RecordingSource(delay=8.0)
    async with (
        EvidenceClient(redis, settings) as client,
        running_worker(redis, settings, {"lookup_knowledge": source}),
    ):
        with anyio.move_on_after(1.0):
            await client.call("s1", kcall(4), timeout=10)
        final = await client.wait("s1", ["call_4"], timeout=5)
        assert code_of(final["call_4"]) == "CANCELLED"
        # Opted out: the call runs on to its result.
        quick = RecordingSource(delay=0.5)
        source.delay = 0.5
        with anyio.move_on_after(0.2):
            await client.call("s1", kcall(5), timeout=10, cancel_on_exit=False)
        final = await client.wait("s1", ["call_5"], timeout=5)
        assert code_of(final["call_5"]) is None and quick.calls == 0


async def test_cancel_racing_finish_ends_once(redis: Any, prefix: str) -> None:
    settings = settings_for(prefix)
    source = RecordingSource(delay=0.0)
    ids = [f"r{i}" for i in range(60)]
    async with (
        EvidenceClient(redis, settings) as client,
        running_worker(redis, settings, {"lookup_knowledge": source}, concurrency=16),
    ):

        async def one(i: str) -> None:
            await client.submit_many("s1", [kcall(i)])
            await anyio.sleep((int(i[1:]) % 30) * 0.008)  # 0 to 232 ms
            await client.cancel("s1", f"call_{i}")

        async with anyio.create_task_group() as group:
            for i in ids:
                group.start_soon(one, i)
        found = await client.wait("s1", [f"call_{i}" for i in ids], timeout=10)
    assert len(found) == len(ids)
    codes = [code_of(r) for r in found.values()]
    assert set(codes) <= {None, "CANCELLED"}
    print(f"\n{codes.count('CANCELLED')} cancelled, {codes.count(None)} finished first")
    assert codes.count(None) and codes.count("CANCELLED")  # the race went both ways
    assert_exactly_once(await books(redis, prefix, "s1"), [f"call_{i}" for i in ids])


async def test_a_cancel_never_reaches_another_sessions_or_scopes_call(
    redis: Any, prefix: str
) -> None:
    settings = settings_for(prefix)
    source = RecordingSource(delay=0.6)
    async with (
        EvidenceClient(redis, settings) as owner,
        EvidenceClient(redis, settings) as other,
        running_worker(redis, settings, {"lookup_knowledge": source}),
    ):
        await owner.submit_many("victim", [kcall(7)])
        await owner.admitted("victim", ["call_7"], timeout=5)
        # Another session's id: another call (nothing of it to cancel).
        assert await other.cancel("attacker", "call_7") is False
        # The same id in the victim's session, submitted by the other client with another
        # scope: a conflict, and its cancel is refused by the client...
        [refused] = await other.submit_many("victim", [kcall(7, "something else")])
        assert refused is not None and code_of(refused) == "DUPLICATE_TOOL_CALL_ID"
        assert await other.cancel("victim", "call_7") is False
        # ...and by admission, when the request is forged by hand with that other scope.
        from pipeline.cancel import cancel_envelope
        from pipeline.envelope import Invocation, encode_envelope
        from pipeline.record import ENTRY_DATA

        forged = cancel_envelope(
            encode_envelope(
                Invocation(session_id="victim", tool="lookup_knowledge", tool_call_id="call_7",
                           arguments=json.dumps({"query": "other"}), submitted_at_ms=1)
            )
        )  # fmt: skip
        await redis.xadd(Keys(prefix).requests, {ENTRY_DATA: forged})
        final = await owner.wait("victim", ["call_7"], timeout=5)
        assert code_of(final["call_7"]) is None  # the victim's evidence, not CANCELLED
    [record] = await read_records(redis, Keys(prefix), [("victim", "call_7")])
    assert b"cx" not in record and "cx" not in record


async def test_a_cancel_admitted_as_its_call_never_runs_before_its_cancel_applies(
    redis: Any, prefix: str, monkeypatch: Any
) -> None:
    # Review (issue 32): a cancel that overtook its request is admitted as the call itself
    # (admit.lua appends its invocation entry), and only then, one round trip later, does
    # cancel.lua set the call's cancel mark. A reader that takes the entry in between found
    # no mark and ran the source with the cancel's arguments. The window is widened here.
    import workers.runtime.admission as admission_module

    real = admission_module.apply_cancels

    async def late(*args: Any, **kwargs: Any) -> None:
        await anyio.sleep(1.0)
        await real(*args, **kwargs)

    monkeypatch.setattr(admission_module, "apply_cancels", late)
    settings = settings_for(prefix)
    source = RecordingSource()
    async with EvidenceClient(redis, settings) as client:
        await client.submit_many("s1", [kcall(7)])
        assert await client.cancel("s1", "call_7") is True
        # Only the cancel reaches a worker (its request was dropped).
        stream = Keys(prefix).for_session("s1").requests
        [(first, _f), _cancel] = await redis.xrange(stream, "-", "+")
        await redis.xdel(stream, first)
        async with running_worker(redis, settings, {"lookup_knowledge": source}):
            final = await client.wait("s1", ["call_7"], timeout=5)
    assert code_of(final["call_7"]) == "CANCELLED"
    assert source.calls == 0
    assert_exactly_once(await books(redis, prefix, "s1"), ["call_7"])


async def test_a_task_whose_call_ended_cancelled_reads_cancelled(
    redis: Any, prefix: str, monkeypatch: Any
) -> None:
    # Review: `tasks/get` said "cancelled" only when the call's cancel mark (`cx`) was set,
    # but a call can end ERROR/CANCELLED without it (a cancel admitted as its call, finished
    # by the worker before cancel.lua ran: cancel.lua then finds it final and writes no mark).
    # The task read "completed" with isError. The error code is what says it.
    pytest.importorskip("mcp")
    import workers.runtime.admission as admission_module
    from hosts import mcp_server
    from hosts.mcp_tasks import TaskHandles, enable_tasks

    real = admission_module.apply_cancels

    async def late(*args: Any, **kwargs: Any) -> None:
        await anyio.sleep(1.0)
        await real(*args, **kwargs)

    monkeypatch.setattr(admission_module, "apply_cancels", late)
    settings = settings_for(prefix)
    async with EvidenceClient(redis, settings) as client:
        await client.submit_many("s1", [kcall(8)])
        assert await client.cancel("s1", "call_8") is True
        stream = Keys(prefix).for_session("s1").requests
        [(first, _f), _cancel] = await redis.xrange(stream, "-", "+")
        await redis.xdel(stream, first)
        async with running_worker(redis, settings, {"lookup_knowledge": RecordingSource()}):
            final = await client.wait("s1", ["call_8"], timeout=5)
            await anyio.sleep(1.5)  # cancel.lua has run too: it found the call final
        assert code_of(final["call_8"]) == "CANCELLED"
        server = mcp_server.build_server(mcp_server.queue_runner(client, 30.0), http=True)
        handles = TaskHandles(b"review key")
        enable_tasks(server, client, handles, ttl_ms=60_000)
        entry = server.get_request_handler("tasks/get")
        meta = {"io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}}}}  # fmt: skip
        params = entry.params_type.model_validate(
            {"taskId": handles.encode("s1", "call_8"), "_meta": meta}
        )
        got = await entry.handler(None, params)
    assert got["status"] == "cancelled", got
