"""`aci-evidence console`: its flags, loopback by default, a token required beyond it, the
root path checked, and the page templates shipped inside the wheel."""

from __future__ import annotations

import socket

import pytest

from app.cli import _parser, main
from app.console.serve import _root_path, is_loopback
from pipeline.settings import SettingsError


def test_flags_and_defaults() -> None:
    args = _parser().parse_args(["console"])
    assert (args.host, args.port, args.root_path) == ("127.0.0.1", 8765, "")
    args = _parser().parse_args(["console", "--port", "9000", "--root-path", "/aci"])
    assert (args.port, args.root_path) == (9000, "/aci")


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True),
     ("localhost", True), ("0.0.0.0", False), ("10.0.0.5", False), ("::", False),
     ("example.org", False)],
)  # fmt: skip
def test_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_root_path_is_a_path() -> None:
    assert _root_path("/aci/") == "/aci"
    assert _root_path("") == ""
    for bad in ("aci", "/a b", '/a"b', "/a?x", "/<x>"):
        with pytest.raises(SettingsError):
            _root_path(bad)


def test_beyond_loopback_needs_a_token(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ACI_REDIS_URL", "redis://127.0.0.1:6379/0")
    monkeypatch.delenv("ACI_CONSOLE_TOKEN", raising=False)
    assert main(["console", "--host", "0.0.0.0", "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert "ACI_CONSOLE_TOKEN must be set" in err and "redis://" not in err


def test_without_a_redis_url(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ACI_REDIS_URL", raising=False)
    assert main(["console"]) == 2
    assert "ACI_REDIS_URL is not set" in capsys.readouterr().err


@pytest.mark.parametrize(
    "url", ["redis://auditor:hunter2@127.0.0.1:notaport/0", "http://auditor:hunter2@h/"]
)
def test_an_unusable_redis_url_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], url: str
) -> None:
    # It was uvicorn's startup traceback and exit code 3 ("pending"); `status` says it in
    # one line with exit code 2, and so does the console now, before it listens.
    from chaos.services import free_port

    monkeypatch.setenv("ACI_REDIS_URL", url)
    monkeypatch.delenv("ACI_CONSOLE_TOKEN", raising=False)
    assert main(["console", "--port", str(free_port())]) == 2
    err = capsys.readouterr().err
    assert "configuration error: ACI_REDIS_URL is not a valid" in err
    assert "Traceback" not in err and "hunter2" not in err


@pytest.mark.parametrize("token", ["a", "s3cret", "fifteen-chars-x", " " * 20, "x" * 15 + "\x1b"])
@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1"])
def test_a_guessable_token_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], token: str, host: str
) -> None:
    # Beyond loopback the token is all that guards every observation; `ACI_CONSOLE_TOKEN=a`
    # was served (94 guesses), where `mcp --http` asks for 16 characters.
    monkeypatch.setenv("ACI_REDIS_URL", "redis://127.0.0.1:6379/0")
    monkeypatch.setenv("ACI_CONSOLE_TOKEN", token)
    with socket.socket() as taken:  # were it accepted, the console would stop at its port
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert main(["console", "--host", host, "--port", str(taken.getsockname()[1])]) == 2
    err = capsys.readouterr().err
    assert "ACI_CONSOLE_TOKEN: at least 16 printable characters" in err
    assert "s3cret" not in err and "fifteen" not in err  # never echoed
