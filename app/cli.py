"""The `aci-evidence` command line.

aci-evidence tools --format openai|responses|anthropic|mcp|schema
aci-evidence call TOOL --id ID --args JSON|@FILE|- [--session S] [--local]
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

import argparse
import os
import sys
from collections.abc import Sequence

import anyio

from app.commands import COMMANDS
from app.errors import EXIT_OK, guarded
from app.parser import LOG_LEVELS, build_parser
from contracts import export_tools
from pipeline.settings import Settings, SettingsError

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    return build_parser()


def _run(args: argparse.Namespace, settings: list[Settings]) -> int:
    level = str(args.log_level).upper()
    if level not in LOG_LEVELS:
        choices = ", ".join(LOG_LEVELS)
        raise SettingsError(f"--log-level (or ACI_LOG_LEVEL) must be one of {choices}")
    from workers.logging_setup import configure_logging

    # Every command logs through the safe formatters: no tracebacks, no upstream addresses.
    configure_logging(level, json_lines=args.log_json)
    if args.command == "tools":
        from app.commands.calls import print_json
        from workers.sources.mysql.source import data_source_names  # query_mysql's enum

        print_json(export_tools(args.format, data_sources=data_source_names(os.environ)))
        return EXIT_OK
    settings.append(Settings.from_env())
    return anyio.run(COMMANDS[args.command], args, settings[0])


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `aci-evidence` console script: the exit code (see `app.errors`)."""
    args = build_parser().parse_args(argv)
    settings: list[Settings] = []  # known once read: the error handler names its endpoint
    return guarded(
        lambda: _run(args, settings), lambda: settings[0].redis_url if settings else None
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
