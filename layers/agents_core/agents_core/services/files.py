"""Files and vector stores (OpenAI's Files and Vector stores APIs), and the search over them
that the search route, `file_search` and `builtin::rag` share.

A file's bytes are in the files bucket at `tenants/<escaped tenant>/files/<file id>` (SSE), its
record in the table. Attaching a file to a vector store writes its record `in_progress` with a
fresh token and sends `{"vector_store_id", "file_id", "token"}` to the ingestion queue, the
tenant as the message attribute `tenant` (services/ingest.py does the rest): a message must
carry the token of the record it names under that tenant, so a sender can pick neither.

Deletes cascade: detaching a file deletes its vectors; deleting a store deletes its file
records and drops its index; deleting a file detaches it from every store holding it (its
vectors go), then deletes its bytes and its record.

    results = services.vector_stores.search(tenant, ["vs_..."], "query", max_results=5)
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from .. import metrics
from ..api.files import (
    AutoChunkingStrategy,
    CreateVectorStoreRequest,
    FileObject,
    LastError,
    StaticChunking,
    StaticChunkingStrategy,
    StaticChunkingStrategyObject,
    VectorStoreFileObject,
    VectorStoreObject,
)
from ..errors import InvalidRequest, NotFound, TooLarge, Unavailable
from ..ids import new_id
from ..log import logger
from ..store import keys
from .documents import AUTO_MAX_TOKENS, AUTO_OVERLAP_TOKENS

TENANT_ATTRIBUTE = "tenant"
#: The tag of an object uploaded by a presigned URL and not completed yet: the files bucket's
#: lifecycle rule deletes such objects after a day.
PENDING_TAG = "upload=pending"


@dataclass(frozen=True)
class SearchResult:
    file_id: str
    filename: str
    score: float
    text: str
    attributes: dict[str, Any] = field(default_factory=dict)
    vector_store_id: str = ""


def chunk_key(file_id: str, chunk: int) -> str:
    """A chunk's vector key: a retried ingestion overwrites its vectors, never adds to them."""
    return f"{file_id}#{chunk:06d}"


def _id(prefix: str) -> str:
    return prefix + new_id().replace("-", "")  # time-ordered: lists sort by creation


class FileService:
    def __init__(self, services: Any) -> None:
        self.services = services
        self.settings = services.settings
        self.store = services.file_store

    @property
    def s3(self) -> Any:
        return self.services.s3

    def upload(self, tenant: str, filename: str, purpose: str, data: bytes) -> FileObject:
        file = FileObject(
            id=_id("file-"),
            bytes=len(data),
            created_at=int(time.time()),
            filename=filename,
            purpose=purpose,  # type: ignore[arg-type]  (validated by the route)
        )
        self.s3.put_object(
            Bucket=self.settings.files_bucket,
            Key=keys.file_object_key(tenant, file.id),
            Body=data,
            ServerSideEncryption="AES256",
        )
        self.store.put_file(tenant, file)
        metrics.count("FilesUploaded")
        return file

    def start_upload(
        self, tenant: str, filename: str, purpose: str, size: int
    ) -> tuple[FileObject, str, dict[str, str], int]:
        """A presigned PUT straight to the file's S3 key (an upload bigger than a request can
        carry): (the file to be, the URL, the headers to send, when the URL expires). The
        object is tagged `pending` until completed: the bucket's lifecycle deletes an
        upload never completed."""
        limit = self.settings.upload_max_bytes
        if size > limit:
            raise TooLarge(f"A file may hold at most {limit} bytes")
        file = FileObject(
            id=_id("file-"),
            bytes=size,
            created_at=int(time.time()),
            filename=filename.rsplit("/", 1)[-1] or "upload",
            purpose=purpose,  # type: ignore[arg-type]
        )
        seconds = self.settings.upload_url_seconds
        headers = {"x-amz-server-side-encryption": "AES256", "x-amz-tagging": PENDING_TAG}
        url = self.s3.generate_presigned_url(
            "put_object",
            Params={
                "Bucket": self.settings.files_bucket,
                "Key": keys.file_object_key(tenant, file.id),
                "ServerSideEncryption": "AES256",
                "Tagging": PENDING_TAG,
            },
            ExpiresIn=seconds,
        )
        expires_at = int(time.time()) + seconds
        self.store.put_upload(tenant, file, expires_at)
        return file, url, headers, expires_at

    def complete_upload(self, tenant: str, file_id: str) -> FileObject:
        """The uploaded object checked (there, of the size announced) and made a file."""
        from botocore.exceptions import ClientError

        done = self.store.get_file(tenant, file_id)
        if done is not None:
            return done  # completed already
        file = self.store.get_upload(tenant, file_id)
        if file is None:
            raise NotFound(f"No upload found with id {file_id}")
        bucket, key = self.settings.files_bucket, keys.file_object_key(tenant, file_id)
        try:
            size = self.s3.head_object(Bucket=bucket, Key=key)["ContentLength"]
        except ClientError as err:
            if err.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
                raise InvalidRequest("Nothing was uploaded to the upload's URL yet") from None
            raise
        if size != file.bytes:
            raise InvalidRequest(f"{size} bytes were uploaded, not the {file.bytes} announced")
        self.s3.delete_object_tagging(Bucket=bucket, Key=key)  # kept by the lifecycle now
        if not self.store.complete_upload(tenant, file):
            found = self.store.get_file(tenant, file_id)
            if found is None:
                raise NotFound(f"No upload found with id {file_id}")
            return found
        metrics.count("FilesUploaded")
        return file

    def get(self, tenant: str, file_id: str) -> FileObject:
        file = self.store.get_file(tenant, file_id)
        if file is None:
            raise NotFound(f"No file found with id {file_id}")
        return file

    def content(self, tenant: str, file_id: str) -> tuple[FileObject, bytes]:
        file = self.get(tenant, file_id)
        return file, self.read(tenant, file_id)

    def read(self, tenant: str, file_id: str) -> bytes:
        obj = self.s3.get_object(
            Bucket=self.settings.files_bucket, Key=keys.file_object_key(tenant, file_id)
        )
        return obj["Body"].read()

    def delete(self, tenant: str, file_id: str) -> None:
        """Out of every store holding it (vectors and all), then its bytes and its record."""
        self.get(tenant, file_id)
        if not self.store.mark_file_deleting(tenant, file_id):
            raise NotFound(f"No file found with id {file_id}")
        stores = self.services.vector_stores
        for store_id in self.store.file_store_ids(tenant, file_id):
            stores.remove_file(tenant, store_id, file_id)
        self.s3.delete_object(
            Bucket=self.settings.files_bucket, Key=keys.file_object_key(tenant, file_id)
        )
        self.store.delete_file(tenant, file_id)


def chunking_of(
    strategy: AutoChunkingStrategy | StaticChunkingStrategy | None,
) -> StaticChunkingStrategyObject:
    """The static strategy a request's (auto: 800 tokens, 400 overlapping) comes to."""
    if isinstance(strategy, StaticChunkingStrategy):
        static = strategy.static
        if static.chunk_overlap_tokens > static.max_chunk_size_tokens // 2:
            raise InvalidRequest(
                "chunk_overlap_tokens must not exceed half of max_chunk_size_tokens"
            )
        return StaticChunkingStrategyObject(static=static)
    return StaticChunkingStrategyObject(
        static=StaticChunking(
            max_chunk_size_tokens=AUTO_MAX_TOKENS, chunk_overlap_tokens=AUTO_OVERLAP_TOKENS
        )
    )


def _check_attributes(attributes: dict[str, Any] | None) -> None:
    for name, value in (attributes or {}).items():
        if len(name) > 64:
            raise InvalidRequest(f"attribute name {name[:20]!r}... is longer than 64 characters")
        if isinstance(value, str) and len(value) > 512:
            raise InvalidRequest(f"attribute {name!r} is longer than 512 characters")


class VectorStoreService:
    def __init__(self, services: Any) -> None:
        self.services = services
        self.settings = services.settings
        self.store = services.file_store

    # --- stores -------------------------------------------------------------------------

    def create(self, tenant: str, body: CreateVectorStoreRequest) -> VectorStoreObject:
        chunking = chunking_of(body.chunking_strategy)
        files = [self.services.files.get(tenant, fid) for fid in dict.fromkeys(body.file_ids)]
        store = VectorStoreObject(
            id=_id("vs_"),
            created_at=int(time.time()),
            name=body.name or "",
            metadata=body.metadata or {},
            expires_after=body.expires_after,
            file_counts={},  # type: ignore[arg-type]
            status="completed",
        )
        self.store.create_store(tenant, store)
        for file in files:
            self._attach(tenant, store.id, file, None, chunking)
        return self.get(tenant, store.id)

    def get(self, tenant: str, store_id: str) -> VectorStoreObject:
        store = self.store.get_store(tenant, store_id)
        if store is None:
            raise NotFound(f"No vector store found with id {store_id}")
        return store

    def list(
        self, tenant: str, after: str | None, limit: int, order: str
    ) -> tuple[list[VectorStoreObject], bool]:
        return self.store.list_stores(tenant, after, limit, order)

    def update(self, tenant: str, store_id: str, changes: dict[str, Any]) -> VectorStoreObject:
        return self.store.update_store(tenant, store_id, changes)

    def delete(self, tenant: str, store_id: str) -> None:
        """Its file records go, then its index (every vector), then its head."""
        self.get(tenant, store_id)
        if not self.store.mark_store_deleting(tenant, store_id):
            raise NotFound(f"No vector store found with id {store_id}")
        self.store.remove_store_files(tenant, store_id)
        self.services.vector_index.drop(tenant, store_id)
        self.store.delete_store(tenant, store_id)

    # --- a store's files ----------------------------------------------------------------

    def attach(
        self,
        tenant: str,
        store_id: str,
        file_id: str,
        attributes: dict[str, Any] | None,
        strategy: AutoChunkingStrategy | StaticChunkingStrategy | None,
    ) -> VectorStoreFileObject:
        chunking = chunking_of(strategy)
        _check_attributes(attributes)
        self.get(tenant, store_id)
        file = self.services.files.get(tenant, file_id)
        return self._attach(tenant, store_id, file, attributes, chunking)

    def _attach(
        self,
        tenant: str,
        store_id: str,
        file: FileObject,
        attributes: dict[str, Any] | None,
        chunking: StaticChunkingStrategyObject,
    ) -> VectorStoreFileObject:
        token = secrets.token_urlsafe(24)
        record, new = self.store.attach(tenant, store_id, file, attributes, chunking, token)
        if not new:
            return record
        message = {"vector_store_id": store_id, "file_id": file.id, "token": token}
        try:
            self.services.sqs.send_message(
                QueueUrl=self.queue_url,
                MessageBody=json.dumps(message),
                MessageAttributes={TENANT_ATTRIBUTE: {"DataType": "String", "StringValue": tenant}},
            )
        except Exception as err:
            logger.exception("ingestion not queued", extra={"file_id": file.id})
            self.store.finish(
                tenant,
                store_id,
                file.id,
                token,
                "failed",
                last_error=LastError(code="server_error", message="the ingestion queue failed"),
            )
            raise Unavailable("The ingestion queue is unavailable; the file is failed") from err
        metrics.count("FilesQueuedForIngestion")
        return record

    def file(self, tenant: str, store_id: str, file_id: str) -> VectorStoreFileObject:
        self.get(tenant, store_id)
        record = self.store.store_file(tenant, store_id, file_id)
        if record is None:
            raise NotFound(f"No file {file_id} in vector store {store_id}")
        return record

    def files(
        self,
        tenant: str,
        store_id: str,
        after: str | None,
        limit: int,
        order: str,
        status: str | None,
    ) -> tuple[list[VectorStoreFileObject], bool]:
        self.get(tenant, store_id)
        return self.store.list_store_files(tenant, store_id, after, limit, order, status)

    def detach(self, tenant: str, store_id: str, file_id: str) -> None:
        self.get(tenant, store_id)
        if not self.remove_file(tenant, store_id, file_id):
            raise NotFound(f"No file {file_id} in vector store {store_id}")

    def remove_file(self, tenant: str, store_id: str, file_id: str) -> bool:
        """Detach a file and delete its vectors (an ingestion still running deletes its own
        when it finds its record gone: services/ingest.py)."""
        item = self.store.detach(tenant, store_id, file_id)
        if item is None:
            return False
        chunks = int(item.get("chunks", {"N": "0"})["N"])
        if chunks:
            self.services.vector_index.delete(
                tenant, store_id, [chunk_key(file_id, n) for n in range(chunks)]
            )
        return True

    # --- search -------------------------------------------------------------------------

    def search(
        self,
        tenant: str,
        vector_store_ids: list[str],
        query: str | list[str],
        max_results: int = 10,
        filters: dict[str, Any] | None = None,
        score_threshold: float | None = None,
    ) -> list[SearchResult]:
        """The best chunks of the stores for the query (each text of a list query searched,
        a chunk's best score kept), best first; NotFound for a store the tenant lacks."""
        queries = [query] if isinstance(query, str) else list(query)
        queries = [q for q in queries if q.strip()]
        if not queries:
            raise InvalidRequest("`query` must hold some text")
        for store_id in vector_store_ids:
            self.get(tenant, store_id)
        vectors = self.services.embedder.embed(queries)
        best: dict[tuple[str, str], SearchResult] = {}
        for store_id in vector_store_ids:
            for vector in vectors:
                for match in self.services.vector_index.query(
                    tenant, store_id, vector, max_results, filters
                ):
                    if score_threshold is not None and match.score < score_threshold:
                        continue
                    found = best.get((store_id, match.key))
                    if found is None or match.score > found.score:
                        meta = match.metadata
                        best[(store_id, match.key)] = SearchResult(
                            file_id=str(meta.get("file_id", "")),
                            filename=str(meta.get("filename", "")),
                            score=match.score,
                            text=str(meta.get("text", "")),
                            attributes=dict(meta.get("attributes") or {}),
                            vector_store_id=store_id,
                        )
        ranked = sorted(best.values(), key=lambda r: r.score, reverse=True)
        return ranked[:max_results]

    # --- the queue ----------------------------------------------------------------------

    @property
    def queue_url(self) -> str:
        settings = self.settings
        return self.services.queue_url(settings.ingest_queue_url, settings.ingest_queue_name)
