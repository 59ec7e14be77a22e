"""The read-only web console (`aci-evidence console`): sessions, a session's timeline, an
invocation's two views, replay diffs, the fleet and its streams, live over SSE.

`create_app(settings, url)` is the ASGI application for embedding; `serve_console` runs it
under uvicorn. Both need the `console` extra (Starlette, Jinja2, uvicorn, sse-starlette),
imported only when asked for, so the command line loads without it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ConsoleConfig", "create_app", "serve_console"]


def __getattr__(name: str) -> Any:
    if name in ("ConsoleConfig", "create_app"):
        from app.console import app

        return getattr(app, name)
    if name == "serve_console":
        from app.console.serve import serve_console

        return serve_console
    raise AttributeError(name)
