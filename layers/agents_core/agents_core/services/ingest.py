"""The ingestion worker: files attached to vector stores, from the ingestion queue to vectors.

A message is `{"vector_store_id", "file_id", "token"}` with the tenant as the message
attribute `tenant` (services/files.py sends it). For each (Powertools batch processing, only
failed records reported):

- a message whose token is not its record's (or naming nothing) is rejected: acknowledged,
  nothing changed: a sender can pick neither a tenant nor a file it was not told about;
- a record no longer `in_progress` is acknowledged: duplicates and redeliveries are harmless;
- otherwise the file is read from S3, its text extracted and chunked (services/documents.py),
  embedded in batches of `INGEST_EMBED_BATCH`, and put under the keys `{file_id}#{n:06d}`, so
  a retry overwrites what an earlier attempt put; then the record moves to `completed` (or
  `failed` with `last_error`) together with the store's counts, on its token and status: a
  second worker finishing the same file changes nothing;
- an unsupported type, a file with no text or too much, fail the file at once; an embedder
  failure is retried by SQS (the record reported) until the third receive, then fails the
  file (`server_error`); S3, table or index failures are retried until the DLQ has them;
- a record detached (or a store deleted) while its file was ingested: the vectors this worker
  put are deleted again (the store's index dropped if the store is gone).

    worker = IngestWorker(services)
    result = worker.handle(sqs_event)   # {"batchItemFailures": [...]}
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from .. import metrics
from ..api.files import LastError
from ..errors import NotFound, UpstreamFailed
from ..log import logger
from ..vectors import VectorRecord
from .documents import Unreadable, Unsupported, chunk_text, extract_text
from .files import TENANT_ATTRIBUTE, chunk_key

#: Receives of a message whose embedding failed before the file is failed.
EMBED_ATTEMPTS = 3


class IngestWorker:
    def __init__(self, services: Any) -> None:
        self.services = services
        self.settings = services.settings
        self.store = services.file_store

    def handle(self, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        return process_partial_response(
            event=event,
            record_handler=self._ingest,
            processor=BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False),
            context=context,
        )

    def _ingest(self, record: SQSRecord) -> None:
        try:
            message = json.loads(record.body)
            store_id, file_id = str(message["vector_store_id"]), str(message["file_id"])
            token = str(message["token"])
        except (ValueError, KeyError, TypeError):
            return _reject("not an ingestion message")
        attributes = record.message_attributes
        tenant = None
        if TENANT_ATTRIBUTE in attributes:
            tenant = attributes[TENANT_ATTRIBUTE].string_value
        if not tenant:
            return _reject("no tenant attribute")
        item = self.store.store_file_item(tenant, store_id, file_id)
        if item is None or item.get("token", {}).get("S") != token:
            return _reject("no such record with this token")
        if item["status"]["S"] != "in_progress":
            logger.info("duplicate ingestion message acknowledged", extra={"file_id": file_id})
            metrics.count("IngestMessagesDuplicate")
            return None
        log = {"tenant": tenant, "vector_store_id": store_id, "file_id": file_id}
        outcome = self._vectors(tenant, store_id, file_id, item, record, log)
        if isinstance(outcome, LastError):
            self.store.finish(tenant, store_id, file_id, token, "failed", last_error=outcome)
            logger.warning("file failed", extra={**log, "reason": outcome.message})
            metrics.count("FilesFailed")
            return None
        chunks, usage = outcome
        if self.store.finish(
            tenant, store_id, file_id, token, "completed", usage_bytes=usage, chunks=chunks
        ):
            logger.info("file ingested", extra={**log, "chunks": chunks})
            metrics.count("FilesIngested")
            return None
        # Not this record any more: detached, or its store deleted, while it was ingested.
        finished = self.store.store_file_item(tenant, store_id, file_id)
        if finished is None or finished.get("token", {}).get("S") != token:
            if self.store.get_store(tenant, store_id) is None:
                self.services.vector_index.drop(tenant, store_id)
            elif finished is None:
                with contextlib.suppress(NotFound):
                    self.services.vector_index.delete(
                        tenant, store_id, [chunk_key(file_id, n) for n in range(chunks)]
                    )
        return None

    def _vectors(
        self,
        tenant: str,
        store_id: str,
        file_id: str,
        item: dict[str, Any],
        record: SQSRecord,
        log: dict[str, Any],
    ) -> tuple[int, int] | LastError:
        """(chunks, bytes of text) put in the index, or why the file fails."""
        file = self.store.get_file(tenant, file_id)
        if file is None:
            return LastError(code="invalid_file", message="the file was deleted")
        if file.bytes > self.settings.ingest_max_file_bytes:
            return LastError(
                code="invalid_file",
                message=f"the file is larger than {self.settings.ingest_max_file_bytes} bytes",
            )
        data = self.services.files.read(tenant, file_id)
        try:
            text = extract_text(file.filename, data)
        except Unsupported as err:
            return LastError(code="unsupported_file", message=str(err))
        except Unreadable as err:
            return LastError(code="invalid_file", message=str(err))
        if len(text) > self.settings.ingest_max_chars:
            return LastError(
                code="invalid_file",
                message=f"the file holds more than {self.settings.ingest_max_chars} characters"
                " of text",
            )
        body = json.loads(item["body"]["S"])
        static = body["chunking_strategy"]["static"]
        chunks = chunk_text(text, static["max_chunk_size_tokens"], static["chunk_overlap_tokens"])
        if not chunks:
            return LastError(code="invalid_file", message="the file holds no text")
        embedder, index = self.services.embedder, self.services.vector_index
        batch = max(1, self.settings.ingest_embed_batch)
        attributes = body.get("attributes") or {}
        for start in range(0, len(chunks), batch):
            texts = chunks[start : start + batch]
            try:
                vectors = embedder.embed(texts)
            except UpstreamFailed as err:
                if record.attributes.approximate_receive_count < EMBED_ATTEMPTS:
                    raise  # SQS delivers it again after the visibility timeout
                return LastError(code="server_error", message=f"embedding failed: {err}")
            if start == 0:
                index.ensure(tenant, store_id, embedder.dimension)
            index.put(
                tenant,
                store_id,
                [
                    VectorRecord(
                        chunk_key(file_id, start + n),
                        vector,
                        {
                            "file_id": file_id,
                            "filename": file.filename,
                            "chunk": start + n,
                            "text": text_,
                            "attributes": attributes,
                        },
                    )
                    for n, (text_, vector) in enumerate(zip(texts, vectors, strict=True))
                ],
            )
        return len(chunks), sum(len(c.encode()) for c in chunks)


def _reject(reason: str) -> None:
    logger.warning("ingestion message rejected and dropped", extra={"reason": reason})
    metrics.count("IngestMessagesRejected")
