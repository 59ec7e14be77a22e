"""A runbook's bytes as text: the encodings a team's folder really holds.

UTF-8 is read as before (a BOM kept, a stray bad byte in a UTF-8 file replaced, when its
characters beyond ASCII are at least as many as its bad bytes: Chinese in GBK forms a few
UTF-8 sequences by chance, among many more bad bytes). A byte order
mark names UTF-16 or UTF-32 (Windows editors and PowerShell's `Out-File` write UTF-16 with
one); UTF-16 without one is recognised by its NUL bytes. A file that is not UTF-8 is
Chinese or Japanese saved on Windows when one of GBK/GB18030 (simplified Chinese), Big5
(traditional Chinese) and Shift-JIS (Japanese) decodes it as a whole into nearly all that
language's common characters, not inside Latin words (`_east_asian`), else an 8-bit export
(a wiki page saved on Windows, a latin-1 runbook): read as Windows-1252, ISO-8859-1 plus
printable characters in 0x80-0x9F. `decode_runbook_as` also names the encoding it read
(`check` says it). What is none of these (NUL bytes, control characters: an image or an
archive named `.md`) is
`Undecodable`, never indexed as replacement characters. Before (2026-12-05), every file was
decoded as UTF-8 with replacement: a UTF-16 runbook was indexed as NUL-separated letters (its
words found by no question), a latin-1 one showed `Proc\ufffddure` in titles and excerpts, and
a binary file became sections of noise. Until Big5 and Shift-JIS were read (the same
day), both were Windows-1252 mojibake.
"""

from __future__ import annotations

import codecs
import re
from collections import Counter
from collections.abc import Callable
from typing import Final

__all__ = ["Undecodable", "decode_runbook", "decode_runbook_as"]

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
    return decode_runbook_as(data)[0]


def decode_runbook_as(data: bytes) -> tuple[str, str]:
    """The text of a runbook file's bytes and how they were read: "" for UTF-8, else the
    encoding's name for a person (`Big5 (traditional Chinese)`), said by `check`."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return _strict(data[len(bom) :], codec), _NAMES[codec]
    if b"\x00" in data:
        utf16 = _utf16_without_bom(data)
        if utf16 is None:
            raise Undecodable("binary data, not text")
        return _strict(data, utf16), _NAMES[utf16]
    try:
        return data.decode("utf-8"), ""
    except UnicodeDecodeError:
        pass
    text = data.decode("utf-8", errors="replace")
    bad = text.count("\ufffd")
    if sum(1 for c in text if ord(c) > 0x7F) - bad >= bad:
        # UTF-8 with a stray bad byte: the rest is UTF-8 all the same
        return text, f"UTF-8, {_sequences(bad)} replaced"
    cjk = _east_asian(data)
    if cjk is not None:
        return _texty(cjk[0]), cjk[1]
    try:
        return _texty(data.decode("cp1252")), "Windows-1252"
    except UnicodeDecodeError:  # 0x81, 0x8D, 0x8F, 0x90, 0x9D: undefined in Windows-1252
        return _texty(data.decode("latin-1")), "ISO-8859-1 (latin-1)"


def _sequences(n: int) -> str:
    # Each maximal invalid byte sequence is one U+FFFD (a truncated character: two bytes).
    return "1 invalid sequence" if n == 1 else f"{n} invalid sequences"


def _east_asian(data: bytes) -> tuple[str, str] | None:
    """The text of a Chinese or Japanese file saved on Windows, and its encoding's name: the
    reading (GBK/GB18030, Big5, Shift-JIS) that decodes as a whole, whose characters beyond
    ASCII are at least 90% its language's common ones (`_common_gb`, `_common_big5`,
    `_common_japanese`), and that does not put them
    inside Latin words, the best such; None when there is none. Each encoding's bytes decode
    as the others' too, as rare characters, kana or private-use ones: Big5's most used
    characters (lead bytes 0xA4-0xAF) are kana and private-use code points read as GBK.
    Latin-1 prose that happens to decode pairs an accented letter with its neighbour:
    `Größe` reads `Gr` + a rare CJK character + `e`, a character inside a Latin word."""
    best: tuple[float, str, str] | None = None
    for codec, name, common in _EAST_ASIAN:
        try:
            text = data.decode(codec)
        except UnicodeDecodeError:
            continue
        wide = Counter(c for c in text if ord(c) > 0x7F)
        total = sum(wide.values())
        if not total:
            continue
        share = sum(n for c, n in wide.items() if common(c)) / total
        if share >= _MIN_COMMON and not _inside_latin_words(text, total):
            if best is None or share > best[0]:
                best = (share, text, name)
    return None if best is None else (best[1], best[2])


def _inside_latin_words(text: str, wide: int) -> bool:
    # Over half of the characters beyond ASCII touch an ASCII letter or digit: Latin words.
    return sum(1 for _ in _TOUCHING.finditer(text)) > 0.5 * wide


def _lead_byte(char: str, codec: str) -> int:
    try:
        encoded = char.encode(codec)
    except UnicodeEncodeError:
        return 0
    return encoded[0] if len(encoded) == 2 else 0


def _common_gb(char: str) -> bool:
    # GB2312's punctuation rows (0xA1-0xA3) and its Chinese characters (0xB0-0xF7); not its
    # kana, Greek or box-drawing rows, which are Big5's most used characters read as GBK.
    lead = _lead_byte(char, "gb2312")
    return 0xA1 <= lead <= 0xA3 or 0xB0 <= lead <= 0xF7


def _common_big5(char: str) -> bool:
    # Big5's symbols (0xA1-0xA3) and its 5,401 frequent characters (0xA4-0xC6).
    return 0xA1 <= _lead_byte(char, "cp950") <= 0xC6


def _common_japanese(char: str) -> bool:
    # Kana, JIS symbols and full-width forms (0x81-0x84) and JIS level-1 kanji (0x88-0x98);
    # not half-width katakana, which other encodings' bytes read as in Shift-JIS.
    if "\u3040" <= char <= "\u30ff":
        return True
    lead = _lead_byte(char, "cp932")
    return 0x81 <= lead <= 0x84 or 0x88 <= lead <= 0x98


_MIN_COMMON: Final = 0.9
# A character beyond ASCII with an ASCII letter or digit on either side of it.
_TOUCHING: Final = re.compile(r"(?<=[A-Za-z0-9])[^\x00-\x7f]|[^\x00-\x7f](?=[A-Za-z0-9])")
_EAST_ASIAN: Final[tuple[tuple[str, str, Callable[[str], bool]], ...]] = (
    ("gb18030", "GBK/GB18030 (simplified Chinese)", _common_gb),
    ("cp950", "Big5 (traditional Chinese)", _common_big5),
    ("cp932", "Shift-JIS (Japanese)", _common_japanese),
)
_NAMES: Final = {
    "utf-32-le": "UTF-32LE",
    "utf-32-be": "UTF-32BE",
    "utf-16-le": "UTF-16LE",
    "utf-16-be": "UTF-16BE",
}


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
