"""Reading an HTTP body whose `Content-Encoding` nobody vouches for, bounded in DECODED bytes.

httpx decodes each raw chunk whole (`zlib` without an output limit; zstd frame after frame), so
a 32 KB zstd body becomes gigabytes before any caller can count a byte. Here the raw chunks are
decoded step by step (zlib with `max_length`, zstd through a writer that stops the decompressor
mid-frame), and reading stops as soon as the decoded size passes the limit: memory stays within
the limit plus one step, whatever the compression ratio.

    BodyError            the body cannot be taken in (never retryable)
    +-- BodyTooLarge     more than `limit` bytes, raw or decoded
    +-- BodyUndecodable  an encoding we do not read, corrupt or truncated compressed data
"""

from __future__ import annotations

import io
import zlib
from collections.abc import AsyncIterator
from typing import IO, Any, Final, Protocol, cast

__all__ = [
    "STEP",
    "BodyError",
    "BodyTooLarge",
    "BodyUndecodable",
    "accept_encoding",
    "read_bounded",
]

try:  # optional, as in httpx: without it, zstd is neither asked for nor read
    import zstandard
except ImportError:  # pragma: no cover - present in the test environment
    zstandard = None  # type: ignore[assignment]

STEP: Final = 64 * 1024


class BodyError(Exception):
    """The body cannot be taken in."""


class BodyTooLarge(BodyError):
    """The body passed the byte limit (counted decoded, and raw with slack for overhead)."""


class BodyUndecodable(BodyError):
    """The body's encoding is unknown, or its compressed data is corrupt or truncated."""


class _Decoder(Protocol):
    def decode(self, data: bytes) -> bytes: ...

    def finish(self) -> None: ...


class _Zlib:
    """gzip (any number of members) or deflate (zlib-wrapped, else raw), `STEP` at a time."""

    def __init__(self, wbits: int, limit: int, *, raw_fallback: bool = False) -> None:
        self._wbits, self._limit, self._fallback = wbits, limit, raw_fallback
        self._d = zlib.decompressobj(wbits)
        self._size = 0
        self._started = False

    def decode(self, data: bytes) -> bytes:
        out: list[bytes] = []
        while data or (out and len(out[-1]) == STEP and not self._d.eof):
            if self._d.eof:  # a gzip member ended and more follows: the next member
                self._d = zlib.decompressobj(self._wbits)
            try:
                piece = self._d.decompress(data, STEP)
            except zlib.error:
                if self._fallback and not self._started:
                    self._fallback, self._wbits = False, -zlib.MAX_WBITS
                    self._d = zlib.decompressobj(self._wbits)
                    continue
                raise BodyUndecodable("corrupt compressed data") from None
            self._started = True
            self._size += len(piece)
            if self._size > self._limit:
                raise BodyTooLarge("decoded body over the limit")
            out.append(piece)
            data = self._d.unused_data if self._d.eof else self._d.unconsumed_tail
        return b"".join(out)

    def finish(self) -> None:
        if self._started and not self._d.eof:
            raise BodyUndecodable("truncated compressed data")


class _Sink(io.RawIOBase):
    # The zstd writer's output; raising here stops the decompressor mid-frame.
    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit, self.size, self.parts = limit, 0, list[bytes]()

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        data = bytes(b)
        self.size += len(data)
        if self.size > self.limit:
            raise BodyTooLarge("decoded body over the limit")
        self.parts.append(data)
        return len(data)


class _Zstd:
    """zstd (any number of frames), through a writer that emits `STEP`-sized pieces."""

    def __init__(self, limit: int) -> None:
        assert zstandard is not None
        self._sink = _Sink(limit)
        self._writer = zstandard.ZstdDecompressor().stream_writer(
            cast(IO[bytes], self._sink), write_size=STEP, closefd=False
        )

    def decode(self, data: bytes) -> bytes:
        assert zstandard is not None
        try:
            self._writer.write(data)
        except zstandard.ZstdError:
            raise BodyUndecodable("corrupt compressed data") from None
        out, self._sink.parts = b"".join(self._sink.parts), []
        return out

    def finish(self) -> None:
        return None  # a truncated frame leaves a body that is not JSON: refused there


def accept_encoding() -> str:
    """The `Accept-Encoding` to send: only what `read_bounded` can decode within bounds."""
    return "gzip, deflate, zstd" if zstandard is not None else "gzip, deflate"


def _decoders(content_encoding: str, limit: int) -> list[_Decoder]:
    decoders: list[_Decoder] = []
    # Listed in the order applied; decoded in reverse.
    for name in reversed([n.strip().lower() for n in content_encoding.split(",")]):
        match name:
            case "" | "identity":
                continue
            case "gzip" | "x-gzip":
                decoders.append(_Zlib(zlib.MAX_WBITS | 16, limit))
            case "deflate":
                decoders.append(_Zlib(zlib.MAX_WBITS, limit, raw_fallback=True))
            case "zstd" if zstandard is not None:
                decoders.append(_Zstd(limit))
            case _:
                raise BodyUndecodable("an encoding this reader does not decode")
    return decoders


async def read_bounded(raw: AsyncIterator[bytes], content_encoding: str, limit: int) -> bytes:
    """The decoded body of `raw` (the undecoded chunks, e.g. httpx's `aiter_raw()`); raises
    `BodyTooLarge` once more than `limit` bytes arrive or decode, `BodyUndecodable` when the
    encoding is unknown or its data corrupt or truncated."""
    decoders = _decoders(content_encoding, limit)
    # Compressed bytes may outnumber decoded ones a little (incompressible data, headers);
    # the raw bound only stops an endless stream that decodes to (almost) nothing.
    raw_limit = limit if not decoders else 2 * limit + 4096
    parts: list[bytes] = []
    raw_size = size = 0
    async for chunk in raw:
        raw_size += len(chunk)
        if raw_size > raw_limit:
            raise BodyTooLarge("body over the limit")
        data = chunk
        for decoder in decoders:
            data = decoder.decode(data)
        size += len(data)
        if size > limit:
            raise BodyTooLarge("decoded body over the limit")
        parts.append(data)
    for decoder in decoders:
        decoder.finish()
    return b"".join(parts)
