"""The queue runner of `aci-evidence mcp` (ACI_REDIS_URL set): each call submitted to the
queue and awaited, answered in time whatever the queue does.

- still running at the wait (`--timeout`, or a would-be task's): pending (`None`), and the same
  call made again gets its result (`mcp_pending.PendingCalls`);
- Redis down, refusing or misconfigured: the call's ERROR/UNAVAILABLE, said for what it is (a
  refused password: calling again will not help) and logged with the operator's fix, never the
  URL;
- Redis connected but silent: ERROR/UNAVAILABLE `ANSWER_GRACE_S` after the wait, when the
  server gives its runner a task group (`serve` does), instead of after the driver's timeouts.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final

import anyio
import anyio.abc

from contracts import ErrorCode, build_error_views
from hosts.mcp_pending import PendingCalls
from hosts.mcp_progress import current as progress_reporter
from hosts.mcp_tasks import task_wait
from pipeline.client import CallResult, EvidenceClient, ToolCall
from pipeline.redis_io import PipelineError, is_credentials_refusal, refusal_hint
from pipeline.settings import Settings, SettingsError

__all__ = ["ANSWER_GRACE_S", "queue_runner"]

log = logging.getLogger("aci.mcp")


def _as_call_result(
    call: ToolCall, code: ErrorCode, message: str, session_id: str, settings: Settings
) -> CallResult:
    _, observation, control = build_error_views(
        code,
        message,
        call.tool_call_id,
        tool=call.tool,
        session_id=session_id,
        bounds=settings.bounds,
    )
    return CallResult.from_views(observation, control)


_UNAVAILABLE_MESSAGE: Final = "the evidence queue is unavailable; try again later"
# Wrong credentials or rights: the model must not spend its turns calling again.
_REFUSED_MESSAGE: Final = (
    "the evidence queue refused this server's access; calling again will not help until an "
    "operator fixes the server's configuration"
)


# Past the wait (`--timeout`, or a would-be task's), a call whose queue has not answered is
# answered ERROR/UNAVAILABLE, before hosts give up (the Agents SDK at 5 s, `--timeout` 4).
ANSWER_GRACE_S: Final = 0.5
_NO_ANSWER_MESSAGE: Final = "the evidence queue did not answer in time; try again later"


def queue_runner(
    client: EvidenceClient, timeout: float, background: anyio.abc.TaskGroup | None = None
) -> Callable[..., Awaitable[CallResult | None]]:
    """Submit each call to the queue and await it (None while still running at `timeout`); the
    same call made again while it is pending gets its result (`mcp_pending.PendingCalls`).

    With `background` (the server's task group) each call runs there, and one whose queue does
    not answer within its wait and `ANSWER_GRACE_S` (a Redis that accepts connections but does
    not reply holds a submit for the driver's timeouts, 10 s and more) is answered
    ERROR/UNAVAILABLE at once and cancelled: a host is never left past its own timeout."""
    pending = PendingCalls(client)

    async def attempt(call: ToolCall, session_id: str, as_of: str | None) -> CallResult | None:
        try:
            # Cancelled (`notifications/cancelled`, a closed 2026-07-28 response stream): the
            # call is cancelled too (`cancel_on_exit`); progress reported when asked.
            wait = task_wait(timeout, session_id)  # shorter for a would-be MCP task
            return await pending.call(
                session_id, call, wait, on_progress=progress_reporter(), as_of=as_of
            )
        except PipelineError as exc:
            # The typed errors' texts are codes and fixed sentences, never a URL or password.
            hint = refusal_hint(exc)
            log.warning("the queue failed: %s: %s%s", type(exc).__name__, exc,
                        f" from Redis at ACI_REDIS_URL: {hint}" if hint else "")  # fmt: skip
            message = _REFUSED_MESSAGE if is_credentials_refusal(exc) else _UNAVAILABLE_MESSAGE
            settings = client.settings
            return _as_call_result(call, ErrorCode.UNAVAILABLE, message, session_id, settings)
        except SettingsError as exc:  # this server's settings are not the workers' (one line)
            log.error("configuration error: %s", exc)
            message = f"the evidence queue is unavailable: configuration error: {exc}"
            settings = client.settings
            return _as_call_result(call, ErrorCode.UNAVAILABLE, message, session_id, settings)

    async def run(call: ToolCall, session_id: str, as_of: str | None = None) -> CallResult | None:
        if background is None:
            return await attempt(call, session_id, as_of)
        answered: list[CallResult | None] = []
        failed: list[Exception] = []
        done = anyio.Event()
        scope = anyio.CancelScope()

        async def body() -> None:
            # The handler's context goes along (its progress reporter, a would-be task).
            with scope:
                try:
                    answered.append(await attempt(call, session_id, as_of))
                except Exception as exc:  # a bug fails its request, not the server's group
                    failed.append(exc)
            done.set()

        deadline = task_wait(timeout, session_id) + ANSWER_GRACE_S
        background.start_soon(body)
        try:
            with anyio.move_on_after(deadline):
                await done.wait()
        finally:
            if not answered:  # cancelled by the host, or no answer in time: the call goes too
                scope.cancel()
        if failed:
            raise failed[0]
        if answered:
            return answered[0]
        log.warning("the queue did not answer within %.1f s", deadline)
        settings = client.settings
        message = _NO_ANSWER_MESSAGE
        return _as_call_result(call, ErrorCode.UNAVAILABLE, message, session_id, settings)

    return run
