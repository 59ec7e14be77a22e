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
