"""Listening on HTTP for the hosts and the console: whether a bind address is loopback, why an
address cannot be listened on (asked before uvicorn binds), and a uvicorn server whose signals
are its caller's."""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = ["http_server", "is_loopback", "listen_problem"]

ASGIApp = Callable[..., Any]


def is_loopback(host: str) -> bool:
    """Whether a bind address only accepts connections from this machine."""
    if host.casefold() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def listen_problem(host: str, port: int) -> str | None:
    """Why `host:port` cannot be listened on (in use, not this machine's address), or None.
    Asked before uvicorn binds: on a failed bind it logs its own line and raises SystemExit(3),
    a traceback inside a task group and exit code 3 ("pending") outside one."""
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            sock.bind(address)
    except OSError as exc:  # socket.gaierror included
        return f"cannot listen on {host}:{port} ({exc.strerror or type(exc).__name__})"
    return None


def http_server(app: ASGIApp, host: str, port: int, trusted_proxies: Sequence[str] = ()) -> Any:
    """A uvicorn server for `app` whose signals are the caller's (see `mcp_server.serve`).

    The client address its requests carry is the socket peer's: uvicorn's proxy headers
    (`X-Forwarded-For`, trusted by default from 127.0.0.1) are off, unless `trusted_proxies`
    names the proxies (addresses or networks) whose headers are believed."""
    import uvicorn

    class _Uvicorn(uvicorn.Server):
        # uvicorn's own handler re-raises the signal after its graceful shutdown, which ends
        # in a KeyboardInterrupt traceback on Ctrl-C; the caller stops it (`should_exit`).
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", lifespan="on",
        proxy_headers=bool(trusted_proxies),
        forwarded_allow_ips=list(trusted_proxies) if trusted_proxies else "",
    )  # fmt: skip
    return _Uvicorn(config)
