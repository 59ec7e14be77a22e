"""MCP calls that outlive the host's patience: answered pending in time, their result handed
to the same call made again.

Hosts give up on a tool call after a few seconds (the OpenAI Agents SDK's MCP client after 5 s)
and tell the model "An error occurred while running the tool. Please try again." So the server
answers a call still running after `--timeout` (default `DEFAULT_WAIT_S`, below those 5 s)
with the pending observation, and says what is true here: calling the tool again with exactly
the same arguments in the same MCP session returns that call's result when it is ready, and
does not run the query again (`PendingCalls`). A call made again after its result was
delivered is a new query, as before.

Only where the MCP session persists between calls (stdio, handshake-era HTTP, `--session`);
a 2026-07-28 HTTP request is a session of its own, so its pending answer keeps the general
message (`hosts.turn.PENDING_MESSAGE`).
"""

from __future__ import annotations

import collections
import json
from typing import Any, Final

from pipeline.cancel import Stage
from pipeline.client import CallResult, EvidenceClient, ToolCall

__all__ = ["DEFAULT_WAIT_S", "MCP_PENDING_MESSAGE", "PendingCalls", "repeat_key"]

DEFAULT_WAIT_S: Final = 4.0  # below the Agents SDK's 5 s client timeout
MCP_PENDING_MESSAGE: Final = (
    "The query is still running and its result did not arrive in time, so it is not "
    "included here. This is not a finding: it says nothing about whether evidence exists. "
    "Call this tool again with exactly the same arguments to get its result when it is "
    "ready; that does not run the query again."
)
_MAX_PENDING: Final = 4096  # remembered pending calls per server process (oldest forgotten)


def repeat_key(session_id: str, call: ToolCall) -> tuple[str, str, str]:
    """What makes a call "the same call again": session, tool and arguments (key order and
    spacing of a JSON text do not matter)."""
    arguments = call.arguments
    if isinstance(arguments, str | bytes):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return session_id, str(call.tool), repr(call.arguments)
    try:
        canon = json.dumps(arguments, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        canon = repr(arguments)
    return session_id, str(call.tool), canon


class PendingCalls:
    """The pending calls of this server process, by `repeat_key`: a call made again while
    (or after) its first is pending waits for the first one's result instead of running."""

    def __init__(self, client: EvidenceClient) -> None:
        self._client = client
        self._pending: collections.OrderedDict[tuple[str, str, str], str] = (
            collections.OrderedDict()
        )

    async def call(
        self, session_id: str, call: ToolCall, timeout: float, **options: Any
    ) -> CallResult | None:
        """The call's result within `timeout`, or None (pending: remembered for a repeat);
        `options` go to `EvidenceClient.call` (`on_progress`, `cancel_on_exit`)."""
        # A repeat at another incident time is another call (`as_of`: hosts.mcp_time).
        key = repeat_key(session_id, call)
        if options.get("as_of") is not None:
            key = (key[0], key[1], f"{key[2]}@{options['as_of']}")
        earlier = self._pending.get(key)
        if earlier is not None and await self._lost(session_id, earlier):
            # No record of it and no request of it waiting (Redis lost its data): waiting for
            # it would answer pending for ever. This call runs as itself instead.
            self._pending.pop(key, None)
            earlier = None
        if earlier is not None:
            found = await self._client.wait(session_id, [earlier], timeout)
            if earlier in found:
                self._pending.pop(key, None)
                return found[earlier]
            return None
        result = await self._client.call(session_id, call, timeout, **options)
        if result is None and isinstance(call.tool_call_id, str):
            self._pending[key] = call.tool_call_id
            while len(self._pending) > _MAX_PENDING:
                self._pending.popitem(last=False)
        return result

    async def _lost(self, session_id: str, tool_call_id: str) -> bool:
        """Whether a call answered pending is known nowhere any more: Redis holds no record of
        it, and it is no request this client still sends until admitted."""
        if (session_id, tool_call_id) in self._client.unadmitted.sent:
            return False  # not admitted yet (no worker reads): it will be
        step = await self._client.progress(session_id, tool_call_id)
        return step.stage is Stage.QUEUED  # QUEUED: no call record
