"""`aci-evidence replay`, `export` and `import`: the commands over `workers.replay`.

    aci-evidence replay --session S [--since T] [--until T] [--tool X] [--status READY|ERROR]
                        [--evidence E] [--id ID] [--file F] [--reexecute | --into S2] [--json]
    aci-evidence export --session S --file F.jsonl
    aci-evidence import --file F.jsonl [--session S2]

The default re-projects (see `workers.replay_diff`); `--reexecute` runs the recorded requests
against today's sources; `--into` re-submits them under a new session with their original tool
call ids, for live workers. Exit 0 when nothing changed or failed, 1 otherwise, 2 on bad input.
With `--json` the last line is the summary object.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import Final

import msgspec

from pipeline.keys import is_valid_session_id
from pipeline.redis_io import open_redis
from pipeline.settings import Settings
from workers.replay import (
    ReplayError,
    Selection,
    export_session,
    import_lines,
    load_file,
    load_redis,
    reinject,
)
from workers.replay_diff import Reporter, reexecute, reproject

__all__ = ["parse_time", "run_export", "run_import", "run_replay", "selection_from"]

_ENCODER: Final = msgspec.json.Encoder()


def parse_time(text: str | None, flag: str) -> int | None:
    """`--since`/`--until`: epoch milliseconds, or ISO 8601 (UTC when no offset is given)."""
    if not text:
        return None
    if text.strip().isdigit():
        return int(text)
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ReplayError(f"{flag}: expected ISO 8601 or epoch ms, got {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def selection_from(args: argparse.Namespace) -> Selection:
    """The selection of the `replay` flags."""
    status = (args.status or "").upper() or None
    evidence = (args.evidence or "").upper() or None
    if status not in (None, "READY", "ERROR", "PROJECTING"):
        raise ReplayError("--status: expected READY or ERROR")
    if evidence not in (None, "EVIDENCE_FOUND", "NO_EVIDENCE", "ERROR"):
        raise ReplayError("--evidence: expected EVIDENCE_FOUND, NO_EVIDENCE or ERROR")
    if args.session is not None and not is_valid_session_id(args.session):
        raise ReplayError("--session: 1-128 letters, digits, '.', '_' or '-'")
    return Selection(
        session=args.session,
        since_ms=parse_time(args.since, "--since"),
        until_ms=parse_time(args.until, "--until"),
        tool=args.tool,
        status=status,
        evidence=evidence,
        tool_call_id=args.id,
    )


def _url(settings: Settings) -> str:
    if not settings.redis_url:
        raise ReplayError("ACI_REDIS_URL is not set")
    return settings.redis_url


async def _replay(args: argparse.Namespace, settings: Settings, reporter: Reporter) -> None:
    selection = selection_from(args)
    if args.into is not None and not is_valid_session_id(args.into):
        raise ReplayError("--into: 1-128 letters, digits, '.', '_' or '-'")
    if args.file:
        records = load_file(args.file, selection)
    else:
        async with open_redis(_url(settings)) as redis:
            records = await load_redis(redis, settings, selection)
    reporter.start(len(records))
    if args.into is not None:
        async with open_redis(_url(settings)) as redis:
            await reinject(redis, settings, records, args.into, reporter)
    elif args.reexecute:
        from workers.sources import open_sources

        async with open_sources() as sources:
            for rec in records:
                reporter.add(await reexecute(rec, settings, sources))
    else:
        for rec in records:
            reporter.add(reproject(rec, settings))


async def run_replay(args: argparse.Namespace, settings: Settings) -> int:
    """`aci-evidence replay`: 0 when nothing changed or failed, 1 otherwise, 2 on bad input."""
    mode = "reinject" if args.into else "reexecute" if args.reexecute else "reproject"
    reporter = Reporter(as_json=args.json, mode=mode)
    try:
        await _replay(args, settings, reporter)
    except ReplayError as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    return reporter.finish()


async def run_export(args: argparse.Namespace, settings: Settings) -> int:
    """`aci-evidence export --session S --file F`."""
    try:
        if not is_valid_session_id(args.session):
            raise ReplayError("--session: 1-128 letters, digits, '.', '_' or '-'")
        async with open_redis(_url(settings)) as redis:
            count = await export_session(redis, settings, args.session, args.file)
    except ReplayError as exc:
        print(f"export: {exc}", file=sys.stderr)
        return 2
    print(_ENCODER.encode({"exported": count, "file": args.file}).decode())
    return 0


async def run_import(args: argparse.Namespace, settings: Settings) -> int:
    """`aci-evidence import --file F [--session S]`."""
    try:
        if args.session is not None and not is_valid_session_id(args.session):
            raise ReplayError("--session: 1-128 letters, digits, '.', '_' or '-'")
        records = load_file(args.file)
        async with open_redis(_url(settings)) as redis:
            counts = await import_lines(redis, settings, records, args.session)
    except ReplayError as exc:
        print(f"import: {exc}", file=sys.stderr)
        return 2
    print(
        _ENCODER.encode(
            {
                "imported": counts["imported"],
                "existing": counts["existing"],
                "unfinished": counts["unfinished"],
            }
        ).decode()
    )
    return 0
