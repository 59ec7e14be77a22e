"""Serving the console with uvicorn, and the `console` command's flags.

    aci-evidence console [--host 127.0.0.1] [--port 8765] [--root-path /prefix]

Bound to a loopback address by default. `--root-path /aci` is for a proxy that serves the
console under `/aci/` and forwards requests with that prefix stripped: every link, script and
event URL the pages hold starts with it. A bearer token (`ACI_CONSOLE_TOKEN`, read from the
environment so it never shows in a process list) guards it when set, and is required to bind
any other address. Run it with the auditor Redis user's URL in `ACI_REDIS_URL`: that user may
read every key of the prefix and write none.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from typing import Any

from pipeline.settings import Settings, SettingsError

__all__ = ["console_config", "is_loopback", "run_console", "serve_console", "uvicorn_config"]

TOKEN_ENV = "ACI_CONSOLE_TOKEN"


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _root_path(text: str) -> str:
    text = text.strip()
    if not text:
        return ""
    # `//host/x` would make every link, script and event URL point at another site.
    bad = text.startswith("//") or any(c in text for c in "?#\"'<> \\")
    if not text.startswith("/") or bad or not text.isprintable():
        raise SettingsError("--root-path must be a path such as /aci")
    return text.rstrip("/")


LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
MIN_TOKEN_CHARS = 16  # as `mcp --http --token`


def _check_token(token: str | None) -> None:
    # Beyond loopback the token is all that guards every observation: `a` took 94 guesses.
    if token is not None and not (
        len(token.strip()) >= MIN_TOKEN_CHARS and token.isprintable() and token.isascii()
    ):
        raise SettingsError(
            f"{TOKEN_ENV}: at least {MIN_TOKEN_CHARS} printable characters (a random one: "
            "openssl rand -hex 16)"
        )


def console_config(host: str, token: str | None) -> Any:
    """The console's config for `aci-evidence console --host host`: without a token (loopback
    only) it answers only under loopback Host names, against DNS rebinding."""
    from app.console.app import ConsoleConfig

    if token:
        return ConsoleConfig(token=token)
    return ConsoleConfig(allowed_hosts=(*LOOPBACK_NAMES, host))


async def serve_console(
    settings: Settings,
    url: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    root_path: str = "",
    token: str | None = None,
) -> None:
    """Serve the console until SIGINT/SIGTERM."""
    import uvicorn

    from app.console.app import create_app
    from pipeline.redis_io import open_redis

    _check_token(token)
    if not is_loopback(host) and not token:
        raise SettingsError(f"{TOKEN_ENV} must be set to serve the console beyond loopback")
    # Opened here, not in the app's lifespan: an unusable URL is the CLI's one-line
    # configuration error (exit 2), not uvicorn's startup traceback (exit 3).
    async with open_redis(url, cluster=settings.redis_cluster) as redis:
        await _first_ping(redis)
        app = create_app(settings, config=console_config(host, token), redis=redis)
        await uvicorn.Server(uvicorn_config(app, host, port, root_path)).serve()


async def _first_ping(redis: Any) -> None:
    """One PING before serving. A Redis that refuses the URL's credentials stops the console
    with the CLI's one line (exit 1), as it stops a worker; one that does not answer is said
    once, and the console serves its "Redis is unreachable" page (503) until it does (before:
    only `console on …`, then silence while every page failed)."""
    import logging

    import anyio

    from pipeline.redis_io import RedisUnavailable, call_redis

    try:
        with anyio.fail_after(12):
            await call_redis(redis.ping())
    except (RedisUnavailable, TimeoutError) as exc:
        logging.getLogger("aci.console").warning(
            "Redis does not answer at ACI_REDIS_URL (%s): serving; every page says so"
            " (503) until it answers",
            type(exc).__name__,
        )


def uvicorn_config(app: Any, host: str, port: int, root_path: str = "") -> Any:
    """How `serve_console` runs uvicorn: no access log (URLs may carry the token), no proxy
    headers, and a deadline for each request's head (`app.console.protocol`)."""
    import uvicorn

    from app.console.protocol import HeadDeadlineProtocol

    return uvicorn.Config(
        app, host=host, port=port, root_path=_root_path(root_path), log_level="warning",
        proxy_headers=False, server_header=False, lifespan="on", http=HeadDeadlineProtocol,
    )  # fmt: skip


async def run_console(args: argparse.Namespace, settings: Settings) -> int:
    """`aci-evidence console`: flags → `serve_console`."""
    if not settings.redis_url:
        raise SettingsError("ACI_REDIS_URL is not set (the auditor user's URL, ideally)")
    try:
        import jinja2  # noqa: F401
        import sse_starlette  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        print("the console needs its extra: pip install 'aci-evidence[console]'", file=sys.stderr)
        return 2
    host, token = args.host, os.environ.get(TOKEN_ENV) or None
    _check_token(token)
    if not is_loopback(host) and not token:
        raise SettingsError(f"{TOKEN_ENV} must be set to serve the console beyond loopback")
    from hosts.listen import listen_problem

    busy = listen_problem(host, args.port)
    if busy is not None:  # before: uvicorn's own line, then exit code 3 ("pending")
        raise SettingsError(f"--port: {busy}")
    print(f"console on http://{host}:{args.port}{_root_path(args.root_path)}/", file=sys.stderr)
    await serve_console(
        settings,
        settings.redis_url,
        host=host,
        port=args.port,
        root_path=args.root_path,
        token=token,
    )
    return 0
