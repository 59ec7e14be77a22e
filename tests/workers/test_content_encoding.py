"""Bounded body decoding (`workers.sources.knowledge.content_encoding`): no server, chunked inputs."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import AsyncIterator

import anyio
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from workers.sources.knowledge.content_encoding import (
    BodyTooLarge,
    BodyUndecodable,
    accept_encoding,
    read_bounded,
)


async def _chunks(data: bytes, size: int) -> AsyncIterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


def _read(data: bytes, encoding: str, limit: int = 1 << 20, chunk: int = 7) -> bytes:
    async def go() -> bytes:
        return await read_bounded(_chunks(data, chunk), encoding, limit)

    return anyio.run(go)


def _raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


ENCODERS = {
    "identity": lambda b: b,
    "gzip": gzip.compress,
    "x-gzip": gzip.compress,
    "deflate": zlib.compress,
    "zstd": lambda b: zstandard.ZstdCompressor().compress(b),
}


@settings(max_examples=60, deadline=None)
@given(
    body=st.binary(max_size=3000) | st.just(b"{}" * 40_000),
    name=st.sampled_from(sorted(ENCODERS)),
    chunk=st.integers(1, 70_000),
)
def test_any_chunking_decodes_to_the_body(body: bytes, name: str, chunk: int) -> None:
    assert _read(ENCODERS[name](body), name, limit=len(body) + 1, chunk=chunk) == body


def test_raw_deflate_multi_member_gzip_and_stacked_encodings() -> None:
    assert _read(_raw_deflate(b"raw deflate"), "deflate") == b"raw deflate"
    assert _read(gzip.compress(b"one ") + gzip.compress(b"two"), "gzip") == b"one two"
    stacked = zstandard.ZstdCompressor().compress(gzip.compress(b"inner"))
    assert _read(stacked, "gzip, zstd") == b"inner"
    assert _read(b"plain", "") == b"plain"
    assert "gzip" in accept_encoding() and "br" not in accept_encoding()


@pytest.mark.parametrize("name", ["gzip", "deflate", "zstd"])
def test_the_decoded_limit_holds_whatever_the_ratio(name: str) -> None:
    bomb = ENCODERS[name](b"\0" * (8 << 20))
    with pytest.raises(BodyTooLarge):
        _read(bomb, name, limit=64 << 10, chunk=len(bomb))
    assert _read(ENCODERS[name](b"x" * 1000), name, limit=1000) == b"x" * 1000
    with pytest.raises(BodyTooLarge):
        _read(ENCODERS[name](b"x" * 1001), name, limit=1000)


def test_raw_bytes_are_bounded_too() -> None:
    with pytest.raises(BodyTooLarge):
        _read(b"x" * 2000, "identity", limit=1000)


@pytest.mark.parametrize(
    ("data", "name"),
    [
        (b"not gzip at all", "gzip"),
        (b"not deflate at all", "deflate"),
        (b"not zstd at all", "zstd"),
        (gzip.compress(b"truncated body here", mtime=0)[:-6], "gzip"),
        (gzip.compress(b"x", mtime=0) + b"trailing garbage", "gzip"),
        (b"whatever", "br"),
        (b"whatever", "compress"),
    ],
)
def test_corrupt_truncated_or_unknown_encodings_are_refused(data: bytes, name: str) -> None:
    with pytest.raises(BodyUndecodable):
        _read(data, name)
