"""The vector index on Amazon S3 Vectors: one index per (tenant, vector store) in one vector
bucket, so a tenant's vectors are apart from another's by structure, not by a filter.

Each vector's metadata holds the caller's metadata whole, as JSON under a non-filterable key
(`payload`: chunk text and all, within S3 Vectors' 40 KB a vector), plus the filterable keys
queries filter on: `file_id` and each file attribute under `attribute_key(name)` (within the
2 KB of filterable metadata a vector). Limits: Amazon S3 user guide, "Limitations and
restrictions" of S3 Vectors (500 vectors a PutVectors/DeleteVectors call, 20 MiB a request,
top K at most 100).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from typing import Any

from ..errors import InvalidRequest, NotFound, TooLarge, Unavailable
from . import VectorMatch, VectorRecord
from .filters import attribute_key, to_s3_filter

PAYLOAD_KEY = "payload"
FILE_ID_KEY = "file_id"
MAX_BATCH = 500
MAX_REQUEST_BYTES = 16 * 1024 * 1024  # below the 20 MiB a request, with room for JSON overhead
MAX_TOP_K = 100
MAX_FILTERABLE_BYTES = 2048
MAX_METADATA_BYTES = 40 * 1024

_UNAVAILABLE = {
    "TooManyRequestsException",
    "ServiceUnavailableException",
    "InternalServerException",
    "RequestTimeoutException",
}


def index_name(tenant: str, store_id: str) -> str:
    """A valid index name (3-63 characters: lowercase letters, digits, hyphens, dots; a letter
    or digit at each end) for any tenant and store id: `t<tenant hash>-<store hash>`, so an
    operator can list a tenant's indexes by prefix."""
    tenant_part = hashlib.sha256(tenant.encode()).hexdigest()[:20]
    store_part = hashlib.sha256(store_id.encode()).hexdigest()[:32]
    return f"t{tenant_part}-{store_part}"


def stored_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """What S3 Vectors stores for a record's metadata (InvalidRequest/TooLarge past its limits)."""
    try:
        payload = json.dumps(metadata, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as err:
        raise InvalidRequest(f"vector metadata must be JSON: {err}") from err
    filterable: dict[str, Any] = {}
    if isinstance(metadata.get(FILE_ID_KEY), str):
        filterable[FILE_ID_KEY] = metadata[FILE_ID_KEY]
    attributes = metadata.get("attributes") or {}
    if not isinstance(attributes, dict):
        raise InvalidRequest("`attributes` must be an object")
    for name, value in attributes.items():
        if not (isinstance(value, str | bool | int | float)):
            raise InvalidRequest(f"attribute {name!r} must be a string, number or boolean")
        filterable[attribute_key(name)] = value
    size = len(json.dumps(filterable, separators=(",", ":"), ensure_ascii=False).encode())
    if size > MAX_FILTERABLE_BYTES:
        raise InvalidRequest(
            f"the file's attributes take {size} bytes; S3 Vectors filters on at most"
            f" {MAX_FILTERABLE_BYTES} bytes a vector"
        )
    if size + len(payload.encode()) > MAX_METADATA_BYTES:
        raise TooLarge(f"a chunk's metadata may take at most {MAX_METADATA_BYTES} bytes")
    return {**filterable, PAYLOAD_KEY: payload}


class S3VectorIndex:
    def __init__(self, client: Any, bucket: str) -> None:
        self._client = client
        self.bucket = bucket
        self._ensured: set[str] = set()

    def ensure_bucket(self) -> None:
        """Create the vector bucket if missing (the local server; a stack has its own)."""
        try:
            self._client.get_vector_bucket(vectorBucketName=self.bucket)
        except self._client.exceptions.NotFoundException:
            with contextlib.suppress(self._client.exceptions.ConflictException):
                self._client.create_vector_bucket(vectorBucketName=self.bucket)

    def ensure(self, tenant: str, store_id: str, dimension: int) -> None:
        name = index_name(tenant, store_id)
        if name in self._ensured:
            return
        try:
            found = self._call("get_index", vectorBucketName=self.bucket, indexName=name)
        except NotFound:
            # Conflict: created meanwhile by another ingestion.
            with contextlib.suppress(_Conflict):
                self._call(
                    "create_index",
                    vectorBucketName=self.bucket,
                    indexName=name,
                    dataType="float32",
                    dimension=dimension,
                    distanceMetric="cosine",
                    metadataConfiguration={"nonFilterableMetadataKeys": [PAYLOAD_KEY]},
                )
        else:
            existing = found["index"]["dimension"]
            if existing != dimension:
                raise InvalidRequest(
                    f"vector store {store_id} holds {existing}-dimension vectors; the embedding"
                    f" model makes {dimension}"
                )
        self._ensured.add(name)

    def put(self, tenant: str, store_id: str, records: list[VectorRecord]) -> None:
        name = index_name(tenant, store_id)
        latest = {r.key: r for r in records}  # S3 Vectors refuses a batch repeating a key
        batch: list[dict[str, Any]] = []
        size = 0
        for record in latest.values():
            vector = {
                "key": record.key,
                "data": {"float32": [float(v) for v in record.vector]},
                "metadata": stored_metadata(record.metadata),
            }
            weight = len(json.dumps(vector))
            if batch and (len(batch) == MAX_BATCH or size + weight > MAX_REQUEST_BYTES):
                self._put(name, batch)
                batch, size = [], 0
            batch.append(vector)
            size += weight
        if batch:
            self._put(name, batch)

    def _put(self, name: str, vectors: list[dict[str, Any]]) -> None:
        self._call("put_vectors", vectorBucketName=self.bucket, indexName=name, vectors=vectors)

    def query(
        self,
        tenant: str,
        store_id: str,
        vector: list[float],
        top_k: int,
        filters: dict[str, Any] | None = None,
    ) -> list[VectorMatch]:
        params: dict[str, Any] = {
            "vectorBucketName": self.bucket,
            "indexName": index_name(tenant, store_id),
            "topK": max(1, min(MAX_TOP_K, top_k)),
            "queryVector": {"float32": [float(v) for v in vector]},
            "returnMetadata": True,
            "returnDistance": True,
        }
        if filters:
            params["filter"] = to_s3_filter(filters)
        try:
            found = self._call("query_vectors", **params)
        except NotFound:  # a store nothing was ingested into yet has no index
            return []
        matches = []
        for hit in found.get("vectors", []):
            metadata = hit.get("metadata") or {}
            try:
                original = json.loads(metadata[PAYLOAD_KEY])
            except (KeyError, TypeError, ValueError):
                original = {k: v for k, v in metadata.items() if k != PAYLOAD_KEY}
            score = max(0.0, min(1.0, 1.0 - float(hit.get("distance", 1.0))))
            matches.append(VectorMatch(hit["key"], score, original))
        return matches

    def delete(self, tenant: str, store_id: str, keys: list[str]) -> None:
        name = index_name(tenant, store_id)
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), MAX_BATCH):
            try:
                self._call(
                    "delete_vectors",
                    vectorBucketName=self.bucket,
                    indexName=name,
                    keys=unique[start : start + MAX_BATCH],
                )
            except NotFound:
                return

    def drop(self, tenant: str, store_id: str) -> None:
        name = index_name(tenant, store_id)
        self._ensured.discard(name)
        with contextlib.suppress(NotFound):
            self._call("delete_index", vectorBucketName=self.bucket, indexName=name)

    def _call(self, operation: str, **params: Any) -> Any:
        """One S3 Vectors call, its failures in the service's error kinds."""
        from botocore.exceptions import ClientError

        try:
            return getattr(self._client, operation)(**params)
        except ClientError as err:
            error = err.response.get("Error", {})
            code, message = error.get("Code", ""), error.get("Message", "")
            if code == "NotFoundException":
                raise NotFound(f"vector index not found: {message}") from err
            if code == "ConflictException":
                raise _Conflict(message) from err
            if code == "ValidationException":
                raise InvalidRequest(f"S3 Vectors refused {operation}: {message}") from err
            if code in _UNAVAILABLE:
                raise Unavailable(f"S3 Vectors is unavailable ({code}): retry later") from err
            raise


class _Conflict(Exception):
    """The index exists already (two ingestions creating it at once)."""
