"""The queue runner of `aci-evidence mcp` (ACI_REDIS_URL set): each call submitted to the
queue and awaited, answered in time whatever the queue does.

- still running at the wait (`--timeout`, or a would-be task's): pending (`None`), and the same
  call made again gets its result (`mcp_pending.PendingCalls`);
- Redis down, refusing or misconfigured: the call's ERROR/UNAVAILABLE, said for what it is (a
  refused password: calling again will not help) and logged with the operator's fix, never the
  URL;
- Redis connected but silent: ERROR/UNAVAILABLE `ANSWER_GRACE_S` after the wait, when the
  server gives its runner a task group (`serve` does), instead of after the driver's timeouts;
- pending while no worker beats in the call's partition (none started, or started with another
  ACI_PREFIX than the host passed this server): still pending for the model (a worker that
  starts runs it), and a warning on stderr, the host's MCP log, names the prefix
  (`NoWorkerWarning`): before, every call of such a server was pending and nothing said why.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final

import anyio
import anyio.abc

from contracts import ErrorCode, build_error_views
from hosts.mcp_pending import PendingCalls
from hosts.mcp_progress import current as progress_reporter
from hosts.mcp_tasks import task_wait
from pipeline.client import CallResult, EvidenceClient, ToolCall
from pipeline.heartbeat import heartbeat_ttl_s, live_count
from pipeline.redis_io import (
    PipelineError,
    RedisConfigError,
    is_credentials_refusal,
    refusal_hint,
)
from pipeline.settings import Settings, SettingsError

__all__ = ["ANSWER_GRACE_S", "NoWorkerWarning", "queue_runner"]

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


class NoWorkerWarning:
    """Warns (at most once per `every_s`) when a call is pending and no worker beats in its
    partition: the operator's fix is a worker, or the workers' ACI_PREFIX in the host's `env`."""

    def __init__(self, client: EvidenceClient, every_s: float = 60.0) -> None:
        self._client = client
        self._every_s = every_s
        self._warned_at: float | None = None

    async def check(self, session_id: str) -> None:
        """After a call answered pending: warn if nobody reads its partition."""
        now = time.monotonic()
        if self._warned_at is not None and now - self._warned_at < self._every_s:
            return
        settings = self._client.settings
        part = settings.keys().for_session(session_id)
        try:
            live = await live_count(self._client.redis, part, heartbeat_ttl_s(settings))
        except PipelineError:
            return  # the next call says what failed
        if live:
            return
        self._warned_at = now
        log.warning(
            "a call is pending and no worker reads the queue (ACI_PREFIX %s, partition %d): "
            "calls wait until one starts; start `aci-evidence worker` on this Redis, "
            "or give this server the workers' ACI_PREFIX (and ACI_PARTITIONS) in the host's env",
            settings.prefix, part.index,
        )  # fmt: skip


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
    no_worker = NoWorkerWarning(client)

    async def attempt(call: ToolCall, session_id: str, as_of: str | None) -> CallResult | None:
        try:
            # Cancelled (`notifications/cancelled`, a closed 2026-07-28 response stream): the
            # call is cancelled too (`cancel_on_exit`); progress reported when asked.
            wait = task_wait(timeout, session_id)  # shorter for a would-be MCP task
            result = await pending.call(
                session_id, call, wait, on_progress=progress_reporter(), as_of=as_of
            )
            if result is None and background is not None:  # off the answer's path
                background.start_soon(no_worker.check, session_id)
            elif result is None:
                await no_worker.check(session_id)
            return result
        except PipelineError as exc:
            # The typed errors' texts are codes and fixed sentences, never a URL or password.
            hint = refusal_hint(exc)
            log.warning("the queue failed: %s: %s%s", type(exc).__name__, exc,
                        f" from Redis at ACI_REDIS_URL: {hint}" if hint else "")  # fmt: skip
            # An unusable URL (a cluster URL at a plain Redis) will not heal either.
            refused = is_credentials_refusal(exc) or isinstance(exc, RedisConfigError)
            message = _REFUSED_MESSAGE if refused else _UNAVAILABLE_MESSAGE
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
