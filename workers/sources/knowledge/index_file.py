"""Which index file answers for a runbook folder: its name in the cache folder, opened when
built, else built, borrowing the vectors of the folder's newest older index by the same model.

A file is named after the folder (a digest of its real path), a salt (the index version, the
analysis code, the model id, the size cap) and the folder's files fingerprint, so a change to
any is another file. The older files of the folder by the same model go once the new one is
built (upgrades and edits leave no trail); they lend their vectors to unchanged chunks first.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from pathlib import Path

from workers.sources.base import failure_of
from workers.sources.knowledge.encoder import Encoder
from workers.sources.knowledge.store import (
    INDEX_VERSION,
    IndexFile,
    Progress,
    build_index,
    models_of,
)

__all__ = ["open_or_build", "why_not"]


def open_or_build(
    folder: Path,
    cache: Path,
    salt: str,
    fingerprint: str,
    encoder: Encoder | None,
    *,
    max_file_bytes: int,
    progress: Progress | None = None,
) -> IndexFile:
    """The open index file of `folder` for this salt and fingerprint, built if it is not."""
    folder_key = hashlib.sha256(str(folder).encode()).hexdigest()[:12]
    model_key = hashlib.sha256(salt.encode()).hexdigest()[:8]
    of_folder = f"knowledge-v{INDEX_VERSION}-{folder_key}-"
    prefix = f"{of_folder}{model_key}-"
    path = cache / f"{prefix}{fingerprint[:16]}.sqlite3"
    try:
        return IndexFile(path)
    except sqlite3.OperationalError:
        pass
    # Not built yet (or just removed as stale by a worker that saw newer files). The newest
    # index of this folder and model lends its vectors to unchanged chunks.
    cache.mkdir(parents=True, exist_ok=True)
    older = [p for p in cache.glob(f"{prefix}*.sqlite3") if p != path]
    # Another version of this code's index of the folder, by the same model, lends its
    # vectors by their stored digests and goes too (upgrades left them behind).
    model = encoder.model_id if encoder is not None else None
    others = [p for p in cache.glob(f"{of_folder}*.sqlite3") if p not in older]
    older += [p for p, m in models_of(others).items() if m == model and p != path]
    previous = _newest([p for p in older if p.name.startswith(prefix)])
    build_index(
        folder,
        path,
        encoder,
        previous=previous or _newest(older),
        max_file_bytes=max_file_bytes,
        same_code=previous is not None,
        progress=progress,
    )
    for stale in older:
        stale.unlink(missing_ok=True)
    return IndexFile(path)


def _newest(paths: list[Path]) -> Path | None:
    stamped = []
    for path in paths:
        with contextlib.suppress(OSError):  # removed meanwhile by another worker
            stamped.append((path.stat().st_mtime_ns, path))
    return max(stamped)[1] if stamped else None


def why_not(exc: BaseException) -> str:
    """Why the index could not be written, without a path: `ENOSPC, no space left on device`,
    or SQLite's own short reason (`database or disk is full`)."""
    if isinstance(exc, OSError) and exc.errno:
        return failure_of(exc)
    reason = str(exc)
    return reason if isinstance(exc, sqlite3.Error) and "/" not in reason else type(exc).__name__
