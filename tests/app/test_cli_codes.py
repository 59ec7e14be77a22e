"""Exit codes that tell the truth, honest input handling, global flags, help (issue 24)."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.fleet import worker_processes
from app.parser import build_parser
from tests.conftest import REDIS_URL

ROOT = Path(__file__).resolve().parents[2]


def cli(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=90, check=False, input=stdin,
    )  # fmt: skip


def _env(prefix: str = "unused", **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    return {**env, "ACI_REDIS_URL": REDIS_URL, "ACI_PREFIX": prefix, **extra}


def test_call_exits_1_on_error_and_reads_args_from_a_file_or_stdin(tmp_path: Path) -> None:
    bad = cli(_env(), "call", "query_logs", "--local", "--id", "c1", "--args", '{"topic":"NOPE"}')
    assert bad.returncode == 1
    assert json.loads(bad.stdout)["model"]["evidence_status"] == "ERROR"
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"topic": "APPLICATION", "query": "timeout"}))
    from_file = cli(_env(), "call", "query_logs", "--local", "--id", "c2", "--args", f"@{args}")
    assert from_file.returncode == 0, from_file.stderr
    assert json.loads(from_file.stdout)["model"]["evidence_status"] == "EVIDENCE_FOUND"
    from_stdin = cli(_env(), "call", "query_logs", "--local", "--id", "c3", "--args", "-",
                     stdin=args.read_text())  # fmt: skip
    assert from_stdin.returncode == 0, from_stdin.stderr
    assert json.loads(from_stdin.stdout)["model"]["tool_call_id"] == "c3"


def test_a_file_that_is_not_utf8_is_bad_input_in_one_line(tmp_path: Path) -> None:
    # Before: a UnicodeDecodeError traceback from `--args @FILE` and `submit --file`.
    binary = tmp_path / "args.json"
    binary.write_bytes(b'\xff\xfe{"query":"x"}')
    for args in (("call", "lookup_knowledge", "--local", "--id", "k1", "--args", f"@{binary}"),
                 ("submit", "--file", str(binary), "--session", "s1")):  # fmt: skip
        done = cli(_env(), *args)
        assert done.returncode == 2, done.stderr
        assert done.stderr == f"bad input: {binary}: not UTF-8 text (byte 0)\n"


@pytest.mark.redis
def test_without_a_worker_call_says_no_consumer_reads_and_submit_wait_exits_3(
    prefix: str, redis: Any, tmp_path: Path
) -> None:
    env = _env(prefix)
    done = cli(env, "call", "lookup_knowledge", "--id", "k1", "--args", '{"query":"x"}',
               "--timeout", "0.5")  # fmt: skip
    assert done.returncode == 3
    assert "no consumer is reading the stream" in done.stderr and done.stderr.count("\n") == 1
    assert done.stderr.rstrip().endswith("run the same command again to read its result")
    calls = tmp_path / "calls.jsonl"
    calls.write_text(
        json.dumps({"id": "k2", "tool": "lookup_knowledge", "arguments": {"query": "y"}})
    )
    done = cli(env, "submit", "--file", str(calls), "--session", "s1", "--wait", "--timeout", "0.5")
    assert done.returncode == 3
    assert json.loads(done.stdout) == {"submitted": 1, "ready": 0, "error": 0, "pending": 1}


def test_without_a_redis_url_only_call_suggests_local() -> None:
    # Before: status, views and worker also said "use --local", a flag they do not have.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACI_")}
    for args in (["status"], ["views", "--session", "s1", "--view", "model"], ["worker"]):
        done = cli(env, *args)
        assert done.returncode == 2, args
        assert done.stderr.startswith("configuration error: ACI_REDIS_URL is not set"), args
        assert "--local" not in done.stderr and done.stderr.count("\n") == 1, args
    done = cli(env, "call", "lookup_knowledge", "--id", "k1", "--args", '{"query":"x"}')
    assert done.returncode == 2 and "use --local" in done.stderr


@pytest.mark.redis
def test_with_a_worker_call_exits_0_or_1_by_lifecycle(prefix: str, redis: Any) -> None:
    env = _env(prefix, ACI_INSTANT_SOURCES="1")
    with worker_processes(env, 1, quiet=True):
        ok = cli(env, "call", "lookup_knowledge", "--id", "k1", "--args", '{"query":"x"}')
        assert ok.returncode == 0, ok.stderr
        failed = cli(env, "call", "no_such_tool", "--id", "k2", "--args", "{}")
        assert failed.returncode == 1
        assert json.loads(failed.stdout)["lifecycle"] == "ERROR"


@pytest.mark.redis
def test_a_submit_line_with_args_instead_of_arguments_is_refused(
    prefix: str, redis: Any, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.jsonl"
    line = {"id": "k1", "tool": "lookup_knowledge", "args": {"query": "x"}}
    calls.write_text(json.dumps(line) + "\n")
    done = cli(_env(prefix), "submit", "--file", str(calls), "--session", "s1")
    assert done.returncode == 2
    assert "line 1" in done.stderr and "'args'" in done.stderr and '"arguments"' in done.stderr
    import redis as sync_redis

    assert sync_redis.Redis.from_url(REDIS_URL).exists(f"{{{prefix}}}:invocations") == 0


@pytest.mark.redis
def test_export_of_an_unknown_session_writes_no_file(tmp_path: Path, prefix: str) -> None:
    target = tmp_path / "x.jsonl"
    done = cli(_env(prefix), "export", "--session", "nosuch", "--file", str(target))
    assert done.returncode == 1 and not target.exists()


@pytest.mark.redis
def test_export_says_a_file_name_with_controls_escaped(
    prefix: str, redis: Any, tmp_path: Path
) -> None:
    # Before: the success line printed the name raw; JSON escapes C0 only, so a C1 CSI
    # (U+009B) or a bidi override (U+202E) in a file name reached the terminal as is.
    golden = ROOT / "tests" / "golden" / "replay" / "session.jsonl"
    assert cli(_env(prefix), "import", "--file", str(golden)).returncode == 0
    target = tmp_path / "x\u009b2J\u202egol.jsonl"
    done = cli(_env(prefix), "export", "--session", "rec-1", "--file", str(target))
    assert done.returncode == 0, done.stderr
    assert "\u009b" not in done.stdout and "\u202e" not in done.stdout, repr(done.stdout)
    assert json.loads(done.stdout) == {"exported": 6, "file": str(target)}  # the same value


def _parse(line: str) -> argparse.Namespace:
    return build_parser().parse_args(shlex.split(line))


def test_an_unreadable_log_json_flag_is_a_configuration_error() -> None:
    # Before: ACI_LOG_JSON=true (or yes) silently logged text.
    done = cli(_env(ACI_LOG_JSON="true"), "status")
    assert done.returncode == 2
    assert done.stderr == "configuration error: ACI_LOG_JSON must be 0 or 1\n"


def test_global_flags_go_before_or_after_the_subcommand() -> None:
    after = _parse("worker --log-json --log-level INFO --concurrency 4")
    assert (after.log_json, after.log_level, after.concurrency) == (True, "INFO", 4)
    before = _parse("--log-level DEBUG --log-json status")
    assert (before.log_json, before.log_level) == (True, "DEBUG")
    neither = _parse("status")
    assert (neither.log_json, neither.log_level) == (False, "WARNING")
    assert _parse("--log-level ERROR status --log-level INFO").log_level == "INFO"


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_flag_of_every_subcommand_has_a_sentence_and_its_default() -> None:
    subs = _subparsers()
    assert set(subs) >= {"call", "submit", "views", "status", "worker", "demo", "acl", "mcp",
                         "replay", "export", "import", "bench", "tools"}  # fmt: skip
    for name, sub in subs.items():
        for action in sub._actions:
            if not action.option_strings or action.help == argparse.SUPPRESS:
                continue
            if action.dest == "help":
                continue
            text = action.help or ""
            assert len(text) > 10, (name, action.dest)
            assert "default:" in text or "required" in text, (name, action.dest, text)
        helped = " ".join(sub.format_help().split())
        assert "exit codes:" in helped and "130" in helped, name
    assert "env ACI_LOG_LEVEL" in " ".join(subs["worker"].format_help().split())
    assert "env ACI_MOCK_SCENARIO" in " ".join(subs["demo"].format_help().split())
    from workers.sources.logs.source import SCENARIOS

    said = next(a.help or "" for a in subs["demo"]._actions if a.dest == "scenario")
    assert all(name in said for name in [*SCENARIOS, "real-log-files"]), said
    assert "ACI_REDIS_URL" in subs["status"].format_help()


def test_version_and_exit_codes_in_help_and_readme() -> None:
    done = cli(_env(), "--version")
    assert done.returncode == 0 and re.fullmatch(r"aci-evidence \S+\n", done.stdout)
    top = " ".join(cli(_env(), "--help").stdout.split())
    for said in ("0 done", "1 error", "2 usage or configuration", "3 calls still pending",
                 "130 aborted"):  # fmt: skip
        assert said in top, said
    readme = (ROOT / "README.md").read_text()
    for row in ("| 0 | done", "| 1 | an error", "| 2 | usage or configuration", "| 3 | pending",
                "| 130 | aborted"):  # fmt: skip
        assert row in readme, row


def test_docs_operations_examples_parse() -> None:
    text = (ROOT / "docs" / "operations.md").read_text()
    lines = [
        line.split("#")[0].strip()
        for block in re.findall(r"```sh\n(.*?)```", text, re.S)
        for line in block.splitlines()
        if line.strip().startswith("aci-evidence ")
    ]
    assert len(lines) > 10
    for line in lines:
        if line.endswith("\\") or "[" in line or ">" in line:
            continue  # continued lines, optional parts, redirections
        _parse(line.removeprefix("aci-evidence "))
