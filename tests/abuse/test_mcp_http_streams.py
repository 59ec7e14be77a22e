"""An unauthenticated MCP-over-HTTP client that opens sessions and holds a GET stream (the
Streamable HTTP channel for server messages) on each: such a session has a request in flight
for as long as the stream stays open, so it was never idle — never timed out, never displaced
to make room — and `max_sessions` of them (16 per address) answered every new client 503 for as
long as the attacker kept its connections. An open GET stream alone no longer protects a session
from being closed for room (its client reconnects on 404, as the protocol says)."""

from __future__ import annotations

import contextlib
import socket

import anyio
import httpx
import pytest

from hosts.mcp_http import HttpLimits
from tests.conftest import scaled
from tests.hosts.test_mcp_http import (
    HANDSHAKE,
    call_in_session,
    client_from,
    initialize,
    local_app,
    serving,
)

pytest.importorskip("mcp")


async def test_sessions_held_by_open_get_streams_do_not_lock_out_new_clients() -> None:
    app, gate = local_app(HttpLimits(max_sessions=4, idle_timeout_s=1.0))
    ended = anyio.Event()
    async with serving(app) as url, client_from("127.0.0.2") as attacker:

        async def hold(session_id: str) -> None:
            headers = {"mcp-session-id": session_id, "mcp-protocol-version": HANDSHAKE,
                       "accept": "text/event-stream"}  # fmt: skip
            async with attacker.stream("GET", url, headers=headers, timeout=60) as response:
                assert response.status_code == 200
                with contextlib.suppress(httpx.HTTPError):  # closed by the server
                    async for _chunk in response.aiter_bytes():
                        pass
            ended.set()

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for _ in range(4):
                    response = await initialize(attacker, url)
                    tg.start_soon(hold, response.headers["mcp-session-id"])
                await anyio.sleep(1.5)  # every stream open, past the idle timeout
                assert gate.open_sessions == 4
                async with client_from("127.0.0.3") as newcomer:
                    response = await initialize(newcomer, url)
                    assert response.status_code == 200, response.text
                    session = response.headers["mcp-session-id"]
                    observation = await call_in_session(newcomer, url, session)
                assert observation["evidence_status"] == "EVIDENCE_FOUND"
                assert gate.open_sessions == 4
                with anyio.fail_after(5):
                    await ended.wait()  # the displaced session's stream was closed with it
                tg.cancel_scope.cancel()


async def test_requests_whose_body_never_arrives_do_not_lock_out_their_address() -> None:
    # 64 POSTs whose body stalls after one byte held the address's whole in-flight budget for
    # as long as the sockets stayed open: every other client of that address (on a loopback
    # bind: every local client) was answered 429. A body must now arrive within the bound.
    # (64 in flight per address was the default then; named here since the default grew.)
    app, _gate = local_app(HttpLimits(body_timeout_s=1.0, requests_per_client=64))
    async with serving(app) as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        head = (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{")  # fmt: skip
        with contextlib.ExitStack() as stack:
            for _ in range(64):
                sock = stack.enter_context(socket.socket())
                sock.bind(("127.0.0.2", 0))
                sock.connect(("127.0.0.1", port))
                sock.sendall(head)
            await anyio.sleep(0.3)
            async with client_from("127.0.0.2") as neighbour:
                assert (await initialize(neighbour, url)).status_code == 429  # still in time
                await anyio.sleep(1.5)
                response = await initialize(neighbour, url)
                assert response.status_code == 200, response.text
            answer = sock.recv(4096)  # the last of them: answered 408
        assert answer.startswith(b"HTTP/1.1 408")


# 10,000 requests through uvicorn took 20-45 s: 2,000 in `make test` (a flood 60 times the
# default burst of 32 new sessions either way), the 10,000 of the report in `make chaos`.
FLOOD = scaled(ci=2_000, full=10_000)


@pytest.mark.slow
@pytest.mark.scaled
async def test_ten_thousand_initialize_from_one_address_never_lock_out_a_newcomer() -> None:
    # The session policy gives a closed session its token back and never closes a held one
    # for its own client's room; neither may let one address's flood (sessions left open, or
    # opened and closed again) keep a newcomer out.
    app, gate = local_app(HttpLimits())
    async with serving(app) as url, client_from("127.0.0.2") as flooder:
        codes: dict[int, int] = {}

        async def flood(count: int, close: bool) -> None:
            for _ in range(count):
                response = await initialize(flooder, url)
                codes[response.status_code] = codes.get(response.status_code, 0) + 1
                if close and response.status_code == 200:
                    await flooder.delete(
                        url,
                        headers={"mcp-session-id": response.headers["mcp-session-id"],
                                 "mcp-protocol-version": HANDSHAKE},
                    )  # fmt: skip

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for worker in range(40):
                    tg.start_soon(flood, FLOOD // 40, worker % 4 == 0)  # a quarter closed again
        assert sum(codes.values()) == FLOOD and codes.get(429, 0) > 0.9 * FLOOD, codes
        assert gate.open_sessions <= HttpLimits().sessions_per_client
        async with client_from("127.0.0.3") as newcomer:
            response = await initialize(newcomer, url)
            assert response.status_code == 200, response.text
            session = response.headers["mcp-session-id"]
            observation = await call_in_session(newcomer, url, session)
        assert observation["evidence_status"] == "EVIDENCE_FOUND"
