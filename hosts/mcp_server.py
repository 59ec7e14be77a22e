"""`aci-evidence mcp`: the three evidence tools over stdio or Streamable HTTP, with the
official `mcp` SDK.

The framework's id for a call is the host's `tools/call` request (CONTRACT.md §2):

- a harness that has the model's own id puts it in the request's `_meta` under
  `dev.aci-evidence/tool_call_id`, and the observation carries that id;
- otherwise (Claude Desktop, Claude Code, the MCP Inspector: standard hosts) the id is the
  JSON-RPC request id the host chose, as a string (`7` → `"7"`), and the observation
  carries that.

Neither is minted. Request ids restart at 1 on every connection, so each connection gets a
session of its own: over stdio one named when the connection opens (`mcp-` and 32 hex digits),
over HTTP one derived from the MCP session id the server created (`Mcp-Session-Id`) by an HMAC
under a per-process secret (`session_from_mcp`: `mcp-` and 32 hex digits too), so the name a
console shows is not the id that acts in the session. Only a handshake-era request names a
session, and only one the server created reaches a handler (`hosts.mcp_http.SessionGate`, then
the SDK's session manager); a 2026-07-28 HTTP request has no MCP session, so whatever
`Mcp-Session-Id` it carries it is its own connection and gets a fresh session. `--session`
puts every call in one named session instead: meant for one host that sends `_meta` ids.

Incident time (a harness's, never the model's): `--as-of`, or `_meta` per call (`mcp_time`).

Over HTTP, sessions are bounded, idle ones time out, new ones are limited per client and an
optional bearer token (required on a non-loopback bind) guards everything: `hosts.mcp_http`.

A result carries the Model Observation twice, as `structuredContent` and as one text block
of the same compact JSON; `isError` is true only for ERROR. The Harness Control View is not
sent: it stays on the session's control stream (queue mode) for the harness.

With ACI_REDIS_URL set each call goes through the queue (`EvidenceClient`); with `--local` the
stages run in this process; with neither the server refuses to start
(`mcp_options.mode_problem`): a host that forgot to pass the variable must not be handed the
MOCK incident as evidence. `mcp` is an optional dependency, imported only here; the options
and their checks are in `hosts.mcp_options`, the HTTP gate in `hosts.mcp_http`.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import secrets
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from importlib import metadata
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.abc
import msgspec

from contracts import export_tools
from hosts.listen import listen_problem
from hosts.mcp_options import (
    DEFAULT_TIMEOUT_S,
    NO_MODE_PROBLEM,
    TOKEN_ENV,
    ServeOptions,
    check_options,
    mode_problem,
)
from hosts.mcp_pending import MCP_PENDING_MESSAGE
from hosts.mcp_progress import local_step, reporting
from hosts.mcp_queue import ANSWER_GRACE_S, queue_runner
from hosts.mcp_serve_http import http_app, serve_http
from hosts.mcp_stdio import AnsweringReadStream
from hosts.mcp_tasks import TaskHandles, enable_tasks
from hosts.mcp_time import AS_OF_META_KEY, pinned_run
from hosts.turn import PENDING_MESSAGE, is_error, model_object, model_text
from pipeline.client import CallResult, EvidenceClient, ToolCall
from pipeline.settings import Settings
from pipeline.window import checked_as_of
from workers.sources import Source

if TYPE_CHECKING:
    import mcp.types as mcp_types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server

__all__ = [
    "ANSWER_GRACE_S",
    "AS_OF_META_KEY",
    "DEFAULT_TIMEOUT_S",
    "MCP_PENDING_MESSAGE",
    "NO_MODE_PROBLEM",
    "TOKEN_ENV",
    "TOOL_CALL_ID_META_KEY",
    "Runner",
    "ServeOptions",
    "build_server",
    "call_tool_result",
    "connection_session",
    "http_app",
    "list_tools_result",
    "local_runner",
    "queue_runner",
    "read_call",
    "serve",
    "session_from_mcp",
]

TOOL_CALL_ID_META_KEY: Final = "dev.aci-evidence/tool_call_id"
_MCP_SESSION_HEADER: Final = "mcp-session-id"

log = logging.getLogger("aci.mcp")

Runner = Callable[[ToolCall, str], Awaitable[CallResult | None]]
"""Runs one call in a session; None while it is still running at the timeout. (The runners
here also take a checked incident time, `run(call, session, as_of)`: `hosts.mcp_time`.)"""


def read_call(
    name: str, arguments: object, meta: Mapping[str, Any] | None, request_id: object = None
) -> ToolCall:
    """The framework tool call of one `tools/call` request.

    Its id is the `_meta` id when the key is present (a harness with the model's id), else
    the JSON-RPC request id as a string (`1` → `"1"`). Neither is minted; an unusable one
    gives the contract's INVALID_TOOL_CALL_ID error downstream.
    """
    if meta is not None and TOOL_CALL_ID_META_KEY in meta:
        tool_call_id: object = meta[TOOL_CALL_ID_META_KEY]
    elif isinstance(request_id, bool):
        tool_call_id = None  # not a JSON-RPC id
    elif isinstance(request_id, int | str):
        tool_call_id = str(request_id)
    else:
        tool_call_id = None
    return ToolCall(
        tool=name, tool_call_id=tool_call_id, arguments={} if arguments is None else arguments
    )


def connection_session() -> str:
    """A fresh session for one MCP connection: `mcp-` and 32 hex digits."""
    return f"mcp-{uuid.uuid4().hex}"


# The key of `session_from_mcp`: this process's own (MCP sessions live in one process anyway).
_SESSION_KEY: Final = secrets.token_bytes(32)


def session_from_mcp(mcp_session_id: str, key: bytes = _SESSION_KEY) -> str:
    """The evidence session of an MCP session: `mcp-` and 32 hex digits of an HMAC of the id
    under a server secret, the same form as a stdio connection's (`connection_session`).

    Keyed so that nothing the console or a view shows (the session name) lets anyone act in
    that MCP session, and nothing a client sends (its session id) names a session it chose."""
    mac = hmac.new(key, mcp_session_id.encode("utf-8", "surrogatepass"), hashlib.sha256)
    return f"mcp-{mac.hexdigest()[:32]}"


def call_tool_result(
    call: ToolCall, result: CallResult | None, pending_message: str = PENDING_MESSAGE
) -> dict[str, Any]:
    """The `CallToolResult` (wire shape) answering one call; pure. `pending_message`: what a
    pending answer tells the model (`MCP_PENDING_MESSAGE` where a repeat gets the result)."""
    if result is None:
        pending = {"tool_call_id": call.tool_call_id, "pending": True, "message": pending_message}
        text = msgspec.json.encode(pending).decode()
        return {"content": [{"type": "text", "text": text}], "structuredContent": pending,
                "isError": False}  # fmt: skip
    return {
        "content": [{"type": "text", "text": model_text(call, result)}],
        "structuredContent": model_object(call, result),
        "isError": is_error(result),
    }


def list_tools_result(data_sources: Sequence[str] = ()) -> dict[str, Any]:
    """The `ListToolsResult` (wire shape): the three tools, in a stable order; `data_sources`
    are the configured logical MySQL names (an enum in `query_mysql`'s schema)."""
    return {"tools": export_tools("mcp", data_sources=data_sources)}


def local_runner(sources: Mapping[str, Source], settings: Settings) -> Runner:
    """Run each call's stages in this process (no Redis); progress: `local_step`."""
    from workers.stage import run_stages

    async def run(call: ToolCall, session_id: str, as_of: str | None = None) -> CallResult | None:
        as_of_ms = None if as_of is None else checked_as_of(as_of)  # checked: `pinned_run`
        await local_step(call.tool_call_id, final=False)
        outcome = await run_stages(
            tool=call.tool,
            tool_call_id=call.tool_call_id,
            arguments=call.arguments,
            session_id=session_id,
            sources=sources,
            settings=settings,
            as_of_ms=as_of_ms,
        )
        await local_step(call.tool_call_id, final=True)
        return CallResult.from_views(outcome.observation, outcome.control)

    return run


def _call_session(ctx: ServerRequestContext[Any], fixed: str | None) -> str:
    """The session of one `tools/call`: `--session`, else one per MCP connection."""
    if fixed is not None:
        return fixed
    request = ctx.request
    if request is not None:  # Streamable HTTP
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

        # Only a handshake-era request reaches a handler with an `Mcp-Session-Id`, and only
        # one the server created (the gate and the SDK's session manager answer 404 to any
        # other). A 2026-07-28 request has no MCP session, whatever header it carries.
        mcp_session_id = request.headers.get(_MCP_SESSION_HEADER)
        if mcp_session_id and ctx.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
            return session_from_mcp(mcp_session_id)
        return connection_session()  # a sessionless request is a connection of its own
    named = ctx.lifespan_context.get("session")  # stdio: named when the connection opened
    return str(named) if named else connection_session()


def _session_persists(ctx: ServerRequestContext[Any], fixed: str | None) -> bool:
    """Whether the next call of this host lands in the same session (so a repeat of a pending
    call gets its result): stdio, `--session`, a handshake-era HTTP session; not a 2026-07-28
    request, which is a session of its own."""
    if fixed is not None or ctx.request is None:
        return True
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    has_session = bool(ctx.request.headers.get(_MCP_SESSION_HEADER))
    return has_session and ctx.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS


@contextlib.asynccontextmanager
async def _per_connection(_server: Any) -> AsyncIterator[dict[str, str]]:
    # Entered once per connection by `Server.run` (stdio, in-memory).
    session = connection_session()
    log.info("connection opened; its calls are in session %s", session)
    yield {"session": session}


@contextlib.asynccontextmanager
async def _per_app(_server: Any) -> AsyncIterator[dict[str, str]]:
    # Over HTTP the lifespan is entered once for the whole app; every request names its
    # session from its own MCP session (`_call_session`), never from here.
    yield {}


def build_server(
    runner: Runner,
    session: str | None = None,
    *,
    http: bool = False,
    data_sources: Sequence[str] = (),
    as_of: str | None = None,
) -> Server[Any]:
    """The MCP server (low-level `mcp.server.lowlevel.Server`) answering with `runner`,
    every call in `session`, or (None) in a session per MCP connection; `http` when it
    will serve Streamable HTTP rather than `Server.run` connections; `data_sources`: the
    configured logical MySQL names its `query_mysql` definition lists."""
    import mcp.types as types
    from mcp.server.lowlevel import Server

    listed = types.ListToolsResult.model_validate(list_tools_result(data_sources))

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        return listed.model_copy(deep=True)

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        call = read_call(params.name, params.arguments, params.meta, ctx.request_id)
        with reporting(ctx, params.meta):  # issue 32: `_meta.progressToken` honoured
            result = await pinned_run(runner, call, _call_session(ctx, session), params.meta, as_of)
        message = MCP_PENDING_MESSAGE if _session_persists(ctx, session) else PENDING_MESSAGE
        return types.CallToolResult.model_validate(call_tool_result(call, result, message))

    try:
        version = metadata.version("aci-evidence")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a checkout
        version = "0.0.0"
    return Server(
        "aci-evidence",
        version=version,
        lifespan=_per_app if http else _per_connection,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


async def serve(options: ServeOptions, settings: Settings) -> int:
    """Serve over stdio until the client closes the connection, or over Streamable HTTP
    (`options.http_port`) until interrupted."""
    try:
        from mcp.server.stdio import stdio_server
    except ImportError:
        print("aci-evidence mcp needs the MCP SDK: pip install mcp", file=sys.stderr)
        return 2
    if options.token is None and os.environ.get(TOKEN_ENV):
        options = msgspec.structs.replace(options, token=os.environ[TOKEN_ENV])
    problem = check_options(options) or mode_problem(options, settings)
    if problem is None and options.http_port is not None:
        busy = listen_problem(options.host, options.http_port)
        problem = None if busy is None else f"--http: {busy}"
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    local = options.local
    from workers.sources.mysql.source import data_source_names

    data_sources = data_source_names(os.environ)  # the names query_mysql's schema lists
    async with contextlib.AsyncExitStack() as stack:
        if local:
            from workers.sources import open_sources, warm_up

            sources = await stack.enter_async_context(open_sources())
            if "lookup_knowledge" in sources:
                # The runbook index is built as the server starts, as a worker's warm-up: its
                # first build (11-34 s for a few hundred runbooks) would otherwise run inside
                # the first lookup's deadline and answer TIMEOUT.
                warming = await stack.enter_async_context(anyio.create_task_group())
                stack.callback(warming.cancel_scope.cancel)
                knowledge = {"lookup_knowledge": sources["lookup_knowledge"]}
                warming.start_soon(warm_up, knowledge)
            runner = local_runner(sources, settings)
            log.info("stages run in-process")
        else:
            client = await stack.enter_async_context(EvidenceClient.connect(settings))
            background = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(background.cancel_scope.cancel)  # on the way out: before its exit
            runner = queue_runner(client, options.timeout, background)
            log.info("calls go through the queue")
        http = options.http_port is not None
        server = build_server(
            runner, options.session, http=http, data_sources=data_sources, as_of=options.as_of
        )
        if not local:  # issue 32: queued calls as MCP tasks (`hosts.mcp_tasks`)
            handles = TaskHandles.from_env()
            ttl_ms = settings.retention_s * 1000
            enable_tasks(server, client, handles, ttl_ms=ttl_ms, session=options.session)
        if options.http_port is not None:
            await serve_http(server, options)
            return 0
        await _serve_stdio(server, stdio_server)
    return 0


async def _serve_stdio(server: Server[Any], stdio_server: Any) -> None:
    # Until the host closes the connection, or Ctrl-C / SIGTERM. A host that died with a
    # request in flight leaves its answer a broken pipe: ended quietly too (it was a traceback
    # and exit 1 in the host's log). A line that is no MCP message is answered (`mcp_stdio`).
    try:
        async with stdio_server() as (read_stream, write_stream), anyio.create_task_group() as tg:
            await tg.start(_cancel_on_signal, tg.cancel_scope)
            answering = AnsweringReadStream(read_stream, write_stream)
            await server.run(answering, write_stream, server.create_initialization_options())
            tg.cancel_scope.cancel()
    except* (BrokenPipeError, ConnectionResetError):
        log.info("the host closed the connection before an answer was written")


async def _cancel_on_signal(
    scope: anyio.CancelScope, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    # Ctrl-C or SIGTERM ends the stdio server quietly (no KeyboardInterrupt traceback).
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for _ in signals:
            scope.cancel()
            return
