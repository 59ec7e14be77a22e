"""The `aci-evidence` command line.

aci-evidence tools --format openai|responses|anthropic|mcp|schema
aci-evidence call TOOL --id ID --args JSON|@FILE|- [--session S] [--local]
aci-evidence cancel --session S --id ID [--timeout SEC]   (Ctrl-C on `call` cancels too)
aci-evidence submit --file F.jsonl --session S [--wait] [--timeout SEC]
aci-evidence views --session S --view model|control [--follow]
aci-evidence status [--json] [--watch]
aci-evidence worker [--concurrency N] [--partitions 0,3,5]
aci-evidence demo [--scenario NAME] [--json] [--keep-running]
aci-evidence acl [--prefix P] [--redis-major N] [--redis-minor N] [--aclfile | --template]
aci-evidence mcp | console | replay | export | import | bench   (`aci-evidence CMD --help`)

Global flags (`--log-level`, `--log-json`) go before or after the subcommand; `--version`.
The parser is `app.parser`, the commands `app.commands`, and every failure passes through the
one handler of `app.errors` (one line on stderr, an exit code that tells what happened).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

# Nothing heavy at import time: Ctrl-C is owned first thing in `main` (`app.interrupt`), so a
# Ctrl-C while the rest is imported (a second or more on a loaded machine) is an exit 130 too.
from app.interrupt import EXIT_ABORTED, CtrlC, ctrl_c

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

    from pipeline.settings import Settings

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    from app.parser import build_parser

    return build_parser()


async def _armed(ctrl: CtrlC, args: argparse.Namespace, settings: Settings) -> int:
    from app.commands import COMMANDS

    ctrl.arm()  # from here the first Ctrl-C cancels this task: the command unwinds
    try:
        return await COMMANDS[args.command](args, settings)
    finally:
        ctrl.disarm()


def _run(args: argparse.Namespace, settings: list[Settings], ctrl: CtrlC) -> int:
    import os

    import anyio

    from app.errors import EXIT_OK
    from app.parser import LOG_LEVELS
    from pipeline.settings import Settings, SettingsError

    level = str(args.log_level).upper()
    if level not in LOG_LEVELS:
        choices = ", ".join(LOG_LEVELS)
        raise SettingsError(f"--log-level (or ACI_LOG_LEVEL) must be one of {choices}")
    if os.environ.get("ACI_LOG_JSON", "").strip() not in ("", "0", "1"):  # `true` meant text
        raise SettingsError("ACI_LOG_JSON must be 0 or 1")
    from workers.logging_setup import configure_logging

    # Every command logs through the safe formatters: no tracebacks, no upstream addresses.
    configure_logging(level, json_lines=args.log_json)
    if args.command == "tools":
        from app.commands.calls import print_json
        from contracts import export_tools
        from workers.sources.mysql.source import data_source_names  # query_mysql's enum

        print_json(export_tools(args.format, data_sources=data_source_names(os.environ)))
        return EXIT_OK
    if args.command == "check":
        from app.commands.check import cmd_check

        return cmd_check(as_json=args.json)
    settings.append(Settings.from_env())
    try:
        code = anyio.run(_armed, ctrl, args, settings[0])
    except BaseException:
        if not ctrl.presses:
            raise
        code = EXIT_OK
    # The first Ctrl-C cancelled the main task: whatever that ended with (the cancellation, a
    # Redis the same Ctrl-C stopped), what ended the run is that Ctrl-C.
    if ctrl.presses:
        raise KeyboardInterrupt
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `aci-evidence` console script: the exit code (see `app.errors`)."""
    with ctrl_c() as ctrl:
        try:
            from app.errors import guarded, role_needed

            args = _parser().parse_args(argv)
            settings: list[Settings] = []  # known once read: the error handler names its endpoint
            return guarded(
                lambda: _run(args, settings, ctrl),
                lambda: settings[0].redis_url if settings else None,
                lambda: role_needed(args.command, bool(getattr(args, "into", None))),
            )
        except KeyboardInterrupt:  # before the error handler was there (still importing)
            return EXIT_ABORTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
