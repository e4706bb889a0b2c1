"""Vectors: the embedders and the vector index that files, vector stores and file search use.

Two ports, each with the providers behind it chosen by configuration (`Settings`):

- `Embedder`: text to vectors. `offline` (lexical, deterministic: `offline.py`), `bedrock`
  (Titan Text Embeddings V2: `bedrock.py`), `openai` (an OpenAI-compatible `/v1/embeddings`:
  `openai_compat.py`).
- `VectorIndex`: one index per (tenant, vector store) in Amazon S3 Vectors (`s3vectors.py`);
  `make run` points the same adapter at a local peer speaking the S3 Vectors protocol
  (functions/local/vector_peer.py).

    embedder = build_embedder(settings)
    index = build_vector_index(settings)
    index.ensure(tenant, store_id, embedder.dimension)
    index.put(tenant, store_id, [VectorRecord(key, vector, metadata)])
    index.query(tenant, store_id, embedder.embed([question])[0], top_k=5,
                filters={"type": "eq", "key": "author", "value": "ann"})
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..settings import Settings


@dataclass(frozen=True)
class VectorRecord:
    #: Unique in its store (the files API's: f"{file_id}#{chunk_index:06d}"); a put with a key
    #: already stored replaces that vector.
    key: str
    vector: list[float]
    #: Anything JSON (the chunk's text, file id, filename, index...), returned as given by a
    #: query; `attributes` (the file's attributes: strings, numbers, booleans) is what
    #: `filters` apply to.
    metadata: dict[str, Any]


@dataclass(frozen=True)
class VectorMatch:
    key: str
    score: float  # similarity in [0, 1], higher is closer (1 - cosine distance)
    metadata: dict[str, Any]


class Embedder(Protocol):
    model: str
    dimension: int

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order; raises UpstreamFailed/UpstreamTimeout when the
        provider fails. Callers send bounded batches (`MAX_BATCH`)."""
        ...


class VectorIndex(Protocol):
    def ensure(self, tenant: str, store_id: str, dimension: int) -> None: ...
    def put(self, tenant: str, store_id: str, records: list[VectorRecord]) -> None: ...
    def query(
        self,
        tenant: str,
        store_id: str,
        vector: list[float],
        top_k: int,
        filters: dict[str, Any] | None = None,
    ) -> list[VectorMatch]: ...
    def delete(self, tenant: str, store_id: str, keys: list[str]) -> None: ...
    def drop(self, tenant: str, store_id: str) -> None: ...


#: The most texts one `embed` call should be given (OpenAI's own bound on one request).
MAX_BATCH = 2048

#: Each provider's model and dimension when EMBEDDING_MODEL / EMBEDDING_DIMENSION are unset.
DEFAULTS = {
    "offline": ("offline-lexical", 256),
    "bedrock": ("amazon.titan-embed-text-v2:0", 1024),
    "openai": ("text-embedding-3-small", 1536),
}


def embedding_model(settings: Settings) -> tuple[str, str, int]:
    """(provider, model, dimension) of the configured embedder, its defaults filled in."""
    provider = settings.embedding_provider
    if provider not in DEFAULTS:
        raise ValueError(
            f"EMBEDDING_PROVIDER={provider!r} is not known: offline, bedrock or openai"
        )
    model, dimension = DEFAULTS[provider]
    return provider, settings.embedding_model or model, settings.embedding_dimension or dimension


def build_embedder(settings: Settings) -> Embedder:
    """The configured embedder (its SDKs imported only now)."""
    provider, model, dimension = embedding_model(settings)
    if provider == "offline":
        from .offline import OfflineEmbedder

        return OfflineEmbedder(dimension, model)
    if provider == "bedrock":
        from .bedrock import TitanEmbedder

        return TitanEmbedder(
            model,
            dimension,
            timeout=settings.embedding_timeout_seconds,
            concurrency=settings.embedding_concurrency,
        )
    from .openai_compat import OpenAICompatEmbedder

    base_url = settings.embedding_base_url or settings.openai_base_url
    if not base_url:
        raise ValueError("EMBEDDING_PROVIDER=openai needs EMBEDDING_BASE_URL (or OPENAI_BASE_URL)")
    key = settings.embedding_api_key
    secret = settings.embedding_api_key_secret_id
    if key is None and secret is None:
        key, secret = settings.openai_api_key, settings.openai_api_key_secret_id
    read_key = None
    if key is None and secret:
        from functools import partial

        from ..secrets import model_api_key

        read_key = partial(model_api_key, secret)
    return OpenAICompatEmbedder(
        base_url,
        model,
        dimension,
        api_key=key,
        read_key=read_key,
        send_dimensions=settings.embedding_dimension is not None,
        timeout=settings.embedding_timeout_seconds,
    )


def build_vector_index(settings: Settings, client: Any = None) -> VectorIndex:
    """The S3 Vectors index adapter on the configured vector bucket (`client`: an s3vectors
    client, e.g. one bound to moto or the local peer; by default the application's)."""
    from .s3vectors import S3VectorIndex

    if client is None:
        from .. import aws

        client = aws.client("s3vectors", read_timeout=10, attempts=4)
    return S3VectorIndex(client, settings.vector_bucket_name)
