"""`aci-evidence mcp` over stdio as a host starts it: another working directory, no
environment beyond what the host's `env` names, and lines that are no MCP message answered
(`hosts.mcp_stdio`) instead of dropped while the host waits."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pydantic
import pytest

from hosts.mcp_stdio import invalid_line_errors

pytest.importorskip("mcp")

REPO = Path(__file__).resolve().parents[2]
DEEP = "[" * 300 + "]" * 300  # past the SDK's parser (~200 levels), within the stdlib's
TOO_DEEP = "[" * 5000 + "]" * 5000  # past both


def transport_error(line: str) -> Exception:
    """What the SDK's stdio transport hands the server for `line` (None if it reads it)."""
    import mcp_types

    try:
        mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except pydantic.ValidationError as exc:
        return exc
    raise AssertionError(f"the SDK reads {line!r}")


def request(request_id: object, method: str = "tools/list", params: str = "{}") -> str:
    return (
        f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"method":"{method}","params":{params}}}'
    )


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("not json", [(None, -32700, "Parse error")]),
        ('{"jsonrpc":"2.0","id":', [(None, -32700, "Parse error")]),
        (request(7, params=f'{{"x":{DEEP}}}'), [(7, -32600, "nested too deeply")]),
        (request("e", params=f'{{"x":{TOO_DEEP}}}'), [(None, -32700, "Parse error")]),
        (f"[{request(1)},{request('b')}]", [(1, -32600, "batches"), ("b", -32600, "batches")]),
        ("[]", [(None, -32600, "batches")]),
        ('{"id":5,"method":"tools/list"}', [(5, -32600, "jsonrpc")]),
        ('{"jsonrpc":"1.0","id":"r","method":"tools/list"}', [("r", -32600, "'2.0'")]),
        ('{"jsonrpc":"2.0","id":true,"method":7}', [(None, -32600, "id")]),
        ('"a string"', [(None, -32600, "JSON-RPC 2.0 message")]),
    ],
)
def test_an_unreadable_line_is_answered_with_the_id_it_still_has(
    line: str, expected: list[tuple[object, int, str]]
) -> None:
    answers = invalid_line_errors(transport_error(line))
    got = [(a["id"], a["error"]["code"], a["error"]["message"]) for a in answers]
    assert [(i, c) for i, c, _ in got] == [(i, c) for i, c, _ in expected]
    for (_, _, message), (_, _, part) in zip(got, expected, strict=True):
        assert part in message, message
    assert all(a["jsonrpc"] == "2.0" for a in answers)
    assert all("tools/list" not in m and "[[[" not in m for _, _, m in got)  # never echoed


def test_an_unknown_exception_is_a_parse_error() -> None:
    error = {"code": -32700, "message": "Parse error: the line is not JSON"}
    assert invalid_line_errors(ValueError("boom")) == [
        {"jsonrpc": "2.0", "id": None, "error": error}
    ]


class Host:
    """A stdio host: the server as a subprocess, one JSON-RPC line at a time."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        command = [sys.executable, "-m", "app.cli", "mcp", "--local"]
        self.process = subprocess.Popen(
            command, cwd=cwd, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        # Lines are read by a thread: `select` on the buffered pipe missed a second answer that
        # came in the same read as the first (already in the buffer, nothing left on the fd).
        self.lines: queue.Queue[bytes] = queue.Queue()
        self._stderr: list[bytes] = []
        self._answers = threading.Thread(target=self._read, daemon=True)
        self._answers.start()
        self._errors = threading.Thread(target=self._read_stderr, daemon=True)
        self._errors.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        self._stderr.extend(self.process.stderr)

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()

    def answer(self, timeout: float = 30.0) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no answer: the host would wait until its own timeout") from None
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> str:
        assert self.process.stdin is not None
        self.process.stdin.close()  # the host is done
        self.process.wait(timeout=30)
        for reader, pipe in (
            (self._answers, self.process.stdout),
            (self._errors, self.process.stderr),
        ):
            reader.join(30)
            assert pipe is not None
            pipe.close()
        return b"".join(self._stderr).decode()


def test_a_host_that_passes_no_environment_from_elsewhere_hears_back_on_every_line(
    tmp_path: Path,
) -> None:
    # A host starts the server in its own directory with only what its `env` names (here: the
    # checkout to import, as PYTHONPATH). Lines it garbles were dropped: no answer at all.
    env = {"PYTHONPATH": str(REPO)}
    host = Host(tmp_path, env)
    started = time.monotonic()
    try:
        host.send(request(0, "initialize", json.dumps({
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        })))  # fmt: skip
        assert host.answer(60)["result"]["serverInfo"]["name"] == "aci-evidence"
        host.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        host.send("this is not json")
        assert host.answer()["error"]["code"] == -32700
        host.send(f"[{request(1)},{request(2)}]")  # a 2025-03-26 batch
        assert [host.answer()["id"], host.answer()["id"]] == [1, 2]
        host.send(request(3, "tools/call", f'{{"name":"query_mysql","arguments":{DEEP}}}'))
        deep = host.answer()
        assert deep["id"] == 3 and deep["error"]["code"] == -32600
        arguments = {"topic": "APPLICATION", "query": "timeout"}
        host.send(
            request(4, "tools/call", json.dumps({"name": "query_logs", "arguments": arguments}))
        )
        found = host.answer(60)
        assert found["id"] == 4, found
        assert found["result"]["structuredContent"]["evidence_status"] == "EVIDENCE_FOUND"
    finally:
        stderr = host.close()
    assert time.monotonic() - started < 120
    assert host.process.returncode == 0, stderr
    assert "Traceback" not in stderr and "this is not json" not in stderr  # never echoed
    assert stderr.count("no MCP message") == 3, stderr  # one per line
    assert not list(tmp_path.iterdir())  # nothing written where the host started it
