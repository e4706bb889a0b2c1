"""`POST /v1/embeddings` in OpenAI's shape (the openai SDK's `types/embedding_create_params.py`
and `create_embedding_response.py`)."""

from typing import Literal

from pydantic import Field

from .common import ApiModel


class EmbeddingsRequest(ApiModel):
    #: Text, or a list of texts; token arrays (lists of ints) are refused with a 400.
    input: str | list[str] | list[int] | list[list[int]]
    model: str
    dimensions: int | None = Field(default=None, ge=1)
    encoding_format: Literal["float", "base64"] = "float"
    user: str | None = None


class Embedding(ApiModel):
    object: Literal["embedding"] = "embedding"
    index: int
    #: Floats, or (encoding_format base64) the little-endian float32 bytes in base64.
    embedding: list[float] | str


class EmbeddingUsage(ApiModel):
    prompt_tokens: int
    total_tokens: int


class EmbeddingsResponse(ApiModel):
    object: Literal["list"] = "list"
    data: list[Embedding]
    model: str
    usage: EmbeddingUsage
