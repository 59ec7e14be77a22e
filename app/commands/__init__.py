"""The `aci-evidence` subcommands, one short coroutine each, by name: `calls` puts tool calls
through the queue (`call`, `submit`, `views`), `operate` runs and inspects the system."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable

from app.commands.calls import cmd_call, cmd_submit, cmd_views
from app.commands.cancel import cmd_cancel
from app.commands.operate import (
    cmd_acl,
    cmd_bench,
    cmd_demo,
    cmd_export,
    cmd_import,
    cmd_mcp,
    cmd_reindex,
    cmd_replay,
    cmd_status,
    cmd_worker,
)
from app.console.serve import run_console
from pipeline.settings import Settings

__all__ = ["COMMANDS", "Command"]

Command = Callable[[argparse.Namespace, Settings], Awaitable[int]]

COMMANDS: dict[str, Command] = {
    "call": cmd_call,
    "cancel": cmd_cancel,
    "submit": cmd_submit,
    "views": cmd_views,
    "status": cmd_status,
    "worker": cmd_worker,
    "demo": cmd_demo,
    "acl": cmd_acl,
    "bench": cmd_bench,
    "mcp": cmd_mcp,
    "replay": cmd_replay,
    "export": cmd_export,
    "import": cmd_import,
    "reindex": cmd_reindex,
    "console": run_console,
}
