"""A runbook's bytes as text: the encodings a team's folder really holds.

UTF-8 is read as before (a BOM kept, a stray bad byte in a UTF-8 file replaced, when its
characters beyond ASCII are at least as many as its bad bytes: Chinese in GBK forms a few
UTF-8 sequences by chance, among many more bad bytes). A byte order
mark names UTF-16 or UTF-32 (Windows editors and PowerShell's `Out-File` write UTF-16 with
one); UTF-16 without one is recognised by its NUL bytes. A file that is not UTF-8 and holds no
UTF-8 sequence at all is Chinese saved on Windows (GBK/GB18030) when it decodes as such and
is nearly all common Chinese characters, else an 8-bit export (a wiki page saved on Windows,
a latin-1 runbook): read as Windows-1252, ISO-8859-1 plus printable characters in 0x80-0x9F. What is
none of these (NUL bytes, control characters: an image or an archive named `.md`) is
`Undecodable`, never indexed as replacement characters. Before (2026-12-05), every file was
decoded as UTF-8 with replacement: a UTF-16 runbook was indexed as NUL-separated letters (its
words found by no question), a latin-1 one showed `Proc\ufffddure` in titles and excerpts, and
a binary file became sections of noise.
"""

from __future__ import annotations

import codecs
from typing import Final

__all__ = ["Undecodable", "decode_runbook"]

_BOMS: Final = (  # UTF-32 first: its little-endian mark starts with UTF-16's
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_CONTROLS: Final = frozenset(range(32)) - {9, 10, 12, 13}  # C0 controls but tab, LF, FF, CR
_MAX_CONTROL_SHARE: Final = 0.01  # more than this share of control bytes: not text


class Undecodable(Exception):
    """The file's bytes are no text the index can read (binary data, a broken encoding)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def decode_runbook(data: bytes) -> str:
    """The text of a runbook file's bytes (see the module docstring); `Undecodable` otherwise."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return _strict(data[len(bom) :], codec)
    if b"\x00" in data:
        utf16 = _utf16_without_bom(data)
        if utf16 is None:
            raise Undecodable("binary data, not text")
        return _strict(data, utf16)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    text = data.decode("utf-8", errors="replace")
    bad = text.count("\ufffd")
    if sum(1 for c in text if ord(c) > 0x7F) - bad >= bad:
        return text  # UTF-8 with a stray bad byte: the rest is UTF-8 all the same
    chinese = _gb18030(data)
    if chinese is not None:
        return _texty(chinese)
    try:
        return _texty(data.decode("cp1252"))
    except UnicodeDecodeError:  # 0x81, 0x8D, 0x8F, 0x90, 0x9D: undefined in Windows-1252
        return _texty(data.decode("latin-1"))


def _gb18030(data: bytes) -> str | None:
    # Chinese saved on Windows (GBK, GB18030): valid as a whole, and nearly all of it the
    # common characters of GB2312, whose two bytes are both 0xA1-0xFE. Latin-1 prose that
    # happens to decode pairs an accented letter with an ASCII one: rare characters, refused.
    try:
        text = data.decode("gb18030")
    except UnicodeDecodeError:
        return None
    wide = [c for c in text if ord(c) > 0x7F]
    common = sum(1 for c in wide if _in_gb2312(c))
    return text if wide and common >= 0.9 * len(wide) else None


def _in_gb2312(char: str) -> bool:
    try:
        char.encode("gb2312")
    except UnicodeEncodeError:
        return False
    return True


def _strict(data: bytes, codec: str) -> str:
    try:
        return _texty(data.decode(codec))
    except UnicodeDecodeError:
        raise Undecodable(f"not valid {codec.upper()[:6]} text") from None


def _utf16_without_bom(data: bytes) -> str | None:
    # Mostly-ASCII UTF-16 has a NUL in (nearly) every other byte, on one side only.
    pairs = len(data) // 2
    if pairs < 4 or len(data) % 2:
        return None
    even = sum(1 for b in data[0::2] if b == 0) / pairs
    odd = sum(1 for b in data[1::2] if b == 0) / pairs
    if odd > 0.5 and even < 0.05:
        return "utf-16-le"
    if even > 0.5 and odd < 0.05:
        return "utf-16-be"
    return None


def _texty(text: str) -> str:
    controls = sum(1 for c in text if ord(c) in _CONTROLS)
    if controls > _MAX_CONTROL_SHARE * max(len(text), 1) or "\x00" in text:
        raise Undecodable("binary data, not text")
    return text
