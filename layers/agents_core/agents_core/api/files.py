"""The Files and Vector stores APIs in OpenAI's shape (the openai SDK's `types/file_object.py`,
`types/vector_store*.py`, `types/vector_stores/`)."""

from typing import Any, Literal

from pydantic import Field

from .common import ApiModel

FilePurpose = Literal[
    "assistants",
    "assistants_output",
    "batch",
    "batch_output",
    "fine-tune",
    "fine-tune-results",
    "vision",
    "user_data",
]
#: A file's or a result's attributes: what search `filters` apply to.
Attributes = dict[str, str | float | bool]


class FileObject(ApiModel):
    id: str
    object: Literal["file"] = "file"
    bytes: int
    created_at: int
    filename: str
    purpose: FilePurpose
    status: Literal["uploaded", "processed", "error"] = "processed"
    expires_at: int | None = None
    status_details: str | None = None


class ListFilesResponse(ApiModel):
    object: Literal["list"] = "list"
    data: list[FileObject]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class CreateUploadRequest(ApiModel):
    """A presigned upload (this server's extension): the file goes straight to S3."""

    filename: str = Field(min_length=1, max_length=255)
    purpose: FilePurpose
    bytes: int = Field(ge=1)


class UploadObject(ApiModel):
    id: str
    object: Literal["file.upload"] = "file.upload"
    filename: str
    purpose: FilePurpose
    bytes: int
    #: PUT the bytes there, with exactly `headers`, before `expires_at`; then POST
    #: `/v1/files/uploads/{id}/complete`.
    upload_url: str
    method: Literal["PUT"] = "PUT"
    headers: dict[str, str]
    expires_at: int


class FileDeleted(ApiModel):
    id: str
    object: Literal["file"] = "file"
    deleted: bool = True


# --- vector stores ------------------------------------------------------------------------


class StaticChunking(ApiModel):
    max_chunk_size_tokens: int = Field(ge=100, le=4096)
    chunk_overlap_tokens: int = Field(ge=0)


class StaticChunkingStrategy(ApiModel):
    type: Literal["static"] = "static"
    static: StaticChunking


class AutoChunkingStrategy(ApiModel):
    type: Literal["auto"] = "auto"


ChunkingStrategyParam = AutoChunkingStrategy | StaticChunkingStrategy


class ExpiresAfter(ApiModel):
    anchor: Literal["last_active_at"] = "last_active_at"
    days: int = Field(ge=1, le=365)


class FileCounts(ApiModel):
    cancelled: int = 0
    completed: int = 0
    failed: int = 0
    in_progress: int = 0
    total: int = 0


class VectorStoreObject(ApiModel):
    id: str
    object: Literal["vector_store"] = "vector_store"
    created_at: int
    name: str
    usage_bytes: int = 0
    file_counts: FileCounts
    status: Literal["expired", "in_progress", "completed"]
    expires_after: ExpiresAfter | None = None
    expires_at: int | None = None
    last_active_at: int | None = None
    metadata: dict[str, str] | None = None


class CreateVectorStoreRequest(ApiModel):
    name: str | None = Field(default=None, max_length=256)
    file_ids: list[str] = Field(default_factory=list, max_length=500)
    metadata: dict[str, str] | None = None
    chunking_strategy: ChunkingStrategyParam | None = Field(default=None, discriminator="type")
    expires_after: ExpiresAfter | None = None
    description: str | None = None


class UpdateVectorStoreRequest(ApiModel):
    name: str | None = Field(default=None, max_length=256)
    metadata: dict[str, str] | None = None
    expires_after: ExpiresAfter | None = None


class ListVectorStoresResponse(ApiModel):
    object: Literal["list"] = "list"
    data: list[VectorStoreObject]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class VectorStoreDeleted(ApiModel):
    id: str
    object: Literal["vector_store.deleted"] = "vector_store.deleted"
    deleted: bool = True


class LastError(ApiModel):
    code: Literal["server_error", "unsupported_file", "invalid_file"]
    message: str


class StaticChunkingStrategyObject(ApiModel):
    type: Literal["static"] = "static"
    static: StaticChunking


class VectorStoreFileObject(ApiModel):
    id: str
    object: Literal["vector_store.file"] = "vector_store.file"
    created_at: int
    vector_store_id: str
    status: Literal["in_progress", "completed", "cancelled", "failed"]
    usage_bytes: int = 0
    last_error: LastError | None = None
    attributes: Attributes | None = None
    chunking_strategy: StaticChunkingStrategyObject | None = None


class AttachFileRequest(ApiModel):
    file_id: str = Field(pattern=r"^[A-Za-z0-9_-]{1,128}$")
    attributes: Attributes | None = Field(default=None, max_length=16)
    chunking_strategy: ChunkingStrategyParam | None = Field(default=None, discriminator="type")


class ListVectorStoreFilesResponse(ApiModel):
    object: Literal["list"] = "list"
    data: list[VectorStoreFileObject]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class VectorStoreFileDeleted(ApiModel):
    id: str
    object: Literal["vector_store.file.deleted"] = "vector_store.file.deleted"
    deleted: bool = True


class RankingOptions(ApiModel):
    ranker: str | None = None
    score_threshold: float | None = Field(default=None, ge=0, le=1)


class SearchRequest(ApiModel):
    query: str | list[str]
    max_num_results: int = Field(default=10, ge=1, le=50)
    #: An OpenAI attribute filter (comparison or compound), checked by the vector index.
    filters: dict[str, Any] | None = None
    ranking_options: RankingOptions | None = None
    rewrite_query: bool = False


class SearchContent(ApiModel):
    type: Literal["text"] = "text"
    text: str


class SearchResultObject(ApiModel):
    file_id: str
    filename: str
    score: float
    attributes: Attributes | None = None
    content: list[SearchContent]


class SearchResultsPage(ApiModel):
    object: Literal["vector_store.search_results.page"] = "vector_store.search_results.page"
    search_query: list[str]
    data: list[SearchResultObject]
    has_more: bool = False
    next_page: str | None = None
