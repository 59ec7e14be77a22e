"""`aci-evidence mcp --http`: the SDK's Streamable HTTP app behind the session gate
(`hosts.mcp_http.SessionGate`), served by uvicorn until a signal."""

from __future__ import annotations

import logging
import signal
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from hosts.listen import http_server
from hosts.mcp_http import SessionGate
from hosts.mcp_options import ServeOptions

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

__all__ = ["http_app", "serve_http"]


def http_app(server: Server[Any], options: ServeOptions) -> Any:
    """The ASGI app of `--http`: the SDK's Streamable HTTP app behind `SessionGate`."""
    limits = options.limits
    app = server.streamable_http_app(
        host=options.host,
        session_idle_timeout=limits.idle_timeout_s,
        max_sessions=None,  # the gate bounds sessions (and closes idle ones to make room)
    )
    return SessionGate(app, limits, options.token)


async def serve_http(server: Server[Any], options: ServeOptions) -> None:
    """Serve `--http` until SIGINT or SIGTERM (a graceful shutdown: open requests finish)."""
    assert options.http_port is not None
    http = http_server(
        http_app(server, options), options.host, options.http_port, options.trusted_proxies
    )

    async def stop_on_signal(
        *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            task_status.started()
            async for _ in signals:
                http.should_exit = True  # a graceful shutdown: open requests finish
                return

    guarded = "with a bearer token" if options.token else "without a token"
    # At the default level too (like a worker's start line): the one sign the server is up.
    logging.getLogger("aci.announce").info(
        "serving Streamable HTTP on http://%s:%d/mcp (%s)",
        options.host,
        options.http_port,
        guarded,
    )
    async with anyio.create_task_group() as tg:
        await tg.start(stop_on_signal)
        await http.serve()
        tg.cancel_scope.cancel()
