"""A client that never finishes its request head is cut off (uvicorn alone held it for ever:
beyond loopback anyone reaching the port, token or not, could hold connections until the
console ran out of file descriptors); a request that arrives in time, a kept-alive
connection's next one and a live stream are served as before."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
import uvicorn

from app.console import create_app
from app.console.protocol import HeadDeadlineProtocol
from app.console.serve import uvicorn_config
from chaos.services import free_port
from tests.conftest import REDIS_URL
from tests.console.seed import settings_for

pytestmark = pytest.mark.redis

DEADLINE_S = 1.0  # short, with room for a loaded host (the server runs in a thread here)


@pytest.fixture
def port(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    monkeypatch.setattr(HeadDeadlineProtocol, "head_timeout_s", DEADLINE_S)
    settings = settings_for(f"c{uuid.uuid4().hex[:12]}", REDIS_URL)
    chosen = free_port()
    server = uvicorn.Server(uvicorn_config(create_app(settings, REDIS_URL), "127.0.0.1", chosen))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(500):
        if server.started:
            break
        time.sleep(0.02)
    assert server.started, "uvicorn did not start"
    yield chosen
    server.should_exit = True
    thread.join(10)


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes within `seconds`; what it still sends meanwhile (the rest of
    an answer, a stream's events) is read and dropped."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            if sock.recv(4096) == b"":
                return True
        except TimeoutError:
            return False
    return False


def _answers(sock: socket.socket, count: int = 1) -> list[bytes]:
    """The heads of the next `count` answers, each read whole (its body by Content-Length),
    however the server's writes were cut into segments or run together (uvicorn on asyncio
    sends head and body apart; pipelined answers may come in one read)."""
    data, heads = b"", []
    while len(heads) < count:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            assert chunk, (heads, data)
            data += chunk
        head, _, data = data.partition(b"\r\n\r\n")
        length = next(
            (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")[1:]
             if line.lower().startswith(b"content-length:")),
            0,
        )  # fmt: skip
        while len(data) < length:
            chunk = sock.recv(4096)
            assert chunk, (heads, data)
            data += chunk
        heads.append(head)
        data = data[length:]
    assert not data, data  # nothing more was asked
    return heads


def _answer(sock: socket.socket) -> bytes:
    return _answers(sock)[0]


HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"


def test_a_head_that_never_ends_is_cut_off(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as silent:
        assert _closed_within(silent, 5)
    with socket.create_connection(("127.0.0.1", port)) as trickle:
        trickle.sendall(HEAD)
        for _ in range(4):  # a byte now and then restarts no timer
            time.sleep(DEADLINE_S / 3)
            try:
                trickle.sendall(b"X")
            except OSError:
                break
        assert _closed_within(trickle, 5)


def test_requests_in_time_are_served_and_kept_alive(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(5)
        sock.sendall(HEAD + b"\r\n")
        assert _answer(sock).startswith(b"HTTP/1.1 200")
        time.sleep(DEADLINE_S / 2)  # within the next request's deadline
        sock.sendall(HEAD + b"\r\n")
        assert _answer(sock).startswith(b"HTTP/1.1 200")
        # A kept-alive connection left idle is closed too (uvicorn's own 5 s, or ours).
        assert _closed_within(sock, 10)


def test_a_live_stream_outlives_the_deadline(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(5)
        sock.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        assert not _closed_within(sock, DEADLINE_S * 4)


def test_a_body_that_never_ends_is_cut_off(port: int) -> None:
    # The page is answered at once (a GET reads no body); the rest of the body, trickled,
    # held the connection for ever: each byte stopped uvicorn's idle timer.
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(5)
        sock.sendall(HEAD + b"Content-Length: 1000000\r\n\r\nx")
        assert _answer(sock).startswith(b"HTTP/1.1 200")
        for _ in range(12):
            time.sleep(DEADLINE_S / 2)
            try:
                sock.sendall(b"x")
            except OSError:
                break
        assert _closed_within(sock, 5)


def test_pipelined_requests_are_all_answered(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(5)
        sock.sendall((HEAD + b"\r\n") * 3)
        assert [head[:12] for head in _answers(sock, 3)] == [b"HTTP/1.1 200"] * 3
        assert _closed_within(sock, 10)  # then idle: closed
