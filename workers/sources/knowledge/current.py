"""Whether a hit's chunk is still in its runbook as the folder holds it now.

The index answers from what the folder held when it was built, and a worker looks at the
folder's files again at most every 2 s (then rebuilds, the previous index answering
meanwhile): a runbook deleted or edited since would be shown as it was, its old text as a
verbatim excerpt. Each hit is checked against its file before it is shown: the file is split
as the build splits it (`analysis.split_document`) and the hit's document id (a digest of its
source, place and text) must be among its chunks. A file's ids are kept by its size and
mtime, so a lookup costs one stat(2) per hit while nothing changed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePath
from typing import Any, Final

from workers.sources.knowledge.analysis import split_document
from workers.sources.knowledge.files import DIR_FLAGS, NotIndexed, read_inside

__all__ = ["CurrentChunks", "current_hits"]

_KEPT: Final = 512  # files whose chunk ids are remembered (then forgotten all at once)


class CurrentChunks:
    """The chunk ids each runbook of one folder holds now (thread-safe enough: a race only
    splits a file twice)."""

    def __init__(self, folder: Path, max_file_bytes: int) -> None:
        self._folder, self._max = folder, max_file_bytes
        self._ids: dict[str, tuple[tuple[int, int], frozenset[str]]] = {}

    def holds(self, source: str, document_id: str) -> bool:
        """Whether the runbook `source` (relative to the folder) holds that chunk now."""
        try:
            st = os.lstat(self._folder / source)
        except OSError:
            return False  # deleted (or its folder gone): not shown
        if not stat.S_ISREG(st.st_mode):
            return False
        stamp = (st.st_size, st.st_mtime_ns)
        known = self._ids.get(source)
        if known is None or known[0] != stamp:
            known = (stamp, self._split(source))
            if len(self._ids) >= _KEPT:
                self._ids.clear()
            self._ids[source] = known
        return document_id in known[1]

    def _split(self, source: str) -> frozenset[str]:
        try:
            root = os.open(self._folder, DIR_FLAGS)
        except OSError:
            return frozenset()
        try:
            text = read_inside(root, PurePath(source), self._max)
        except NotIndexed:
            return frozenset()  # over the cap, unreadable or no text now: the build skips it too
        finally:
            os.close(root)
        return frozenset(c.document_id for c in split_document(text or "", source))


def current_hits(
    current: CurrentChunks, hits: list[dict[str, Any]], level: Any
) -> tuple[list[dict[str, Any]], Any, bool]:
    """The hits the folder still holds, their relevance level (none when the top hit went: it
    was the top hit's), and whether any went."""
    shown = [h for h in hits if current.holds(h["source"], h["documentId"])]
    if len(shown) == len(hits):
        return hits, level, False
    return shown, level if shown and shown[0] is hits[0] else None, True
