"""`aci-evidence replay`, `export` and `import`: the commands over `workers.replay`.

    aci-evidence replay --session S [--since T] [--until T] [--tool X] [--status READY|ERROR]
                        [--evidence E] [--id ID] [--file F] [--reexecute | --into S2] [--json]
    aci-evidence export --session S --file F.jsonl
    aci-evidence import --file F.jsonl [--session S2]

The default re-projects (see `workers.replay_diff`); `--reexecute` runs the recorded requests
against today's sources; `--into` re-submits them under a new session with their original tool
call ids, for live workers. Exit 0 when nothing changed or failed, 1 otherwise (also when
nothing recorded matches the selection, or `export` finds no invocation of the session: no
file is written then), 2 on bad input. Every line printed is escaped (`app.terminal`); errors
are the CLI's lines (`app.errors`): `aci-evidence replay: --status: …` for a flag's value,
`bad input: …` for a session id or a file, `configuration error: …` without ACI_REDIS_URL.
`Reporter` prints each changed or failed verdict as it comes, a progress bar on long replays
(stderr) and the summary: a table, or with `--json` the last line, as one object.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections import Counter
from typing import Any, Final

import anyio
import msgspec

from app.commands.calls import need_url
from app.errors import EXIT_ERROR, CommandError, report
from app.replay_sources import EXIT_SOURCES_DIFFER, SourceCheck
from app.terminal import safe_json, safe_text
from contracts import CONTRACT_VERSION
from pipeline.call import InvalidSessionId
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
from workers.replay_diff import Verdict, reexecute, reproject

__all__ = ["Reporter", "parse_time", "run_export", "run_import", "run_replay", "selection_from"]

_ENCODER: Final = msgspec.json.Encoder()
_COLUMNS: Final = ("replayed", "identical", "changed", "failed", "skipped", "submitted")


class _NothingFound(ReplayError):
    """Nothing recorded matches: not bad input (exit 1, not 2), but not a success either."""


class _BadFlag(ReplayError):
    """A flag's value is refused: said by the command's name, as `worker` says its own."""


def _refused(command: str, exc: ReplayError) -> int:
    """The CLI's one line for a refused `replay`, `export` or `import`; its exit code."""
    if isinstance(exc, _NothingFound):
        return report(CommandError(str(exc), code=EXIT_ERROR, prefix=f"aci-evidence {command}"))
    if isinstance(exc, _BadFlag):
        return report(CommandError(str(exc), prefix=f"aci-evidence {command}"))
    return report(CommandError(str(exc)))  # a file or a line of it: bad input


def _check_session(value: str | None) -> None:
    if value is not None and not is_valid_session_id(value):
        raise ReplayError(str(InvalidSessionId(value)))  # the line `views` and `call` say


class Reporter:
    """Counts verdicts, prints what changed or failed, shows progress on long replays (stderr)
    and ends with a summary (a table, or with `--json` the last line)."""

    def __init__(self, *, as_json: bool, mode: str, progress_from: int = 200) -> None:
        self.as_json = as_json
        self.mode = mode
        self.counts: Counter[str] = Counter()
        self.versions: Counter[int] = Counter()
        self.progress_from = progress_from
        self._progress: Any = None
        self._task: Any = None

    def start(self, total: int) -> None:
        """Announce how many recordings will be replayed."""
        if total < self.progress_from:
            return
        from rich.console import Console
        from rich.progress import Progress

        self._progress = Progress(console=Console(stderr=True), transient=True)
        self._progress.start()
        self._task = self._progress.add_task(f"replay ({self.mode})", total=total)

    def add(self, verdict: Verdict) -> None:
        """Record one verdict; changed and failed ones are printed at once."""
        self.counts[verdict.outcome] += 1
        if verdict.contract_version is not None:
            self.versions[verdict.contract_version] += 1
        if self._progress is not None:
            self._progress.advance(self._task)
        if verdict.outcome in ("changed", "failed"):
            if self.as_json:
                sys.stdout.write(safe_json(_ENCODER.encode(verdict).decode()) + "\n")
            else:
                head = (
                    f"{verdict.outcome}: {verdict.session}/{verdict.tool_call_id} ({verdict.tool})"
                )
                lines = [head + (f": {verdict.reason}" if verdict.reason else "")]
                lines += [f"  {c.render()}" for c in verdict.changes]
                sys.stdout.write("\n".join(safe_text(line) for line in lines) + "\n")

    def summary(self) -> dict[str, Any]:
        """The summary object (the last line with `--json`)."""
        c = self.counts
        out: dict[str, Any] = {
            "replayed": sum(c.values()) - c["skipped"],
            "identical": c["identical"],
            "changed": c["changed"],
            "failed": c["failed"],
            "skipped": c["skipped"],
            "mode": self.mode,
            "contract_version": CONTRACT_VERSION,
        }
        if self.mode == "reinject":
            out["submitted"] = c["submitted"]
        if self.versions:
            out["recorded_contract_versions"] = {
                str(v): n for v, n in sorted(self.versions.items())
            }
        return out

    def finish(self) -> int:
        """Print the summary; the exit code (0 only when nothing changed or failed)."""
        if self._progress is not None:
            self._progress.stop()
        summary = self.summary()
        if self.as_json:
            sys.stdout.write(_ENCODER.encode(summary).decode() + "\n")
        else:
            from rich.console import Console
            from rich.table import Table

            table = Table(title=f"replay ({self.mode})")
            # A re-injection compares nothing: what it did is the `submitted` count.
            names = [n for n in _COLUMNS if n in summary]
            for name in names:
                table.add_column(name, justify="right")
            table.add_row(*(str(summary[n]) for n in names))
            Console().print(table)
            for version, count in self.versions.items():
                if version != CONTRACT_VERSION:
                    print(
                        f"{count} recorded under contract v{version}, this build speaks "
                        f"v{CONTRACT_VERSION}",
                        file=sys.stderr,
                    )
        sys.stdout.flush()
        return 1 if summary["changed"] or summary["failed"] else 0


def parse_time(text: str | None, flag: str) -> int | None:
    """`--since`/`--until`: epoch milliseconds, or ISO 8601 (UTC when no offset is given)."""
    if not text:
        return None
    if text.strip().isdigit():
        return int(text)
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise _BadFlag(f"{flag}: expected ISO 8601 or epoch ms, got {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def selection_from(args: argparse.Namespace) -> Selection:
    """The selection of the `replay` flags."""
    status = (args.status or "").upper() or None
    evidence = (args.evidence or "").upper() or None
    if status not in (None, "READY", "ERROR", "PROJECTING"):
        raise _BadFlag("--status: expected READY or ERROR")
    if evidence not in (None, "EVIDENCE_FOUND", "NO_EVIDENCE", "ERROR"):
        raise _BadFlag("--evidence: expected EVIDENCE_FOUND, NO_EVIDENCE or ERROR")
    _check_session(args.session)
    return Selection(
        session=args.session,
        since_ms=parse_time(args.since, "--since"),
        until_ms=parse_time(args.until, "--until"),
        tool=args.tool,
        status=status,
        evidence=evidence,
        tool_call_id=args.id,
    )


async def _replay(
    args: argparse.Namespace, settings: Settings, reporter: Reporter, check: SourceCheck
) -> None:
    selection = selection_from(args)
    _check_session(args.into)
    if args.file:
        records = load_file(args.file, selection)
    else:
        async with open_redis(need_url(settings), cluster=settings.redis_cluster) as redis:
            records = await load_redis(redis, settings, selection)
    if not records:
        raise _NothingFound("no recorded invocation matches the selection")
    reporter.start(len(records))
    if args.into is not None:
        async with open_redis(need_url(settings), cluster=settings.redis_cluster) as redis:
            await reinject(redis, settings, records, args.into, reporter.add)
    elif args.reexecute:
        from workers.sources import open_sources

        async with open_sources() as sources:
            for rec in records:
                reporter.add(await reexecute(rec, settings, sources))
                check.add(rec, sources)  # what it ran against, against the recording's
    else:
        for rec in records:
            reporter.add(reproject(rec, settings))


async def run_replay(args: argparse.Namespace, settings: Settings) -> int:
    """`aci-evidence replay`: 0 when nothing changed or failed, 1 otherwise, 2 on bad input."""
    mode = "reinject" if args.into else "reexecute" if args.reexecute else "reproject"
    reporter = Reporter(as_json=args.json, mode=mode)
    check = SourceCheck()
    try:
        await _replay(args, settings, reporter, check)
    except ReplayError as exc:
        return _refused("replay", exc)
    code = reporter.finish()
    warning = check.warning()
    if warning is None:
        return code
    sys.stderr.write(safe_text(warning) + "\n")  # said after the report, so it is seen last
    return EXIT_SOURCES_DIFFER


async def run_export(args: argparse.Namespace, settings: Settings) -> int:
    """`aci-evidence export --session S --file F`."""
    try:
        _check_session(args.session)
        folder = anyio.Path(args.file).parent
        if not await folder.is_dir():  # said before anything is read
            raise _BadFlag(f"--file: no folder {str(folder)!r} to write into")
        async with open_redis(need_url(settings), cluster=settings.redis_cluster) as redis:
            count = await export_session(redis, settings, args.session, args.file)
        if not count:
            raise _NothingFound("the session has no recorded invocation; no file written")
    except ReplayError as exc:
        return _refused("export", exc)
    # JSON escapes C0 only: a C1 control or a bidi override in the name is escaped too.
    print(safe_json(_ENCODER.encode({"exported": count, "file": args.file}).decode()))
    return 0


async def run_import(args: argparse.Namespace, settings: Settings) -> int:
    """`aci-evidence import --file F [--session S]`."""
    try:
        _check_session(args.session)
        records = load_file(args.file)
        async with open_redis(need_url(settings), cluster=settings.redis_cluster) as redis:
            counts = await import_lines(redis, settings, records, args.session)
    except ReplayError as exc:
        return _refused("import", exc)
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
