"""The ingestion worker on moto (DynamoDB, S3, SQS, S3 Vectors): a crash mid-ingestion is
retried to completion with no duplicate vectors, and duplicates or forged messages change
nothing."""

from __future__ import annotations

import json

import boto3
import pytest
from agents_core.api.files import CreateVectorStoreRequest
from agents_core.services.ingest import IngestWorker
from agents_core.services.resume_queue import ensure_resume_queue, lambda_sqs_event
from agents_core.vectors.s3vectors import index_name

TENANT = "acme"


class FailsFirstPut:
    """The vector index, failing its first put after writing half of it (a crash mid-way)."""

    def __init__(self, index):
        self.index, self.failed = index, False

    def __getattr__(self, name):
        return getattr(self.index, name)

    def put(self, tenant, store_id, records):
        if not self.failed:
            self.failed = True
            self.index.put(tenant, store_id, records[: len(records) // 2])
            raise RuntimeError("the worker died")
        self.index.put(tenant, store_id, records)


@pytest.fixture
def env(services):
    from dataclasses import replace

    sqs = boto3.client("sqs", region_name="us-east-1")
    s3 = boto3.client("s3", region_name="us-east-1")
    vectors = boto3.client("s3vectors", region_name="us-east-1")
    s3.create_bucket(Bucket=services.settings.files_bucket)
    services.settings = replace(
        services.settings,
        ingest_queue_url=ensure_resume_queue(sqs, "ingest"),
        ingest_embed_batch=2,
    )
    services.sqs_client, services.s3_client, services.s3vectors_client = sqs, s3, vectors
    services.vector_index.ensure_bucket()
    services.vector_index = FailsFirstPut(services.vector_index)
    return services, sqs, vectors


def _receive(sqs, url):
    messages = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
    )["Messages"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    return lambda_sqs_event(messages, arn, "us-east-1")


def _stored_keys(services, vectors, store_id):
    name = index_name(TENANT, store_id)
    found = vectors.list_vectors(
        vectorBucketName=services.settings.vector_bucket_name, indexName=name
    )
    return sorted(v["key"] for v in found["vectors"])


def test_a_crash_mid_ingestion_is_retried_to_completion_with_no_duplicate_vectors(env):
    services, sqs, vectors = env
    text = " ".join(f"word{n}" for n in range(3000)).encode()  # several chunks, several puts
    file = services.files.upload(TENANT, "long.txt", "assistants", text)
    store = services.vector_stores.create(TENANT, CreateVectorStoreRequest(file_ids=[file.id]))
    event = _receive(sqs, services.settings.ingest_queue_url)
    worker = IngestWorker(services)

    first = worker.handle(event)
    assert [f["itemIdentifier"] for f in first["batchItemFailures"]] == [
        event["Records"][0]["messageId"]
    ]
    assert services.vector_stores.file(TENANT, store.id, file.id).status == "in_progress"

    redelivered = worker.handle(event)  # SQS hands the same message again
    assert redelivered["batchItemFailures"] == []
    record = services.vector_stores.file(TENANT, store.id, file.id)
    assert record.status == "completed"
    chunks = int(services.file_store.store_file_item(TENANT, store.id, file.id)["chunks"]["N"])
    assert chunks > 2
    assert _stored_keys(services, vectors, store.id) == [
        f"{file.id}#{n:06d}" for n in range(chunks)
    ]

    again = worker.handle(event)  # a duplicate after the end changes nothing
    assert again["batchItemFailures"] == []
    counts = services.vector_stores.get(TENANT, store.id).file_counts
    assert (counts.completed, counts.in_progress, counts.total) == (1, 0, 1)


def test_a_message_with_another_token_or_tenant_is_dropped_and_changes_nothing(env):
    services, sqs, _ = env
    file = services.files.upload(TENANT, "a.txt", "assistants", b"seals bask")
    store = services.vector_stores.create(TENANT, CreateVectorStoreRequest(file_ids=[file.id]))
    event = _receive(sqs, services.settings.ingest_queue_url)
    real = event["Records"][0]
    forged = json.loads(real["body"]) | {"token": "guessed"}
    other_tenant = {
        **real,
        "messageAttributes": {
            "tenant": {**real["messageAttributes"]["tenant"], "stringValue": "globex"}
        },
    }
    result = IngestWorker(services).handle(
        {"Records": [{**real, "body": json.dumps(forged)}, other_tenant]}
    )
    assert result["batchItemFailures"] == []  # acknowledged: they can never succeed
    assert services.vector_stores.file(TENANT, store.id, file.id).status == "in_progress"
