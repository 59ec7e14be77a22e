"""The commands that put tool calls through the queue: `call`, `submit`, `views`.

Each maps its flags to a typed call of the library and its answer to an exit code
(`app.errors`): `call` exits 1 when the call ended ERROR and 3 when no result came in time
(saying whether any worker reads the stream); `submit --wait` exits 3 while calls are
still pending.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Final

import anyio
import msgspec

from app.errors import EXIT_ERROR, EXIT_OK, EXIT_PENDING, CommandError
from app.terminal import safe_json
from contracts.window import format_utc_ms, has_zone, parse_as_of
from pipeline.client import CallResult, EvidenceClient, InvalidSessionId, ToolCall
from pipeline.heartbeat import heartbeat_ttl_s, live_count
from pipeline.keys import is_valid_session_id
from pipeline.redis_io import PipelineError, open_redis
from pipeline.settings import Settings, SettingsError

__all__ = [
    "cmd_call",
    "cmd_submit",
    "cmd_views",
    "need_url",
    "print_json",
    "read_arguments",
    "read_text",
]

_ENCODER = msgspec.json.Encoder()
_LINE_KEYS: Final = frozenset({"id", "tool", "arguments"})


def print_json(value: Any) -> None:
    """One JSON value on one line of stdout."""
    sys.stdout.write(safe_json(_ENCODER.encode(value).decode()) + "\n")
    sys.stdout.flush()


def need_url(settings: Settings, *, local: bool = False) -> str:
    """The Redis URL, or a configuration error saying how to give one (`local`: the command
    also runs without Redis, with `--local`)."""
    if not settings.redis_url:
        hint = "use --local, or " if local else ""
        raise SettingsError(
            f"ACI_REDIS_URL is not set ({hint}set it, e.g. redis://127.0.0.1:6379/0)"
        )
    return settings.redis_url


async def read_arguments(value: str) -> str:
    """`--args`: the JSON text itself, `@FILE` for a file's text, `-` for stdin."""
    if value == "-":
        return await anyio.to_thread.run_sync(sys.stdin.read)
    if value.startswith("@"):
        return await read_text(value[1:])
    return value


async def read_text(path: str) -> str:
    """A file's UTF-8 text; a file that is not UTF-8 is bad input (one line), not a traceback."""
    try:
        return await anyio.Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CommandError(f"{path}: not UTF-8 text (byte {exc.start})") from None


async def _no_reader_note(client: EvidenceClient, settings: Settings, session: str) -> str:
    # Whether any worker beats in the session's partition (pipeline.heartbeat).
    part = settings.keys().for_session(session)
    try:
        live = await live_count(client.redis, part, heartbeat_ttl_s(settings))
    except PipelineError:
        return ""
    if live:
        return f" ({live} worker(s) live: it is queued or running)"
    return (
        f"; no consumer is reading the stream (no live worker in partition {part.index}): "
        "start one with `aci-evidence worker`"
    )


def _note_zone(as_of: str | None) -> None:
    # A time without a zone is read as UTC: said once on stderr (stdout stays the JSON).
    if as_of is not None and not has_zone(as_of):
        utc = format_utc_ms(parse_as_of(as_of))
        print(f"note: --as-of has no zone: read as UTC ({utc})", file=sys.stderr)


async def _wait_for_index(source: object) -> None:
    """A first runbook index build that outlasts the warm-up (a few hundred long runbooks:
    30-60 s) is waited for, and said on stderr: one command, one question, and its answer is
    not "still being built"."""
    from workers.sources.registry import build_progress

    count = build_progress(source)
    if count is None:
        return
    print(
        f"note: the runbook index is being built for the first time{count}; this call waits"
        " for it (later calls use it at once)",
        file=sys.stderr,
    )
    await source.ready()  # type: ignore[attr-defined]


async def cmd_call(args: argparse.Namespace, settings: Settings) -> int:
    """`call`: one tool call, its lifecycle and both views."""
    arguments = await read_arguments(args.args)
    _note_zone(args.as_of)
    if args.local:
        from workers.sources import open_sources
        from workers.stage import run_stages

        # The runbook index is built by the warm-up, as in a worker: its first build (10 s for
        # a few hundred runbooks) would otherwise run inside the call's deadline (TIMEOUT).
        warm = args.tool == "lookup_knowledge"
        async with open_sources(only=(args.tool,), warm=warm) as sources:
            await _wait_for_index(sources.get(args.tool))
            outcome = await run_stages(
                tool=args.tool,
                tool_call_id=args.id,
                arguments=arguments,
                session_id=args.session,
                sources=sources,
                settings=settings,
                as_of_ms=None if args.as_of is None else parse_as_of(args.as_of),
            )
        lifecycle = outcome.control.status
        print_json(
            {"lifecycle": lifecycle, "model": outcome.observation, "control": outcome.control}
        )
        return EXIT_ERROR if lifecycle == "ERROR" else EXIT_OK
    async with EvidenceClient.connect(settings, need_url(settings, local=True)) as client:
        call = ToolCall(tool=args.tool, tool_call_id=args.id, arguments=arguments)
        result = await client.call(args.session, call, timeout=args.timeout, as_of=args.as_of)
        if result is None:
            note = await _no_reader_note(client, settings, args.session)
            print(
                f"no result within {args.timeout}s{note}; the call stays queued: run the same "
                "command again to read its result",
                file=sys.stderr,
            )
            return EXIT_PENDING
    sys.stdout.write(safe_json(result.as_json().decode()) + "\n")
    return EXIT_ERROR if result.lifecycle == "ERROR" else EXIT_OK


def _parse_line(number: int, line: str) -> ToolCall:
    try:
        item = json.loads(line)
    except ValueError:
        raise CommandError(f"line {number}: not JSON") from None
    if not isinstance(item, dict) or not isinstance(item.get("tool"), str):
        raise CommandError(f'line {number}: expected {{"id", "tool", "arguments"}}')
    unknown = sorted(set(item) - _LINE_KEYS)
    if unknown:
        hint = ' (did you mean "arguments"?)' if "args" in unknown else ""
        raise CommandError(
            f"line {number}: unknown key {', '.join(map(repr, unknown))}{hint}; "
            'keys are "id", "tool", "arguments"'
        )
    return ToolCall(tool=item["tool"], tool_call_id=item.get("id"), arguments=item.get("arguments"))


async def cmd_submit(args: argparse.Namespace, settings: Settings) -> int:
    """`submit`: a JSON Lines file of calls; `--wait` for their results."""
    text = await read_text(args.file)
    calls = [_parse_line(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    async with EvidenceClient.connect(settings, need_url(settings)) as client:
        _note_zone(args.as_of)
        immediate = await client.submit_many(args.session, calls, as_of=args.as_of)
        ids = [c.tool_call_id for c, r in zip(calls, immediate, strict=True) if r is None]
        if not args.wait:
            # Returned once the calls are admitted (their call records exist: a worker's
            # admission, or this client's own, `pipeline.admit_here`, with no worker running):
            # until then only this process would send again a request another submitter erased.
            admitted = await client.admitted(args.session, ids, args.timeout)
            left = len(set(ids) - admitted)
            print_json({"submitted": len(calls), "not_admitted": left})
            if left:
                print(f"{left} calls not admitted within {args.timeout:g} s (is a worker "
                      "running?); their requests stay queued", file=sys.stderr)  # fmt: skip
            return EXIT_PENDING if left else EXIT_OK
        found = await client.wait(args.session, ids, args.timeout)
    # Per line: a line repeating an earlier (session, id) shares that invocation's result.
    finals: list[CallResult] = [
        r if r is not None else found[c.tool_call_id]
        for c, r in zip(calls, immediate, strict=True)
        if r is not None or c.tool_call_id in found
    ]
    ready = sum(1 for r in finals if r.lifecycle == "READY")
    pending = len(calls) - len(finals)
    print_json(
        {"submitted": len(calls), "ready": ready, "error": len(finals) - ready, "pending": pending}
    )
    return EXIT_PENDING if pending else EXIT_OK


async def cmd_views(args: argparse.Namespace, settings: Settings) -> int:
    """`views`: a session's published views as JSON lines (`--follow`: until Ctrl-C)."""
    from pipeline.views import read_views

    if not is_valid_session_id(args.session):
        raise InvalidSessionId(args.session)
    async with open_redis(need_url(settings), cluster=settings.redis_cluster) as redis:
        async for batch in read_views(redis, settings, args.session, args.view, follow=args.follow):
            for data in batch:
                sys.stdout.write(safe_json(data.decode()) + "\n")
            sys.stdout.flush()
    return EXIT_OK
