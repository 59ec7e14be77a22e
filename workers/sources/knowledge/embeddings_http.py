"""An OpenAI-compatible `/v1/embeddings` encoder for the knowledge index (httpx, sync).

The production option beside the bundled model: Ollama, vLLM, TEI and most hosted providers
speak this wire shape (`{"model", "input": [...], "encoding_format": "float"}` in,
`{"data": [{"index", "embedding"}], ...}` out; tests/workers/test_embeddings_http.py checks
it against the `openai` SDK's own types). It runs in the index's build thread and in the
query's worker thread, so it is synchronous; the whole call is bounded by
ACI_EMBEDDINGS_TIMEOUT_S, the body by ACI_EMBEDDINGS_MAX_BYTES, every vector's length by
ACI_EMBEDDINGS_DIM (vectors are re-normalised here).

Failures raise `SourceError` with a message that names no URL, host, model or key:

    timeout (per read, or the whole call)   -> TIMEOUT      (retryable)
    connect / network error                 -> UNAVAILABLE  (retryable)
    HTTP 401, 403                           -> AUTHORIZATION
    HTTP 429, 502, 503, 504                 -> UNAVAILABLE  (retryable)
    any other non-2xx                       -> EXECUTION
    body too large, compressed, not JSON of that shape, wrong count or dimension,
    a value that is not a finite number     -> PROJECTION
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final

import httpx
import msgspec

from contracts.status import ErrorCode
from workers.sources.base import SourceError
from workers.sources.knowledge.encoder import normalised
from workers.sources.knowledge.rag_http import check_status

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["EmbeddingsHttpSettings", "HttpEncoder"]

DEFAULT_TIMEOUT_S: Final = 10.0
DEFAULT_MAX_BYTES: Final = 32 * 1024 * 1024
BATCH: Final = 64  # texts per request: a build of many chunks is many bounded calls


class EmbeddingsHttpSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Operator settings of the embedding endpoint."""

    url: str
    model: str
    dim: int
    api_key: str = ""
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_bytes: int = DEFAULT_MAX_BYTES


class _Item(msgspec.Struct):
    index: int
    embedding: list[float]


class _Answer(msgspec.Struct):
    data: list[_Item]


_DECODER: Final = msgspec.json.Decoder(_Answer)


def _projection(what: str) -> SourceError:
    return SourceError(ErrorCode.PROJECTION, f"the embedding service answer {what}")


class HttpEncoder:
    """Sentence vectors from an OpenAI-compatible embeddings endpoint."""

    def __init__(self, settings: EmbeddingsHttpSettings) -> None:
        self.settings = settings
        self.dim = settings.dim
        # The model and dimension name the index; the URL does not (it may carry secrets).
        self.model_id = f"openai-compatible:{settings.model}:{settings.dim}"
        headers = {"Accept-Encoding": "identity"}
        if settings.api_key:
            headers["Authorization"] = f"Bearer {settings.api_key}"
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(settings.timeout_s),
            follow_redirects=False,
            trust_env=False,
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> HttpEncoder:
        """Settings from ACI_EMBEDDINGS_URL, _MODEL, _DIM, _API_KEY, _TIMEOUT_S, _MAX_BYTES."""
        url = env.get("ACI_EMBEDDINGS_URL", "").strip()
        if not url.startswith(("http://", "https://")):
            raise ValueError("ACI_EMBEDDINGS_URL must be an http:// or https:// URL")
        model = env.get("ACI_EMBEDDINGS_MODEL", "").strip()
        if not model:
            raise ValueError("ACI_EMBEDDINGS_MODEL must name the embedding model")
        dim = int(env.get("ACI_EMBEDDINGS_DIM", "").strip() or 0)
        if not 1 <= dim <= 65536:
            raise ValueError("ACI_EMBEDDINGS_DIM must be the model's dimension (1-65536)")
        timeout = float(env.get("ACI_EMBEDDINGS_TIMEOUT_S", "").strip() or DEFAULT_TIMEOUT_S)
        max_bytes = int(env.get("ACI_EMBEDDINGS_MAX_BYTES", "").strip() or DEFAULT_MAX_BYTES)
        if not 0 < timeout <= 300 or max_bytes < 1024:
            raise ValueError(
                "ACI_EMBEDDINGS_TIMEOUT_S must be in (0, 300], ACI_EMBEDDINGS_MAX_BYTES >= 1024"
            )
        return cls(
            EmbeddingsHttpSettings(
                url=url,
                model=model,
                dim=dim,
                api_key=env.get("ACI_EMBEDDINGS_API_KEY", "").strip(),
                timeout_s=timeout,
                max_bytes=max_bytes,
            )
        )

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One unit row per text, in order; `SourceError` on any failure."""
        import numpy as np

        rows: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            rows.extend(self._call(list(texts[start : start + BATCH])))
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalised(np.asarray(rows, dtype=np.float32))

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def _call(self, batch: list[str]) -> list[list[float]]:
        body = {"model": self.settings.model, "input": batch, "encoding_format": "float"}
        deadline = time.monotonic() + self.settings.timeout_s
        try:
            with self._client.stream("POST", self.settings.url, json=body) as response:
                check_status(response.status_code, "embedding service")
                if response.headers.get("Content-Encoding", "identity") != "identity":
                    raise _projection("is compressed, which was not asked for")
                raw = bytearray()
                for piece in response.iter_raw():
                    raw += piece
                    if len(raw) > self.settings.max_bytes:
                        raise _projection("is too large")
                    if time.monotonic() > deadline:
                        raise httpx.ReadTimeout("the whole call took too long")
        except httpx.TimeoutException as exc:
            raise SourceError(
                ErrorCode.TIMEOUT, "the embedding service did not answer in time", retryable=True
            ) from exc
        except httpx.TransportError as exc:
            raise SourceError(
                ErrorCode.UNAVAILABLE, "the embedding service could not be reached", retryable=True
            ) from exc
        return self._vectors(bytes(raw), len(batch))

    def _vectors(self, raw: bytes, count: int) -> list[list[float]]:
        try:
            answer = _DECODER.decode(raw)
        except (msgspec.DecodeError, RecursionError) as exc:
            raise _projection("is not an embeddings response") from exc
        if sorted(item.index for item in answer.data) != list(range(count)):
            raise _projection("does not hold one vector per text")
        rows: list[list[float]] = [[] for _ in range(count)]
        for item in answer.data:
            if len(item.embedding) != self.dim:
                raise _projection("holds a vector of the wrong dimension")
            if not all(math.isfinite(v) for v in item.embedding):
                raise _projection("holds a value that is not a finite number")
            rows[item.index] = item.embedding
        return rows
