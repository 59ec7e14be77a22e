"""`aci-evidence cancel --session S --id ID`: cancel one call (issue 32).

Exit 0 once the call is final: cancelled now (ERROR/CANCELLED), or final already (a call that
finished before its cancel keeps its result, printed as `call` prints it); 1 when there is no
such call to cancel (never submitted, or not admitted within `--timeout`); 3 when it is not
final within `--timeout` (no worker admits requests: the cancel stays queued).
"""

from __future__ import annotations

import argparse
import sys
from typing import Final

import anyio

from app.commands.calls import need_url
from app.errors import EXIT_ERROR, EXIT_OK, EXIT_PENDING
from app.terminal import safe_json
from pipeline.client import EvidenceClient, InvalidSessionId
from pipeline.keys import is_valid_session_id
from pipeline.settings import Settings

__all__ = ["cmd_cancel"]

_AGAIN_S: Final = 1.0  # a cancel not seen final this long is sent again (idempotent)


async def cmd_cancel(args: argparse.Namespace, settings: Settings) -> int:
    """`cancel`: send the call's cancel and wait until it is final."""
    session, tool_call_id, timeout = args.session, args.id, float(args.timeout)
    if not is_valid_session_id(session):
        raise InvalidSessionId(session)
    async with EvidenceClient.connect(settings, need_url(settings)) as client:
        started = anyio.current_time()
        # Its call record names the envelope to cancel: wait for it when another process
        # submitted the call and it is not admitted yet.
        await client.admitted(session, [tool_call_id], timeout)
        if not await client.cancel(session, tool_call_id):
            print(f"no call {tool_call_id!r} in session {session!r} to cancel (not submitted, "
                  f"or not admitted within {timeout:g} s)", file=sys.stderr)  # fmt: skip
            return EXIT_ERROR
        with anyio.move_on_after(max(1.0, timeout - (anyio.current_time() - started))):
            while True:
                found = await client.wait(session, [tool_call_id], _AGAIN_S)
                if tool_call_id in found:
                    sys.stdout.write(safe_json(found[tool_call_id].as_json().decode()) + "\n")
                    return EXIT_OK
                await client.cancel(session, tool_call_id)
        print(f"the call was not final within {timeout:g} s; its cancel stays queued",
              file=sys.stderr)  # fmt: skip
        return EXIT_PENDING
