"""A hostile submitter's single crafted request entry against everyone else's calls (a private
Redis 7 with the real `pipeline.acl` users, a worker connected as `worker`).

The request stream is the one key a submitter writes, so whatever it appends there must only
ever hurt the attacker's own requests:
- an envelope nested deeper than the decoder recurses (a few KB, well within the size bound)
  is refused like any malformed request; it does not crash the worker's admission (a crash
  would repeat on every worker that takes the request over: no one's call admitted again);
- the request stream is written, never read, by submitters: readable, it told a snooper every
  session's new call the moment it was appended, to be replaced (XADD's `MINID`) by a request of
  another scope under the same ids, whatever the session id (unguessable ones too);
- an explicit entry id at the end of the id space (`XADD ... 18446744073709551615-...`, which
  ACLs cannot refuse) leaves the stream unable to take another `XADD *`: admission resets an
  emptied request stream whose last id no clock writes, so everyone can submit again.
"""

from __future__ import annotations

import contextlib
import json

import anyio
import msgspec
import pytest

from contracts import LifecycleStatus
from contracts.status import CONTRACT_VERSION
from pipeline.client import EvidenceClient, ToolCall
from pipeline.envelope import decode_envelope, encode_envelope
from pipeline.redis_io import RedisProtocolError, call_redis, open_redis
from tests.abuse.conftest import SETTINGS, P
from tests.pipeline.acl_server import AclServer
from tests.pipeline.helpers import loads, running_worker
from tests.pipeline.sources import InstantSource


def ask(i: int) -> ToolCall:
    return ToolCall(
        tool="lookup_knowledge", tool_call_id=f"call_{i}", arguments={"query": f"real {i}"}
    )


async def answered(client: EvidenceClient, n: int, first: int = 0) -> None:
    calls = [ask(i) for i in range(first, first + n)]
    results = await client.call_many("victim", calls, timeout=8)
    for i, result in enumerate(results, first):
        assert result is not None and result.lifecycle is LifecycleStatus.READY
        assert f"real {i}" in loads(result.model)["evidence"][0]["excerpt"]


async def test_a_deeply_nested_request_is_refused_without_crashing_admission(
    server: AclServer,
) -> None:
    # 4 KB: far below the size bound, far deeper than the decoder's recursion limit.
    head = json.dumps(
        {"v": CONTRACT_VERSION, "session_id": "attacker", "tool": "lookup_knowledge",
         "tool_call_id": "x", "arguments": "{}", "submitted_at_ms": 1}
    )  # fmt: skip
    poison = (head[:-1] + ', "pad": ' + "[" * 2000 + "]" * 2000 + "}").encode()
    async with (
        open_redis(server.url("submitter")) as attacker,
        open_redis(server.url("worker")) as worker,
        EvidenceClient.connect(SETTINGS, server.url("submitter")) as client,
    ):
        await call_redis(attacker.xadd(P.requests, {"d": poison}))
        with anyio.fail_after(15):
            async with running_worker(worker, SETTINGS, {"lookup_knowledge": InstantSource()}):
                await answered(client, 3)
        reasons = [f[b"reason"] for _e, f in await call_redis(worker.xrange(P.dead))]
    assert reasons == [b"not an invocation envelope of this contract version"]


LAST_ID = "18446744073709551615-18446744073709551615"  # the end of the stream id space


@pytest.mark.parametrize(
    "append",
    [
        pytest.param(("XADD", P.requests, LAST_ID, "x", "y"), id="last-id"),
        pytest.param(("XADD", P.requests, "MAXLEN", "0", LAST_ID, "x", "y"), id="last-id-trimmed"),
        pytest.param(
            ("XADD", P.requests, "18446744073709551615-18446744073709551613", "x", "y"),
            id="two-before-the-last",
        ),
    ],
)
async def test_an_exhausted_request_stream_id_is_reset_for_everyone(
    server: AclServer, append: tuple[str, ...]
) -> None:
    async with (
        open_redis(server.url("submitter")) as attacker,
        open_redis(server.url("worker")) as worker,
        EvidenceClient.connect(SETTINGS, server.url("submitter")) as client,
    ):
        with anyio.fail_after(15):
            async with running_worker(worker, SETTINGS, {"lookup_knowledge": InstantSource()}):
                await answered(client, 1)  # the stream and its group exist
                await call_redis(attacker.execute_command(*append))
                await anyio.sleep(0.3)  # a few admission rounds
                await answered(client, 5, first=1)


async def test_a_submitter_cannot_read_requests_to_replace_another_sessions_calls(
    server: AclServer,
) -> None:
    # Readable requests leak every session id and tool call id the moment it is appended, so
    # unguessable ids protect nothing: a snooper's XREAD BLOCK sees the victim's request, and
    # `XADD ... MINID = <its id + 1> * d <same session and id, another scope>` replaces it
    # before admission takes it (the victim's call: DUPLICATE_TOOL_CALL_ID, 20 times of 20).
    session = "s-7f3b9c2e4d1a4e6b8a0c5d2f9e1b3a7c"  # unguessable
    replaced: list[bytes] = []
    async with (
        open_redis(server.url("submitter")) as attacker,
        open_redis(server.url("worker")) as worker,
        EvidenceClient.connect(SETTINGS, server.url("submitter")) as client,
        running_worker(worker, SETTINGS, {"lookup_knowledge": InstantSource()}),
    ):
        for read in (("XREAD", "COUNT", "9", "STREAMS", P.requests, "0"),
                     ("XREVRANGE", P.requests, "+", "-", "COUNT", "9")):  # fmt: skip
            with pytest.raises(RedisProtocolError, match="NOPERM"):
                await call_redis(attacker.execute_command(*read))

        async def snoop() -> None:  # what worked when the requests were readable
            last = "$"
            while True:
                with contextlib.suppress(RedisProtocolError):
                    found = await call_redis(attacker.xread({P.requests: last}, block=100))
                    for _key, entries in found or []:
                        for entry_id, fields in entries:
                            last = entry_id
                            inv = decode_envelope(fields[b"d"])
                            ms, seq = entry_id.decode().split("-")
                            other = msgspec.structs.replace(inv, arguments='{"query": "healthy"}')
                            await call_redis(attacker.execute_command(
                                "XADD", P.requests, "MINID", "=", f"{ms}-{int(seq) + 1}", "*",
                                "d", encode_envelope(other),
                            ))  # fmt: skip
                            replaced.append(entry_id)
                await anyio.sleep(0.001)

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(snoop)
                await anyio.sleep(0.1)
                for i in range(5):
                    [result] = await client.call_many(session, [ask(i)], timeout=8)
                    assert result is not None
                    assert f"real {i}" in loads(result.model)["evidence"][0]["excerpt"]
                tg.cancel_scope.cancel()
    assert replaced == []


async def test_arguments_nested_deeper_than_the_encoder_recurses_are_a_schema_error(
    server: AclServer,
) -> None:
    # A host hands over the arguments it decoded (an Anthropic `tool_use.input`): nested 5,000
    # deep, encoding them raised RecursionError out of `call`; it is the caller's SCHEMA error.
    deep: dict[str, object] = {"query": "x"}
    inner = deep
    for _ in range(5000):
        inner["k"] = {}
        inner = inner["k"]  # type: ignore[assignment]
    async with (
        open_redis(server.url("worker")) as worker,
        EvidenceClient.connect(SETTINGS, server.url("submitter")) as client,
        running_worker(worker, SETTINGS, {"lookup_knowledge": InstantSource()}),
    ):
        with anyio.fail_after(15):
            call = ToolCall(tool="lookup_knowledge", tool_call_id="deep", arguments=deep)
            [result] = await client.call_many("victim", [call], timeout=8)
            await answered(client, 1)
    assert result is not None and loads(result.model)["error"]["code"] == "SCHEMA"
