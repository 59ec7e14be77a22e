"""PEM private keys in log text (`masking`'s rules): a key's body is `***` from its opening
line to its closing one, or to the end of the text when it is cut short; `opens_key` says when
a line leaves a key open (`masking.KeyLines` follows one over a file's lines)."""

from __future__ import annotations

import re
from typing import Final

from workers.masking import MASK

__all__ = ["PEM_BEGIN", "PEM_END", "PRIVATE_KEY", "opens_key", "without_private_keys"]

# A PEM private key's opening line (`-----BEGIN RSA PRIVATE KEY-----`, `... ENCRYPTED PRIVATE
# KEY-----`, OpenSSH's); its words bounded, so each opening is read in bounded time.
# OpenPGP's armoured key too (`-----BEGIN PGP PRIVATE KEY BLOCK-----`): `PRIVATE_KEY` is in each.
PEM_BEGIN: Final = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
PRIVATE_KEY: Final = "PRIVATE KEY"
PEM_END: Final = "-----END "


def without_private_keys(text: str) -> str:
    """The text with the body of every PEM private key as `***`: from its opening line to its
    closing one (`-----END ... PRIVATE KEY-----`), or to the end of the text when the key is cut
    short. Linear: each opening is found once, the closing searched from it once."""
    if PRIVATE_KEY not in text:
        return text
    parts: list[str] = []
    done = pos = 0
    while (found := PEM_BEGIN.search(text, pos)) is not None:
        end = text.find(PEM_END, found.end())
        end = len(text) if end < 0 else end
        parts += (text[done : found.end()], MASK)
        done = pos = end
    return "".join(parts) + text[done:] if parts else text


def opens_key(line: str) -> bool:
    """Whether the line's last private key runs past its end (no closing line after it)."""
    last = max((found.end() for found in PEM_BEGIN.finditer(line)), default=-1)
    return last >= 0 and line.find(PEM_END, last) < 0
