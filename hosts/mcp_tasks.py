"""MCP tasks (`io.modelcontextprotocol/tasks`, SEP-2663, 2026-07-28) over the queue (issue 32).

A queued call is already a durable, idempotent handle: keyed by (session, tool call id) in
Redis, created once admission recorded it. So a task needs no state of its own:

- `server/discover` advertises the extension (`Server.extensions`);
- a `tools/call` whose request declares the extension (its `_meta` client capabilities) and
  that is not final within `TASK_WAIT_S` becomes a task — only once its call is admitted
  (`EvidenceClient.admitted`: a `tasks/get` for it then resolves on any server instance):
  `{resultType: "task", taskId, status: "working", createdAt, lastUpdatedAt, ttlMs,
  pollIntervalMs}`. A request that does not declare it is answered as before;
- `taskId` is an opaque handle: the call's session and id, signed (HMAC-SHA256) with the
  instances' shared key (`ACI_MCP_TASK_KEY`; without it, a key of this process: then only
  this instance answers; never the bearer token, which clients hold). It is never the JSON-RPC
  request id, cannot be guessed or forged for another session's call, and needs no key in
  Redis;
- `tasks/get` reads the call (PROJECTING → `working` with its stage as `statusMessage`; READY
  or ERROR → `completed` with the `tools/call` result inlined, `isError` as for a direct call;
  ERROR/CANCELLED → `cancelled`); `tasks/cancel` sends the call's cancel (`EvidenceClient.
  cancel`) and acks at once (cooperative: the call may still complete first); `tasks/update`
  is refused (`-32602`: no input is ever required); an unknown, expired or forged id is
  `-32602`; a `tasks/*` request that does not declare the extension is `-32021`, one whose
  `Mcp-Name` header is not its `taskId` (SEP-2243) `-32020`;
- `required`: tools whose calls must be tasks (none in production; the conformance fixture
  declares one): a `tools/call` of one without the extension is `-32021`.
"""

from __future__ import annotations

import base64
import contextvars
import hashlib
import hmac
import json
import os
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from pydantic import Field

from hosts.turn import is_error, model_object, model_text
from pipeline.cancel import Progress, Stage
from pipeline.client import EvidenceClient, ToolCall
from pipeline.keys import is_valid_session_id

__all__ = ["TASKS_EXTENSION", "TASK_KEY_ENV", "TaskHandles", "enable_tasks", "task_wait"]

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
TASK_KEY_ENV: Final = "ACI_MCP_TASK_KEY"
TASK_WAIT_S: Final = 1.0  # a call not final this long becomes a task
_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
_POLL_MS: Final = 500
_INVALID_PARAMS: Final = -32602
_MISSING_CAPABILITY: Final = -32021
_HEADER_MISMATCH: Final = -32020
# Set while a task-capable `tools/call` is served: the queue runner waits `TASK_WAIT_S` at
# most, and notes the session it ran the call in.
_SERVING: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "aci_task_call", default=None
)


def task_wait(timeout: float, session_id: str) -> float:
    """The queue runner's wait for a call in `session_id`: `timeout`, or, serving a request
    that may become a task, the short wait before it does."""
    serving = _SERVING.get()
    if serving is None:
        return timeout
    serving["session"] = session_id
    return min(timeout, TASK_WAIT_S)


def declares_tasks(meta: Mapping[str, Any] | None) -> bool:
    """Whether a request's `_meta` client capabilities declare the tasks extension."""
    caps = meta.get(_CAPABILITIES) if isinstance(meta, Mapping) else None
    extensions = caps.get("extensions") if isinstance(caps, Mapping) else None
    return isinstance(extensions, Mapping) and TASKS_EXTENSION in extensions


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TaskHandles:
    """Task ids: a call's (session, tool call id), signed; see the module docstring."""

    def __init__(self, key: bytes) -> None:
        self._key = hashlib.sha256(b"aci-evidence task ids\0" + key).digest()

    @classmethod
    def from_env(cls) -> TaskHandles:
        """Signed with `ACI_MCP_TASK_KEY`, else with a key of this process. Never with the
        HTTP bearer token: every client holds it, and could sign a task id for any call."""
        secret = os.environ.get(TASK_KEY_ENV)
        return cls(secret.encode() if secret else os.urandom(32))

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()[:18]

    def encode(self, session_id: str, tool_call_id: str) -> str:
        payload = json.dumps([session_id, tool_call_id], separators=(",", ":")).encode()
        return f"v1.{_b64(payload)}.{_b64(self._mac(payload))}"

    def decode(self, task_id: object) -> tuple[str, str] | None:
        """(session, tool call id) of a task id this key signed, else None."""
        if not isinstance(task_id, str) or len(task_id) > 1024 or task_id.count(".") != 2:
            return None
        version, body, mac = task_id.split(".")
        try:
            payload, signature = _unb64(body), _unb64(mac)
            if version != "v1" or not hmac.compare_digest(signature, self._mac(payload)):
                return None
            session, tool_call_id = json.loads(payload)
        except (ValueError, TypeError):
            return None
        if not is_valid_session_id(session) or not isinstance(tool_call_id, str):
            return None
        return session, tool_call_id


def _iso(ms: float) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def _error(code: int, message: str, data: Any = None) -> Exception:
    from mcp.shared.exceptions import MCPError

    return MCPError(code=code, message=message, data=data)


def _missing_extension() -> Exception:
    required: dict[str, Any] = {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}
    return _error(_MISSING_CAPABILITY, "this method needs the tasks extension", required)


def _name_mismatch(ctx: Any, task_id: str) -> bool:
    """Whether an HTTP request's `Mcp-Name` header names another task than its body."""
    from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value

    request = getattr(ctx, "request", None)
    sent = request.headers.get(MCP_NAME_HEADER) if request is not None else None
    return sent is not None and decode_header_value(sent) != task_id


def enable_tasks(
    server: Any,
    client: EvidenceClient,
    handles: TaskHandles,
    *,
    ttl_ms: int,
    session: str | None = None,
    required: frozenset[str] = frozenset(),
) -> None:
    """Serve the tasks extension on `server` (built by `build_server` with a queue runner on
    `client`); `session`: the server's fixed `--session`, whose calls alone its tasks name;
    `required`: the tools a client must call as tasks (see the module docstring)."""
    from mcp_types import RequestParams

    class TaskParams(RequestParams):
        task_id: str = Field(default="", alias="taskId")

    server.extensions[TASKS_EXTENSION] = {}
    plain = server.get_request_handler("tools/call")

    def named(ctx: Any, params: Any) -> tuple[str, str]:
        if not declares_tasks(params.meta):
            raise _missing_extension()
        if _name_mismatch(ctx, params.task_id):
            raise _error(_HEADER_MISMATCH, "the Mcp-Name header does not name this task")
        found = handles.decode(params.task_id)
        if found is None or (session is not None and found[0] != session):
            raise _error(_INVALID_PARAMS, "unknown or expired task")
        return found

    def task(task_id: str, status: str, step: Progress, **more: Any) -> dict[str, Any]:
        # Created when admission recorded the call; last updated when it entered its stage
        # (taken by a worker, finished): the same on every instance and every poll.
        created = step.submitted_ms or time.time() * 1000
        return {
            "taskId": task_id,
            "status": status,
            "createdAt": _iso(created),
            "lastUpdatedAt": _iso(max(created, step.since_ms)),
            "ttlMs": ttl_ms,
            "pollIntervalMs": _POLL_MS,
            **more,
        }

    async def on_call_tool(ctx: Any, params: Any) -> Any:
        if not declares_tasks(params.meta):
            if params.name in required:
                raise _missing_extension()
            return await plain.handler(ctx, params)
        serving: dict[str, str] = {}
        reset = _SERVING.set(serving)
        try:
            result = await plain.handler(ctx, params)
        finally:
            _SERVING.reset(reset)
        structured = getattr(result, "structured_content", None) or {}
        where = serving.get("session")
        if structured.get("pending") is not True or where is None:
            return result  # final within the short wait: the result itself
        from hosts.mcp_server import read_call  # (mcp_server imports this module)

        call = read_call(params.name, params.arguments, params.meta, ctx.request_id)
        assert isinstance(call.tool_call_id, str)
        if not await client.admitted(where, [call.tool_call_id], 10.0):
            return result  # not admitted (no worker): the pending answer, as without tasks
        task_id = handles.encode(where, call.tool_call_id)
        step = await client.progress(where, call.tool_call_id)
        return {"resultType": "task", **task(task_id, "working", step)}

    async def on_get(ctx: Any, params: TaskParams) -> dict[str, Any]:
        where, tool_call_id = named(ctx, params)
        step = await client.progress(where, tool_call_id)
        if step.stage is Stage.QUEUED:
            raise _error(_INVALID_PARAMS, "unknown or expired task")
        if step.stage is not Stage.FINAL:
            return task(params.task_id, "working", step, statusMessage=_said(step))
        final = await client.result(where, tool_call_id)
        if final is None:
            raise _error(_INVALID_PARAMS, "unknown or expired task")
        call = ToolCall(tool="", tool_call_id=tool_call_id, arguments={})
        observation = model_object(call, final)
        if is_error(final) and _code(observation) == "CANCELLED":  # (with or without `cx`)
            return task(params.task_id, "cancelled", step, statusMessage="cancelled")
        inlined = {
            "content": [{"type": "text", "text": model_text(call, final)}],
            "structuredContent": observation,
            "isError": is_error(final),
        }
        return task(params.task_id, "completed", step, result=inlined)

    async def on_cancel(ctx: Any, params: TaskParams) -> dict[str, Any]:
        where, tool_call_id = named(ctx, params)
        await client.cancel(where, tool_call_id)
        return {}

    async def on_update(ctx: Any, params: TaskParams) -> dict[str, Any]:
        named(ctx, params)
        raise _error(_INVALID_PARAMS, "this task never needs input")

    server.add_request_handler("tools/call", plain.params_type, on_call_tool)
    server.add_request_handler("tasks/get", TaskParams, on_get)
    server.add_request_handler("tasks/cancel", TaskParams, on_cancel)
    server.add_request_handler("tasks/update", TaskParams, on_update)


def _code(observation: Mapping[str, Any]) -> object:
    # The error code of a Model Observation (CANCELLED ends a task "cancelled").
    error = observation.get("error")
    return error.get("code") if isinstance(error, Mapping) else None


def _said(step: Any) -> str:
    if step.stage is Stage.RUNNING:
        return f"running (attempt {step.attempt})"
    return str(step.stage.value)
