"""`aci-evidence mcp --http`: a request body over its limit (4 MiB) is answered with HTTP 413
and a JSON-RPC error body (id null, a message naming the limit), whether the client declared
its length or streamed it; a body within the limit is served as before."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from hosts.mcp_asgi import BODY_BUFFER_MAX
from hosts.mcp_http import HttpLimits
from tests.hosts.test_mcp_http import INITIALIZE, client_from, local_app, serving

pytest.importorskip("mcp")


def _assert_json_rpc_413(status: int, payload: object) -> None:
    assert status == 413
    assert payload == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "Request body too large: the limit is 4 MiB "
                  "(4194304 bytes)"},
    }  # fmt: skip


async def test_a_declared_body_over_the_limit_is_a_json_rpc_error() -> None:
    app, _ = local_app(HttpLimits())
    async with serving(app) as url, client_from("127.0.0.2") as client:
        body = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b"a" * BODY_BUFFER_MAX
        response = await client.post(url, content=body + b'"}}')
        assert response.headers["content-type"].startswith("application/json")
        _assert_json_rpc_413(response.status_code, response.json())
        # the server is fine afterwards
        assert (await client.post(url, json=INITIALIZE)).status_code == 200


async def test_a_streamed_body_over_the_limit_is_a_json_rpc_error() -> None:
    app, _ = local_app(HttpLimits())

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"'
        for _ in range(5):
            yield b"a" * (1024 * 1024)
        yield b'"}}'

    async with serving(app) as url, client_from("127.0.0.3") as client:
        response = await client.post(url, content=chunks())
        assert "content-length" not in response.request.headers
        assert response.headers["content-type"].startswith("application/json")
        _assert_json_rpc_413(response.status_code, response.json())


def _padded_ping(size: int, request_id: object = 1) -> bytes:
    """A JSON-RPC ping of exactly `size` bytes (its padding in a param)."""
    head = (
        b'{"jsonrpc":"2.0","id":' + str(request_id).encode() + b',"method":"ping","params":{"x":"'
    )
    return head + b"a" * (size - len(head) - 3) + b'"}}'


async def test_a_body_of_exactly_the_limit_is_served_one_byte_more_refused() -> None:
    from tests.hosts.test_mcp_http import HANDSHAKE, initialize

    app, _ = local_app(HttpLimits())
    async with serving(app) as url, client_from("127.0.0.4") as client:
        session_id = (await initialize(client, url)).headers["mcp-session-id"]
        headers = {"mcp-session-id": session_id, "mcp-protocol-version": HANDSHAKE}

        async def streamed(body: bytes) -> AsyncIterator[bytes]:
            for start in range(0, len(body), 1024 * 1024):
                yield body[start : start + 1024 * 1024]

        for send in (lambda b: b, streamed):  # declared, then streamed without a length
            exact = await client.post(url, content=send(_padded_ping(BODY_BUFFER_MAX)),
                                      headers=headers)  # fmt: skip
            assert exact.status_code == 200, exact.text
            over = await client.post(url, content=send(_padded_ping(BODY_BUFFER_MAX + 1)),
                                     headers=headers)  # fmt: skip
            _assert_json_rpc_413(over.status_code, over.json())
        # the session is intact: a ping in it is answered
        ping = await client.post(url, json={"jsonrpc": "2.0", "id": 9, "method": "ping"},
                                 headers=headers)  # fmt: skip
        assert ping.status_code == 200, ping.text


async def test_a_batch_over_the_limit_is_one_json_rpc_error() -> None:
    app, _ = local_app(HttpLimits())
    async with serving(app) as url, client_from("127.0.0.5") as client:
        one = _padded_ping(BODY_BUFFER_MAX // 2)
        response = await client.post(url, content=b"[" + one + b"," + one + b"]")
        _assert_json_rpc_413(response.status_code, response.json())
        assert (await client.post(url, json=INITIALIZE)).status_code == 200
