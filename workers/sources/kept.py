"""Derived data the sources keep in the cache folder, so a worker's start reads it instead of
building it again (the bundled model's tables, the MOCK log world).

The folder is ACI_CACHE_DIR, else `$XDG_CACHE_HOME/aci-evidence` or `~/.cache/aci-evidence`
(`cache_dir_from_env`). A kept file is msgpack (msgspec: read back typed, so a cache file never
runs code; no pickle) in an envelope naming its format and key (what it was derived from) with
a blake2b digest of its payload: `read_kept` refuses a file of another key or format, or a
damaged one, and the caller builds afresh and `keep`s the result. Files are written to a temp
file in the same folder and renamed, so concurrent workers never read a half-written one; a
folder that cannot be written costs only the time.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

import msgspec

__all__ = ["cache_dir_from_env", "keep", "read_kept", "write_atomically"]

log = logging.getLogger("aci.sources")


class _Kept(msgspec.Struct, frozen=True, kw_only=True):
    format: int
    key: str
    digest: str  # blake2b of `payload`
    payload: bytes


_DECODER: Final = msgspec.msgpack.Decoder(_Kept)


def cache_dir_from_env(env: Mapping[str, str]) -> Path:
    """ACI_CACHE_DIR, else `$XDG_CACHE_HOME/aci-evidence`, else `~/.cache/aci-evidence`."""
    chosen = env.get("ACI_CACHE_DIR", "").strip()
    if chosen:
        return Path(chosen)
    base = env.get("XDG_CACHE_HOME", "").strip()
    return (Path(base) if base else Path.home() / ".cache") / "aci-evidence"


def read_kept(path: Path, fmt: int, key: str) -> bytes:
    """The payload kept at `path` for (`fmt`, `key`); OSError when it cannot be read,
    ValueError when it is of another format or key, or damaged."""
    record = _DECODER.decode(path.read_bytes())  # msgspec's DecodeError is a ValueError
    if record.format != fmt or record.key != key:
        raise ValueError("a kept file of another format or key")
    if hashlib.blake2b(record.payload).hexdigest() != record.digest:
        raise ValueError("a damaged kept file")
    return record.payload


def keep(path: Path, fmt: int, key: str, payload: bytes) -> bool:
    """Keep `payload` at `path` for (`fmt`, `key`); False when the folder cannot be written."""
    digest = hashlib.blake2b(payload).hexdigest()
    data = msgspec.msgpack.encode(_Kept(format=fmt, key=key, digest=digest, payload=payload))
    return write_atomically(path, lambda tmp: tmp.write_bytes(data))


def write_atomically(path: Path, write: Callable[[Path], object]) -> bool:
    """`write(tmp)` then rename onto `path`; False (said at debug level) when the folder
    cannot be written."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        log.debug("%s cannot be kept in the cache folder (%s)", path.name, exc.strerror)
        return False
    finally:
        with contextlib.suppress(OSError):  # also when the folder is not one
            tmp.unlink(missing_ok=True)
    return True
