"""`aci-evidence check`: what the log topics of `ACI_LOGS_CONFIG` read on this machine, before
a worker serves them (no Redis). Each file source's files, each file's sample read in its
format (records, lines not in the format, the records' times), and the problems an operator
should look at, with the named format that reads more of a file's lines where there is one.
Exit 0 when every topic reads well, 1 with problems, 2 for a configuration that does not load.
"""

from __future__ import annotations

import os
import sys
import time

from app.commands.calls import print_json
from app.errors import EXIT_ERROR, EXIT_OK
from app.terminal import safe_text
from workers.sources.logs.check import SAMPLE_BYTES, SAMPLE_LINES, TopicCheck, check_logs
from workers.sources.logs.config import ENV_VAR, load_logs_config

__all__ = ["cmd_check"]


def cmd_check(*, as_json: bool) -> int:
    """Check the configuration named by `ACI_LOGS_CONFIG`; the exit code (module docstring)."""
    config = load_logs_config(os.environ)  # a LogsConfigError is the one line, exit 2
    if config is None:
        say = f"{ENV_VAR} is not set: every topic is served by the MOCK world; nothing to check"
        if as_json:
            print_json({"topics": [], "problems": [], "note": say})
        else:
            print(say)
        return EXIT_OK
    checks = check_logs(config, time.time())
    problems = [p for check in checks for p in check.problems()]
    if as_json:
        print_json({"topics": checks, "problems": problems})
    else:
        _print(checks, problems)
    return EXIT_ERROR if problems else EXIT_OK


def _print(checks: list[TopicCheck], problems: list[str]) -> None:
    out: list[str] = []
    for check in checks:
        out.append(f"{check.topic} ({check.backend})")
        if check.backend != "file":
            out.append("  not files: checked by a worker when it starts")
        for source in check.sources:
            globs = ", ".join(source.paths)
            match = "1 file matches" if source.matched == 1 else f"{source.matched} files match"
            out.append(f"  {globs}  format {source.format}: {match}")
            for file in source.files:
                read = f"{file.records} records, {file.unparsed} lines not in the format"
                span = f", {file.first} .. {file.last}" if file.first else ""
                out.append(f"    {file.path}: {file.lines} lines: {read}{span}")
                if file.example:
                    out.append(f"      not in the format: {file.example}")
    most = f"{SAMPLE_BYTES // 1024 // 1024} MiB"
    out.append(
        f"(the first {SAMPLE_LINES} lines, {most} at most, of the newest files of each source)"
    )
    if problems:
        out.append(f"{len(problems)} problems:")
        out += (f"  {p}" for p in problems)
    else:
        out.append("every topic reads well")
    sys.stdout.write("".join(safe_text(line) + "\n" for line in out))
    sys.stdout.flush()
