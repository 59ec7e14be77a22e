"""`aci-evidence check`: what the log topics of `ACI_LOGS_CONFIG` and the runbook folder read
on this machine, before a worker serves them (no Redis). Each file source's files, each file's
sample read in its format (records, lines not in the format, the records' times); each
runbook's title and sections; and the problems an operator should look at, with the named
format that reads more of a file's lines where there is one; and the configuration digest a
worker started now would beat (`status`'s config column). Exit 0 when everything reads
well, 1 with problems, 2 for a configuration that does not load.
"""

from __future__ import annotations

import os
import sys
import time

import anyio

from app.commands.calls import print_json
from app.errors import EXIT_ERROR, EXIT_OK
from app.terminal import safe_text
from pipeline.settings import SettingsError
from workers.sources import open_sources
from workers.sources.identity import configuration_digest
from workers.sources.knowledge.check import KnowledgeCheck, check_knowledge
from workers.sources.logs.check import SAMPLE_BYTES, SAMPLE_LINES, TopicCheck, check_logs
from workers.sources.logs.config import ENV_VAR, load_logs_config

__all__ = ["cmd_check"]


def cmd_check(*, as_json: bool) -> int:
    """Check the log topics and the knowledge folder; the exit code (module docstring)."""
    config = load_logs_config(os.environ)  # a LogsConfigError is the one line, exit 2
    try:
        knowledge = check_knowledge(os.environ)
    except ValueError as exc:  # a bad ACI_KNOWLEDGE_* value: one line, exit 2 (as a worker)
        raise SettingsError(f"lookup_knowledge: {exc}") from None
    checks = [] if config is None else check_logs(config, time.time())
    problems = [p for check in checks for p in check.problems()] + knowledge.problems()
    unset = f"{ENV_VAR} is not set: every topic is served by the MOCK world"
    digest = anyio.run(_digest)
    if as_json:
        body: dict[str, object] = {"topics": checks, "knowledge": knowledge, "problems": problems}
        body["config"] = digest
        if config is None:
            body["note"] = unset
        print_json(body)
    else:
        _print(checks, knowledge, problems, unset if config is None else "", digest)
    return EXIT_ERROR if problems else EXIT_OK


async def _digest() -> str:
    """The configuration digest a worker started here now would beat (`status`'s config
    column): the sources opened as a worker opens them, not warmed up, nothing connected."""
    async with open_sources(os.environ) as sources:
        return configuration_digest(sources)


def _print(
    checks: list[TopicCheck],
    knowledge: KnowledgeCheck,
    problems: list[str],
    note: str,
    digest: str,
) -> None:
    out: list[str] = [note] if note else []
    for check in checks:
        out.append(f"{check.topic} ({check.backend})")
        if check.backend != "file":
            out.append("  not files: checked by a worker when it starts")
        for source in check.sources:
            globs = ", ".join(source.paths)
            match = "1 file matches" if source.matched == 1 else f"{source.matched} files match"
            if source.problem:
                match = f"not listed: {source.problem}"
            out.append(f"  {globs}  format {source.format}: {match}")
            out += (f"    {skipped}: skipped, not a regular file" for skipped in source.skipped)
            for file in source.files:
                read = f"{file.records} records, {file.unparsed} lines not in the format"
                span = f", {file.first} .. {file.last}" if file.first else ""
                out.append(f"    {file.path}: {file.lines} lines: {read}{span}")
                if file.example:
                    out.append(f"      not in the format: {file.example}")
            if source.unchecked:  # the others are not sampled: say so, not "reads well"
                out.append(
                    f"    (the newest {len(source.files)} of the {source.matched} files are "
                    f"checked; the {source.unchecked} older ones are not)"
                )
    if checks:
        most = f"{SAMPLE_BYTES // 1024 // 1024} MiB"
        out.append(
            f"(the first {SAMPLE_LINES} lines, {most} at most, of the newest files of each source)"
        )
    if knowledge.kind == "rag_http":
        out.append("knowledge: a RAG service over HTTP (ACI_RAG_URL): checked by a worker")
    elif not knowledge.problem:
        out.append(
            f"knowledge: {knowledge.folder}: {knowledge.runbooks} runbooks, "
            f"{knowledge.sections} sections"
        )
        out += (
            f"  {r.source}: {r.title!r}, " + (r.note or f"{r.sections} sections")
            + (f", read as {r.encoding}" if r.encoding else "")
            for r in knowledge.listed if not r.problem
        )  # fmt: skip
        if passed_over := knowledge.passed_over():
            out.append(f"  ({passed_over})")
    out.append(
        f"configuration digest {digest[:8]}: a worker started now beats it; `aci-evidence "
        "status` shows each live worker's in its config column (one that differs runs another)"
    )
    if problems:
        out.append(f"{len(problems)} problems:")
        out += (f"  {p}" for p in problems)
    else:
        out.append("everything reads well")
    sys.stdout.write("".join(safe_text(line) + "\n" for line in out))
    sys.stdout.flush()
