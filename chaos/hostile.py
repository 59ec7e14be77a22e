"""A hostile RAG upstream: a real local HTTP server whose answer is chosen by the query.

A query that starts with `hostile:<kind>` gets that kind of answer; any other query gets a
normal RAG answer quoting it (no hits when it holds `qwzx`, the load's off-topic marker). Used
by tests/abuse/ and by the `hostile_upstream` chaos scenario, so both exercise the worker's
real HTTP client (httpx) against real sockets.

    surrogate   JSON whose excerpt holds a lone surrogate escape (`\\ud800`)
    gzip_bomb   Content-Encoding: gzip, a small body that inflates to `bomb_bytes`
    zstd_bomb   Content-Encoding: zstd, likewise (concatenated frames)
    deflate_bomb  Content-Encoding: deflate, likewise
    deep        JSON nested deeper than any parser's recursion limit
    bad_utf8    a body that is not UTF-8
    not_json    an HTML page
    bad_gzip    Content-Encoding: gzip over bytes that are not gzip
    drip        headers at once, then one byte per `drip_interval_s` (never a whole answer)
"""

from __future__ import annotations

import contextlib
import gzip
import json
import threading
import zlib
from collections.abc import Iterator
from functools import cached_property
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

__all__ = ["EXPECTED", "HOSTILE", "KINDS", "HostileServer", "hostile_server", "normal_answer"]

KINDS: Final = (
    "surrogate",
    "gzip_bomb",
    "zstd_bomb",
    "deflate_bomb",
    "deep",
    "bad_utf8",
    "not_json",
    "bad_gzip",
    "drip",
)
# The ERROR code the worker must give each kind (a lone surrogate cannot be carried verbatim).
EXPECTED: Final = {
    "surrogate": "PROJECTION",
    "gzip_bomb": "PROJECTION",
    "zstd_bomb": "PROJECTION",
    "deflate_bomb": "PROJECTION",
    "deep": "PROJECTION",
    "bad_utf8": "PROJECTION",
    "not_json": "PROJECTION",
    "bad_gzip": "PROJECTION",
    "drip": "TIMEOUT",
}
HOSTILE: Final = "hostile"  # the chaos fault marker: a query `hostile:<kind> ...`
_MB: Final = 1024 * 1024


def normal_answer(query: str) -> dict[str, Any]:
    """A RAG service's answer with one hit quoting the query (none for an off-topic query)."""
    if "qwzx" in query:
        return {"contextPack": {"hits": []}}
    return {
        "contextPack": {
            "relevanceLevel": "high",
            "hits": [
                {
                    "documentId": "doc-1",
                    "source": "runbooks/pool.md",
                    "title": "Pool",
                    "breadcrumb": "Pool > Symptoms",
                    "content": f"Connection pool exhausted while asking: {query}",
                }
            ],
        }
    }


class _Bombs:
    """Compressed bodies that decode to `size` bytes of zeros, built once per server."""

    def __init__(self, size: int) -> None:
        self.size = size

    @cached_property
    def gzip(self) -> bytes:
        # Concatenated members are valid gzip; one 16 MB member is compressed once.
        unit = min(self.size, 16 * _MB)
        member = gzip.compress(b"\0" * unit, compresslevel=9, mtime=0)
        return member * max(1, self.size // unit)

    @cached_property
    def deflate(self) -> bytes:
        # One zlib stream; after a full flush each 1 MB block of zeros compresses to the same
        # bytes (no shared history), so it is compressed once and repeated, and the trailer
        # is the Adler-32 of all the zeros: (n mod 65521) << 16 | 1. (Compressing the whole
        # 1 GB took 3 s of every hostile server's start.)
        count = max(1, self.size // _MB)
        chunk = b"\0" * _MB
        compressor = zlib.compressobj(9)
        if count == 1:
            return compressor.compress(chunk) + compressor.flush()
        first = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
        block = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
        last = compressor.compress(chunk) + compressor.flush()
        adler = ((count * _MB) % 65521) << 16 | 1
        return first + block * (count - 2) + last[:-4] + adler.to_bytes(4, "big")

    @cached_property
    def zstd(self) -> bytes:
        import zstandard

        unit = min(self.size, 64 * _MB)
        frame = zstandard.ZstdCompressor(level=19).compress(b"\0" * unit)
        return frame * max(1, self.size // unit)


class _Handler(BaseHTTPRequestHandler):
    server: HostileServer
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        try:
            query = str(json.loads(self.rfile.read(length)).get("query", ""))
        except (ValueError, AttributeError):
            query = ""
        kind = query.removeprefix("hostile:").split()[0] if query.startswith("hostile:") else ""
        kind = self.server.always or kind
        self.server.served[kind or "normal"] += 1
        bombs = self.server.bombs
        match kind:
            case "surrogate":
                hit = '{"documentId":"d-s","content":"pool \\ud800 exhausted","title":"T \\udfff"}'
                self._send(b'{"contextPack":{"hits":[' + hit.encode() + b"]}}")
            case "gzip_bomb":
                self._send(bombs.gzip, encoding="gzip")
            case "zstd_bomb":
                self._send(bombs.zstd, encoding="zstd")
            case "deflate_bomb":
                self._send(bombs.deflate, encoding="deflate")
            case "deep":
                depth = 200_000
                self._send(b'{"contextPack":' + b"[" * depth + b"]" * depth + b"}")
            case "bad_utf8":
                self._send(b'{"contextPack":{"hits":[{"content":"pool \xff\xfe exhausted"}]}}')
            case "not_json":
                self._send(b"<html>upstream proxy error</html>", kind="text/html")
            case "bad_gzip":
                self._send(b"this is not gzip at all" * 10, encoding="gzip")
            case "drip":
                self._drip()
            case _:
                self._send(json.dumps(normal_answer(query)).encode())

    def _send(self, body: bytes, *, encoding: str = "", kind: str = "application/json") -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        if encoding:
            self.send_header("Content-Encoding", encoding)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(body)
        self.server.sent_bytes += len(body)

    def _drip(self) -> None:
        total = 10_000
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(total))
        self.end_headers()
        self.wfile.flush()
        with contextlib.suppress(OSError):
            for _ in range(total):
                if self.server.closing.wait(self.server.drip_interval_s):
                    return
                self.wfile.write(b" ")
                self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class HostileServer(ThreadingHTTPServer):
    """The server; `url` once started. `served` counts answers by kind."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, *, bomb_bytes: int = 1024 * _MB, drip_interval_s: float = 1.0) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bombs = _Bombs(bomb_bytes)
        self.drip_interval_s = drip_interval_s
        self.closing = threading.Event()
        self.served: dict[str, int] = dict.fromkeys(("normal", *KINDS), 0)
        self.sent_bytes = 0
        self.always = ""  # when set, every query gets this kind of answer

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/rag"

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hangs up mid-answer is expected here


@contextlib.contextmanager
def hostile_server(**kw: Any) -> Iterator[HostileServer]:
    """A running `HostileServer` on a free port of 127.0.0.1; stopped on exit."""
    server = HostileServer(**kw)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.closing.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
