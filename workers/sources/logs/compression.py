"""Compressed log files: the codec by magic bytes, a bounded decompressing stream, and what
an error part way means (the file cut short, or corrupt; or a read the system failed).

Every stream reads at most what its caller asks (`readline(n)`, `read(n)`): the standard
library's gzip, xz and bzip2 readers and lz4's pass a `max_length` to their decompressor,
zstandard's stream reader fills the buffer it is given; so a decompression bomb is stopped by
the caller's byte budget, never held in memory. A zstd stream cut short gives no error of its
own (zstandard's reader ends quietly where its input ends, and a block cut in half decodes to
nothing), and read across frames it raises on bytes after the last frame inside the read that
held that frame's end (losing it), so a zstd file is read a frame at a time, each frame's end
found by walking its block headers (`_frame`): a file that ends inside a frame raises
`EOFError` after its lines, as the other codecs do when cut, bytes that are no frame raise
`ValueError` after every line before them, and a frame whose header names a dictionary
(compressed with `zstd -D`: no reader decodes it without that dictionary) raises
`NeedsDictionary` after every line before it.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import zlib
from collections.abc import Callable
from typing import BinaryIO, Final

__all__ = [
    "UNREADABLE", "NeedsDictionary", "compression_of", "damage_of", "decompressed",
    "read_before_damage", "zstd_end",
]  # fmt: skip

_MAGIC_BYTES: Final = (
    (b"\x1f\x8b", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"BZh", "bzip2"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\x04\x22\x4d\x18", "lz4"),
)


_SKIPPABLE: Final = 0x184D2A50  # the top 28 bits of a skippable frame's magic


def _optional_codecs() -> frozenset[str]:
    readable = set()
    for codec, module in (("zstd", "zstandard"), ("lz4", "lz4.frame")):
        try:
            __import__(module)
        except ImportError:
            continue
        readable.add(codec)
    return frozenset(readable)


# Compressions recognised by their magic bytes that this worker cannot decompress (zstd and
# lz4 need the `zstandard` and `lz4` packages): such a file is counted, never read as text.
UNREADABLE: Final = frozenset({"zstd", "lz4"}) - _optional_codecs()


class NeedsDictionary(ValueError):
    """A zstd frame whose header names the dictionary it was compressed with (`zstd -D`):
    whole, but not decodable without that dictionary, which the worker does not have."""


# Skippable frames (zstd's and lz4's alike) read past to find the first real frame's magic.
_MAX_SKIPPED: Final = 16


def compression_of(raw: BinaryIO) -> str:
    """The compression of an opened file by its magic bytes ("" for none); the file is left at
    its start. Names do not decide: a rotated `app.log.1` may be compressed, `x.gz` plain. A
    file that starts with skippable frames (pzstd writes one first, each frame's size) is in
    the codec of the frame after them (zstd when there is none)."""
    at, head = 0, raw.read(8)
    for _ in range(_MAX_SKIPPED):
        if len(head) < 8 or int.from_bytes(head[:4], "little") & 0xFFFFFFF0 != _SKIPPABLE:
            break
        at += 8 + int.from_bytes(head[4:8], "little")
        raw.seek(at)
        head = raw.read(8)
        if len(head) < 4:  # skippable frames and nothing else (or cut): zstd's reader says
            raw.seek(0)
            return "zstd"
    raw.seek(0)
    for magic, codec in _MAGIC_BYTES:
        if head.startswith(magic):
            return codec
    return ""


def decompressed(raw: BinaryIO, codec: str, expired: Callable[[], bool]) -> BinaryIO:
    """A reader of the decompressed bytes of `raw` (itself when `codec` is ""); `expired` stops
    the walk of a zstd file's frames at its end (then its end reads as an end: the caller's
    own check of its deadline at the end of the stream marks the count, as `Reader` does)."""
    if codec == "gzip":
        return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]
    if codec == "xz":
        return lzma.LZMAFile(raw)  # type: ignore[return-value]
    if codec == "bzip2":
        return bz2.BZ2File(raw)  # type: ignore[return-value]
    if codec == "zstd":
        return io.BufferedReader(_Zstd(raw, expired))
    if codec == "lz4":
        import lz4.frame  # type: ignore[import-untyped]

        return lz4.frame.LZ4FrameFile(raw)  # type: ignore[no-any-return]
    return raw


class _Zstd(io.RawIOBase):
    """A zstd file decoded a frame at a time: each frame's end found by walking its block
    headers (`_frame`), its bytes alone given to zstandard's stream reader. So bytes after the
    last frame (zeros, garbage) raise only once every line before them was given (read
    across frames, zstandard raised inside the read that held the last frame's end, and lost
    it), and a file that ends inside a frame raises `EOFError` after its lines, as the other
    codecs do when cut. The file is judged up to its size when opened (written as it is read,
    the rest is the next call's); past `expired` inside a frame's walk the rest is read as one
    stream, its end unjudged, and between frames it ends there (the caller's check of its
    deadline at the end marks the count)."""

    def __init__(self, raw: BinaryIO, expired: Callable[[], bool]) -> None:
        import zstandard

        self._fd, self._expired = raw.fileno(), expired
        self._pos = raw.tell()
        self._data = _Bytes(self._fd, os.fstat(self._fd).st_size)
        self._decompressor = zstandard.ZstdDecompressor()
        self._reader: BinaryIO | None = None
        self._next = 0  # where the frame being read ends
        self._then: Exception | None = None  # raised once the frame being read is read
        self._frames = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while True:
            if self._reader is not None:
                count: int = self._reader.readinto(buffer)  # type: ignore[attr-defined]
                if count or not len(buffer):
                    return count
                self._reader, self._pos = None, self._next
                if self._then is not None:
                    raise self._then
            self._frames += 1
            if self._pos >= self._data.size or (
                self._frames % _FRAMES_CHECK_EVERY == 0 and self._expired()
            ):
                return 0  # the end, or the deadline (a million empty frames take 18 s)
            kind, end = _frame(self._data, self._pos, self._expired)
            if kind == "skip":
                self._pos = end
                continue
            if kind == "corrupt":
                raise ValueError("zstd file holds bytes that are not a frame")
            if kind == "dictionary":
                raise NeedsDictionary("zstd frame compressed with a dictionary")
            if kind == "stopped":
                end = self._data.size  # the rest as one stream, its end not judged
            span = _Span(self._fd, self._pos, min(end, self._data.size))
            self._reader = self._decompressor.stream_reader(  # it asks only for `read`
                span,  # type: ignore[arg-type]
                read_across_frames=kind == "stopped",
            )
            self._next = max(end, self._data.size) if kind != "frame" else end
            self._then = EOFError("zstd file ends inside a frame") if kind == "cut" else None


class _Span:
    """The bytes of a file from `start` to `end`, read by `pread` (its offset untouched)."""

    def __init__(self, fd: int, start: int, end: int) -> None:
        self._fd, self._at, self._end = fd, start, end

    def read(self, size: int = -1) -> bytes:
        left = self._end - self._at
        data = os.pread(self._fd, left if size < 0 else min(size, left), self._at)
        self._at += len(data)
        return data


_ZSTD_MAGIC: Final = 0xFD2FB528
_WALK_CHECK_EVERY: Final = 4096
_FRAMES_CHECK_EVERY: Final = 256
_WALK_CHUNK: Final = 64 * 1024
_BLOCK_MAX: Final = 128 * 1024  # a block's size, at most (RFC 8878 Block_Maximum_Size)


class _Bytes:
    """The bytes of a file up to `size`, read by `pread` a chunk at a time (the file's offset
    untouched): a walk of many tiny blocks costs no system call per block."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size = fd, size
        self._at, self._chunk = 0, b""

    def get(self, pos: int, count: int) -> bytes:
        """At most `count` bytes at `pos` (fewer at the end)."""
        offset = pos - self._at
        if offset < 0 or offset + count > len(self._chunk):
            want = max(count, _WALK_CHUNK)
            self._at, self._chunk = pos, os.pread(self.fd, min(want, max(0, self.size - pos)), pos)
            offset = 0
        return self._chunk[offset : offset + count]


def _frame(data: _Bytes, pos: int, expired: Callable[[], bool]) -> tuple[str, int]:
    """The frame at `pos`, by the sizes its frame and block headers declare (RFC 8878): what
    it is ("frame", "skip" a skippable frame, "cut" it ends past the file's end, "corrupt" no
    frame, "dictionary" a frame that needs one, "stopped" past `expired`) and where it ends."""
    head = data.get(pos, 18)  # magic, descriptor, window, dictionary id, content size
    magic = int.from_bytes(head[:4], "little")
    if len(head) < 5 or (magic & 0xFFFFFFF0 == _SKIPPABLE and len(head) < 8):
        return "cut", data.size + 1
    if magic & 0xFFFFFFF0 == _SKIPPABLE:
        end = pos + 8 + int.from_bytes(head[4:8], "little")
        return ("skip" if end <= data.size else "cut"), end
    if magic != _ZSTD_MAGIC:
        return "corrupt", pos
    descriptor = head[4]
    single = descriptor >> 5 & 1
    content_size = (single, 2, 4, 8)[descriptor >> 6]
    id_size = (0, 1, 2, 4)[descriptor & 3]
    dict_at = 6 - single  # after the magic, the descriptor and the window descriptor if any
    # A dictionary's id (0: none, RFC 8878). Random bytes after a magic name one 3 times in 4
    # (and zstd's own decoder says "Dictionary mismatch" of them too): said only of a header
    # that is sound (its reserved bit clear, a window of at most 2 GiB), of blocks of at most
    # 128 KiB, and of a frame that ends where the file does or another frame starts - or, cut
    # short, of one with a whole block before the cut (a rotation with `-D` interrupted).
    dict_id = int.from_bytes(head[dict_at : dict_at + id_size], "little") if id_size else 0
    if dict_id and (descriptor & 0x08 or (not single and (len(head) < 6 or head[5] >> 3 > 21))):
        dict_id = 0  # no sound header: the decoder says what it is
    pos += 5 + (1 - single) + id_size + content_size
    last, blocks = 0, 0
    while not last:
        blocks += 1
        if blocks % _WALK_CHECK_EVERY == 0 and expired():
            return "stopped", data.size
        header = data.get(pos, 3)
        if len(header) < 3:
            return _cut(dict_id and blocks > 1), data.size + 1
        value = int.from_bytes(header, "little")
        last, kind = value & 1, value >> 1 & 3
        if kind == 3:
            return "corrupt", pos
        if dict_id and value >> 3 > _BLOCK_MAX:
            dict_id = 0
        pos += 3 + (1 if kind == 1 else value >> 3)  # an RLE block holds one byte
        if pos > data.size:
            return _cut(dict_id and blocks > 1), pos
    pos += 4 * (descriptor >> 2 & 1)  # the content checksum
    if pos > data.size:
        return _cut(dict_id), pos
    if dict_id and _frame_at(data, pos):
        return "dictionary", pos
    return "frame", pos


def _cut(needs_dictionary: object) -> str:
    """A frame cut short: one that needs a dictionary is said as that (whole, it would not
    decode either), else "cut"."""
    return "dictionary" if needs_dictionary else "cut"


def _frame_at(data: _Bytes, pos: int) -> bool:
    """Whether the file ends at `pos` or a frame (zstd's, a skippable one) starts there."""
    magic = int.from_bytes(data.get(pos, 4), "little") if pos < data.size else _ZSTD_MAGIC
    return magic == _ZSTD_MAGIC or magic & 0xFFFFFFF0 == _SKIPPABLE


def zstd_end(fd: int, expired: Callable[[], bool] = lambda: False, size: int = -1) -> str:
    """How a zstd file ends: "" whole frames, "cut" inside a frame, "corrupt" bytes that are no
    frame, "dictionary" a frame that needs one, "stopped" past `expired` (not known); judged
    on its first `size` bytes (default: its size now), a few bytes per block read, its offset
    untouched."""
    data, pos = _Bytes(fd, os.fstat(fd).st_size if size < 0 else size), 0
    while pos < data.size:
        kind, pos = _frame(data, pos, expired)
        if kind not in ("frame", "skip"):
            return kind
    return ""


def read_before_damage(stream: BinaryIO, size: int, codec: str) -> bytes:
    """At most `size` decompressed bytes, and those decoded before damage when an error comes
    after some (a file with zeros after its end still shows its first records); an error
    before any, or one not the file's (`damage_of`), is raised."""
    parts: list[bytes] = []
    total = 0
    read = getattr(stream, "read1", stream.read)
    try:
        while total < size:
            chunk = read(size - total)
            if not chunk:
                break
            parts.append(chunk)
            total += len(chunk)
    except Exception as exc:
        if not parts or not damage_of(exc, codec):
            raise
    return b"".join(parts)


def damage_of(exc: BaseException, codec: str) -> str:
    """What an error raised while reading a file (`codec` "" plain) says of it: "cut" (it
    ends before the end of its stream: a rotation interrupted, a disk full), "corrupt" (bytes
    that do not decode, a checksum that does not match), "dictionary" (a zstd frame that
    needs a dictionary), "unreadable" (the system failed a read: EIO, a disk's bad sector; a
    plain file's too), or "" (not the file's: raise it)."""
    if isinstance(exc, OSError) and exc.errno is not None:
        return "unreadable"  # the codecs' own OSErrors (BadGzipFile, bz2's) carry no errno
    if isinstance(exc, NeedsDictionary):
        return "dictionary"
    if isinstance(exc, EOFError):
        return "cut"
    if isinstance(exc, OSError | zlib.error | lzma.LZMAError | ValueError):
        return "corrupt"
    module = type(exc).__module__.split(".")[0]
    # zstandard.ZstdError; lz4 raises a bare RuntimeError ("LZ4F_decompress failed ...")
    if module == "zstandard" or (codec == "lz4" and isinstance(exc, RuntimeError)):
        return "corrupt"
    return ""
