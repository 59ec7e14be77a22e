"""The driver connection of `query_mysql`: PyMySQL's, with a bounded read of large rows.

PyMySQL reads a whole packet into memory, and a result row is one packet, however large: a
caller's `SELECT a, a, ... FROM (SELECT REPEAT('x', 16000000) a) t` (8,000 characters hold
about 4,000 such columns) or `SELECT * FROM documents` over large blobs made the worker hold
the whole row, and then its decoded copy (measured: a 640 MB row, 1.3 GB resident). Only a
prefix of each value is ever used (`session._cell` reads the cell bound plus the masking
window), so a row of 16 MiB or more (the protocol's chunk size: smaller rows are read as
before) is read as a stream: each value's first `value_bytes` bytes are kept (cut at a UTF-8
character boundary, so text still decodes), the rest is read and dropped. A kept prefix is
longer than the cell bound, so the projector still marks the cell cut.

`received` counts the bytes read, so the drain of a cut result (`leftovers.drained`) can stop
by bytes as well as by rows.
"""

from __future__ import annotations

import struct
from typing import Any, Final

from pymysql import err
from pymysql.connections import MAX_PACKET_LEN, Connection
from pymysql.constants import CR
from pymysql.protocol import MysqlPacket

__all__ = ["BoundedConnection"]

_NULL: Final = 0xFB
_UTF8_CONTINUATION: Final = 0x80


def _length_prefix(n: int) -> bytes:
    """The protocol's length-encoded integer."""
    if n < _NULL:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little")
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little")
    return b"\xfe" + n.to_bytes(8, "little")


class _Chunks:
    """The payload of one packet sent in 16 MiB chunks, read forward."""

    def __init__(self, conn: BoundedConnection) -> None:
        self.conn = conn
        self.buf = conn._read_chunk()
        self.pos = 0
        self.more = len(self.buf) == MAX_PACKET_LEN  # a full chunk is always followed by one

    def _next(self) -> None:
        if not self.more:
            self.conn._force_close()
            raise err.InternalError("a large row ended inside a value")
        self.buf = b""  # one chunk held at a time
        self.buf = self.conn._read_chunk()
        self.pos = 0
        self.more = len(self.buf) == MAX_PACKET_LEN

    def at_end(self) -> bool:
        while self.pos == len(self.buf) and self.more:
            self._next()
        return self.pos == len(self.buf)

    def take(self, n: int, keep: bool = True) -> bytes:
        """The next `n` bytes (dropped unread when not `keep`: nothing is copied)."""
        parts: list[bytes] = []
        while n:
            if self.pos == len(self.buf):
                self._next()
            end = min(len(self.buf), self.pos + n)
            if keep:
                parts.append(self.buf[self.pos : end])
            n -= end - self.pos
            self.pos = end
        return b"".join(parts)

    def length(self) -> int | None:
        """A value's length-encoded size, None for NULL."""
        first = self.take(1)[0]
        if first < _NULL:
            return first
        if first == _NULL:
            return None
        size = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first)
        if size is None:
            self.conn._force_close()
            raise err.InternalError("a large packet is not a result row")
        return int.from_bytes(self.take(size), "little")


class BoundedConnection(Connection):  # type: ignore[misc]  # PyMySQL is untyped here
    """PyMySQL's connection; a packet of 16 MiB or more (a result row) keeps at most
    `value_bytes` bytes of each value. See the module's docstring."""

    value_bytes: int = 65_536  # set per call by `session.execute`
    received: int = 0
    _next_seq_id: int  # PyMySQL's: the next packet's sequence number

    def _read_chunk(self) -> bytes:
        """One chunk of a packet: its header checked, its payload read."""
        header = self._read_bytes(4)
        low, high, number = struct.unpack("<HBB", header)
        if number != self._next_seq_id:
            self._force_close()
            if number == 0:  # MariaDB sends an error packet numbered 0 when it shuts down
                raise err.OperationalError(
                    CR.CR_SERVER_LOST, "Lost connection to MySQL server during query"
                )
            raise err.InternalError(
                f"Packet sequence number wrong - got {number} expected {self._next_seq_id}"
            )
        self._next_seq_id = (self._next_seq_id + 1) % 256
        data: bytes = self._read_bytes(low + (high << 16))
        self.received += len(data) + 4
        return data

    def _bounded_row(self, chunks: _Chunks) -> bytes:
        out = bytearray()
        while not chunks.at_end():
            length = chunks.length()
            if length is None:
                out.append(_NULL)
                continue
            kept = chunks.take(min(length, self.value_bytes))
            if len(kept) < length:
                dropped = chunks.take(1)[0]
                # Cut before a character the kept bytes would end inside (at most 3 back).
                for _ in range(3):
                    if dropped & 0xC0 != _UTF8_CONTINUATION or not kept:
                        break
                    dropped, kept = kept[-1], kept[:-1]
                chunks.take(length - self.value_bytes - 1, keep=False)
            out += _length_prefix(len(kept)) + kept
        return bytes(out)

    def _read_packet(self, packet_type: Any = MysqlPacket) -> Any:
        if getattr(self, "_current_timeout", None) != self._read_timeout:
            self._sock.settimeout(self._read_timeout)
            self._current_timeout = self._read_timeout
        chunks = _Chunks(self)
        data = self._bounded_row(chunks) if chunks.more else chunks.buf
        packet = packet_type(data, self.encoding)
        if packet.is_error_packet():
            if self._result is not None and self._result.unbuffered_active is True:
                self._result.unbuffered_active = False
            packet.raise_for_error()
        return packet
