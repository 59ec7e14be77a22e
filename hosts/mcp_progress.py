"""MCP progress for a queued call (issue 32): a `tools/call` whose `_meta` carries a
`progressToken` hears `notifications/progress` as its call moves queued → admitted → running
(attempt k) → final, `progress` strictly increasing (`pipeline.cancel.Progress.step`), each
with a short message. A call without a token is served exactly as before (nothing is read).

`reporting(ctx, meta)` wraps the handler's run; the queue runner picks the reporter up with
`current()` and hands it to `EvidenceClient.call(on_progress=...)`. The local runner
(`--local`) has no queue: it reports running (attempt 1) when its stages start, then final.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from pipeline.cancel import Progress, Stage
from pipeline.client_cancel import ProgressCallback

__all__ = ["current", "local_step", "message_of", "progress_token", "reporting"]

log = logging.getLogger("aci.mcp")
_REPORTER: contextvars.ContextVar[ProgressCallback | None] = contextvars.ContextVar(
    "aci_mcp_progress", default=None
)


def progress_token(meta: Mapping[str, Any] | None) -> str | int | None:
    """The request's `_meta.progressToken` (a string or an integer, never a bool), or None."""
    if not isinstance(meta, Mapping):
        return None
    # The SDK hands `_meta` over with its Python field name (`progress_token`).
    token = meta.get("progress_token", meta.get("progressToken"))
    if isinstance(token, bool) or not isinstance(token, str | int):
        return None
    return token


def message_of(step: Progress) -> str:
    """The progress notification's message for a stage."""
    if step.stage is Stage.RUNNING:
        return f"running (attempt {step.attempt})"
    if step.stage is Stage.FINAL and step.cancelled:
        return "final (cancelled)"
    return step.stage.value


@contextlib.contextmanager
def reporting(ctx: Any, meta: Mapping[str, Any] | None) -> Iterator[None]:
    """Within: the queue runner reports this request's progress through `ctx.session`, when
    the request asked for it (a progress token)."""
    if progress_token(meta) is None:
        yield
        return

    async def report(_tool_call_id: str, step: Progress) -> None:
        try:
            await ctx.session.report_progress(float(step.step), None, message_of(step))
        except Exception as exc:  # a closed stream must not fail the call
            log.debug("progress not sent: %s", type(exc).__name__)

    reset = _REPORTER.set(report)
    try:
        yield
    finally:
        _REPORTER.reset(reset)


def current() -> ProgressCallback | None:
    """The reporter of the request being served, or None (no token, or not in a request)."""
    return _REPORTER.get()


async def local_step(tool_call_id: str | None, *, final: bool) -> None:
    """`--local` (no queue): report running (attempt 1) when the stages start, final when
    they end, to a request that asked for progress (nothing otherwise)."""
    report = current()
    if report is not None:
        step = Progress(Stage.FINAL if final else Stage.RUNNING, attempt=1)
        heard = report(tool_call_id or "", step)
        if inspect.isawaitable(heard):
            await heard
