"""`POST /v1/embeddings` (also under `/v1/openai/v1/`): OpenAI's embeddings API on the
configured embedder (agents_core.vectors), the one that embeds files and searches."""

from __future__ import annotations

import base64
import math
import struct

from fastapi import APIRouter, Response

from ..api.embeddings import Embedding, EmbeddingsRequest, EmbeddingsResponse, EmbeddingUsage
from ..errors import InvalidRequest, NotFound, TooLarge
from ..vectors import MAX_BATCH
from .common import json_response
from .deps import Svc, Tenant

router = APIRouter(tags=["Embeddings"])

#: One input's length (Titan Text Embeddings V2 takes 50,000 characters) and a request's.
MAX_INPUT_CHARS = 50_000
MAX_REQUEST_CHARS = 1_000_000


def _embeddings(body: EmbeddingsRequest, svc: Svc) -> Response:
    texts = [body.input] if isinstance(body.input, str) else list(body.input)
    if any(not isinstance(t, str) for t in texts):
        raise InvalidRequest("token arrays are not supported: send `input` as text")
    if not texts:
        raise InvalidRequest("`input` must not be empty")
    if len(texts) > MAX_BATCH:
        raise InvalidRequest(f"`input` may hold at most {MAX_BATCH} texts")
    for position, text in enumerate(texts):
        if not text:
            raise InvalidRequest(f"input[{position}] is an empty string")
        if len(text) > MAX_INPUT_CHARS:
            raise InvalidRequest(f"input[{position}] is longer than {MAX_INPUT_CHARS} characters")
    if sum(map(len, texts)) > MAX_REQUEST_CHARS:
        raise TooLarge(f"`input` may hold at most {MAX_REQUEST_CHARS} characters in all")
    embedder = svc.embedder
    if body.model != embedder.model:
        raise NotFound(
            f"The model `{body.model}` does not exist: this deployment embeds with"
            f" `{embedder.model}`"
        )
    if body.dimensions is not None and body.dimensions != embedder.dimension:
        raise InvalidRequest(
            f"`{embedder.model}` embeds in {embedder.dimension} dimensions here, not"
            f" {body.dimensions}"
        )
    vectors = embedder.embed(texts)
    # Estimated at 4 characters a token, as the context window is (no tokenizer at hand).
    tokens = sum(max(1, math.ceil(len(t) / 4)) for t in texts)
    data = [
        Embedding(index=i, embedding=_encoded(v) if body.encoding_format == "base64" else v)
        for i, v in enumerate(vectors)
    ]
    return json_response(
        EmbeddingsResponse(
            data=data,
            model=embedder.model,
            usage=EmbeddingUsage(prompt_tokens=tokens, total_tokens=tokens),
        )
    )


def _encoded(vector: list[float]) -> str:
    """OpenAI's base64 encoding: the vector as little-endian float32 bytes."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()


# Sync routes: FastAPI runs them in its thread pool, where the embedder's blocking calls belong.
@router.post("/v1/embeddings", responses={200: {"model": EmbeddingsResponse}})
def create_embeddings(body: EmbeddingsRequest, tenant: Tenant, svc: Svc) -> Response:
    return _embeddings(body, svc)


@router.post("/v1/openai/v1/embeddings", responses={200: {"model": EmbeddingsResponse}})
def create_openai_embeddings(body: EmbeddingsRequest, tenant: Tenant, svc: Svc) -> Response:
    return _embeddings(body, svc)
