"""The vectors port (agents_core.vectors): the three embedders against local HTTP peers, the
OpenAI filter translation, and the S3 Vectors index adapter against moto (what it serves) and
the local S3 Vectors peer (functions/local/vector_peer.py, which adds QueryVectors)."""

from __future__ import annotations

import math
import re
import subprocess
import sys

import boto3
import pytest
from agents_core.errors import InvalidRequest, UpstreamFailed
from agents_core.settings import Settings
from agents_core.vectors import VectorRecord, build_embedder
from agents_core.vectors.bedrock import TitanEmbedder
from agents_core.vectors.filters import attribute_key, to_s3_filter
from agents_core.vectors.offline import OfflineEmbedder
from agents_core.vectors.openai_compat import OpenAICompatEmbedder
from agents_core.vectors.s3vectors import S3VectorIndex, index_name
from moto import mock_aws

from .local_server import local_module
from .peers.embedding_servers import EmbeddingsServer, TitanEmulator

BUCKET = "vectors-test"


vector_peer = local_module("vector_peer")


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b, strict=True)) / (
        math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    )


# ---- Embedders


def test_the_offline_embedder_is_deterministic_across_processes_and_unit_length():
    texts = ["Serverless agents store vectors in S3.", "", "ünïcode wörds"]
    vectors = OfflineEmbedder(64).embed(texts)
    code = (
        "import json; from agents_core.vectors.offline import OfflineEmbedder;"
        f"print(json.dumps(OfflineEmbedder(64).embed({texts!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert vectors == __import__("json").loads(out.stdout)
    for vector in vectors:
        assert len(vector) == 64
        assert math.isclose(sum(v * v for v in vector), 1.0, rel_tol=1e-9)


def test_the_offline_embedder_scores_texts_sharing_words_higher():
    embed = OfflineEmbedder().embed
    query, near, far = embed(
        [
            "how do I reset my password",
            "To reset a password, open settings and choose reset password.",
            "Quarterly revenue grew eleven percent on cloud demand.",
        ]
    )
    assert cosine(query, near) > cosine(query, far) + 0.2


@pytest.fixture
def titan(monkeypatch):
    with TitanEmulator(delay=0.05) as emulator:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", emulator.url)
        yield emulator


def test_titan_embeds_one_text_a_call_with_titan_v2_bodies_at_bounded_concurrency(titan):
    embedder = TitanEmbedder(dimension=256, concurrency=3)
    texts = [f"chunk number {n} about topic {n % 3}" for n in range(10)]
    vectors = embedder.embed(texts)
    assert vectors == OfflineEmbedder(256).embed(texts)  # in order, whatever finished first
    assert len(titan.requests) == 10
    assert {r["modelId"] for r in titan.requests} == {"amazon.titan-embed-text-v2:0"}
    assert {r["action"] for r in titan.requests} == {"invoke"}
    assert sorted(r["inputText"] for r in titan.requests) == sorted(texts)
    assert all(r["dimensions"] == 256 and r["normalize"] is True for r in titan.requests)
    assert titan.most_in_flight <= 3


def test_titan_retries_throttling_and_reports_a_refusal_as_an_upstream_failure(titan):
    embedder = TitanEmbedder(dimension=512, concurrency=1)
    titan.fail(429)
    assert len(embedder.embed(["throttled once"])[0]) == 512
    assert len(titan.requests) == 2
    titan.fail(400)
    with pytest.raises(UpstreamFailed, match="ValidationException"):
        embedder.embed(["refused"])


def test_titan_v2_dimensions_are_checked_when_built():
    with pytest.raises(ValueError, match="256, 512 or 1024"):
        TitanEmbedder(dimension=300, client=object())


def test_the_openai_compatible_embedder_batches_and_keeps_the_order():
    with EmbeddingsServer(dimension=64) as server:
        embedder = OpenAICompatEmbedder(
            server.url, "text-embedding-3-small", 64, api_key="sk-test", batch_size=2
        )
        texts = [f"text {n}" for n in range(5)]
        assert embedder.embed(texts) == OfflineEmbedder(64).embed(texts)
    assert [r["input"] for r in server.requests] == [texts[0:2], texts[2:4], texts[4:]]
    assert all(r["model"] == "text-embedding-3-small" for r in server.requests)
    assert all("dimensions" not in r for r in server.requests)  # only when configured
    assert set(server.authorizations) == {"Bearer sk-test"}


def test_the_openai_compatible_embedder_retries_429_and_5xx_a_bounded_number_of_times():
    with EmbeddingsServer(dimension=8) as server:
        embedder = OpenAICompatEmbedder(server.url, "m", 8, attempts=3, backoff=0.01)
        server.fail(429)
        server.fail(503)
        assert len(embedder.embed(["a"])) == 1
        assert len(server.requests) == 3
        server.fail(500, times=3)
        with pytest.raises(UpstreamFailed, match="500"):
            embedder.embed(["b"])
        assert len(server.requests) == 6
        server.fail(400)
        with pytest.raises(UpstreamFailed, match="400"):
            embedder.embed(["c"])
        assert len(server.requests) == 7  # a refusal is not retried


def test_an_endpoint_answering_another_dimension_says_which_to_configure():
    with EmbeddingsServer(dimension=32) as server:
        embedder = OpenAICompatEmbedder(server.url, "m", 64)
        with pytest.raises(UpstreamFailed, match="EMBEDDING_DIMENSION=32"):
            embedder.embed(["x"])


def test_the_endpoint_key_is_read_from_its_secret_at_the_first_embedding():
    from agents_core import secrets

    secrets.forget()
    with EmbeddingsServer(dimension=16) as server, mock_aws():
        boto3.client("secretsmanager").create_secret(Name="embed-key", SecretString="sk-secret")
        settings = Settings(
            embedding_provider="openai",
            embedding_model="m",
            embedding_dimension=16,
            embedding_base_url=server.url,
            embedding_api_key_secret_id="embed-key",
        )
        embedder = build_embedder(settings)
        assert server.requests == []
        embedder.embed(["a"])
        embedder.embed(["b"])
    secrets.forget()
    assert server.authorizations == ["Bearer sk-secret", "Bearer sk-secret"]
    assert server.requests[0]["dimensions"] == 16  # configured, so asked for


def test_an_unknown_embedding_provider_is_a_clear_error():
    with pytest.raises(ValueError, match="offline, bedrock or openai"):
        build_embedder(Settings(embedding_provider="word2vec"))


# ---- Filters


def test_openai_filters_become_s3_vectors_filters_on_the_attribute_keys():
    openai_filter = {
        "type": "and",
        "filters": [
            {"type": "eq", "key": "author", "value": "ann"},
            {
                "type": "or",
                "filters": [
                    {"type": "gte", "key": "year", "value": 2020},
                    {"type": "in", "key": "tag", "value": ["a", "b"]},
                    {"type": "ne", "key": "draft", "value": True},
                ],
            },
        ],
    }
    assert to_s3_filter(openai_filter) == {
        "$and": [
            {"attr_author": {"$eq": "ann"}},
            {
                "$or": [
                    {"attr_year": {"$gte": 2020}},
                    {"attr_tag": {"$in": ["a", "b"]}},
                    {"attr_draft": {"$ne": True}},
                ]
            },
        ]
    }
    long_name = "k" * 64
    assert len(attribute_key(long_name)) <= 63
    assert attribute_key(long_name) != attribute_key("k" * 63 + "j")


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "gt", "key": "year", "value": "2020"},
        {"type": "in", "key": "tag", "value": []},
        {"type": "like", "key": "tag", "value": "a"},
        {"type": "eq", "value": "a"},
        {"type": "and", "filters": []},
        {"type": "eq", "key": "a", "value": {"nested": 1}},
        {"type": "eq", "key": "a", "value": "b", "extra": 1},
    ],
)
def test_malformed_filters_are_refused_as_invalid_requests(bad):
    with pytest.raises(InvalidRequest):
        to_s3_filter(bad)


# ---- The index on moto (no QueryVectors there)


@pytest.fixture
def moto_index(aws_env):
    with mock_aws():
        client = boto3.client("s3vectors", region_name="us-east-1")
        index = S3VectorIndex(client, BUCKET)
        index.ensure_bucket()
        yield index, client


def records(count, dimension=4, prefix="file-1", **metadata):
    return [
        VectorRecord(
            f"{prefix}#{n:06d}",
            [1.0 + n % 3, float(n % 5), 0.5, 1.0][:dimension],
            {"file_id": prefix, "text": f"chunk {n}", "chunk_index": n, **metadata},
        )
        for n in range(count)
    ]


def keys_of(client, name):
    pages = client.get_paginator("list_vectors").paginate(vectorBucketName=BUCKET, indexName=name)
    return sorted(v["key"] for page in pages for v in page["vectors"])


def test_each_tenant_and_store_gets_its_own_validly_named_cosine_index(moto_index):
    index, client = moto_index
    index.ensure("acme", "vs_ABC_123", 4)
    index.ensure("acme", "vs_ABC_123", 4)  # idempotent
    index.ensure("globex", "vs_ABC_123", 4)
    names = [i["indexName"] for i in client.list_indexes(vectorBucketName=BUCKET)["indexes"]]
    assert sorted(names) == sorted(
        [index_name("acme", "vs_ABC_123"), index_name("globex", "vs_ABC_123")]
    )
    for name in names:
        assert re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", name)
        found = client.get_index(vectorBucketName=BUCKET, indexName=name)["index"]
        assert (found["distanceMetric"], found["dimension"]) == ("cosine", 4)


def test_a_store_of_another_dimension_is_refused(moto_index):
    index, client = moto_index
    index.ensure("acme", "vs_1", 4)
    with pytest.raises(InvalidRequest, match="4-dimension"):
        S3VectorIndex(client, BUCKET).ensure("acme", "vs_1", 8)


def test_a_put_repeated_with_the_same_keys_leaves_one_vector_per_key(moto_index):
    index, client = moto_index
    index.ensure("acme", "vs_1", 4)
    index.put("acme", "vs_1", records(7))
    index.put("acme", "vs_1", records(7))  # a retried ingestion
    index.put("acme", "vs_1", records(3) + records(3))  # duplicates within one put
    assert keys_of(client, index_name("acme", "vs_1")) == [f"file-1#{n:06d}" for n in range(7)]


def test_puts_go_in_calls_of_at_most_500_vectors(moto_index):
    index, client = moto_index
    sizes = []
    client.meta.events.register(
        "before-parameter-build.s3vectors.PutVectors",
        lambda params, **_: sizes.append(len(params["vectors"])),
    )
    index.ensure("acme", "vs_1", 4)
    index.put("acme", "vs_1", records(1201))
    assert sizes == [500, 500, 201]
    assert len(keys_of(client, index_name("acme", "vs_1"))) == 1201


def test_delete_removes_the_keys_and_drop_removes_the_index(moto_index):
    index, client = moto_index
    index.ensure("acme", "vs_1", 4)
    index.put("acme", "vs_1", records(5))
    index.delete("acme", "vs_1", ["file-1#000001", "file-1#000003", "never-stored"])
    assert keys_of(client, index_name("acme", "vs_1")) == [
        "file-1#000000",
        "file-1#000002",
        "file-1#000004",
    ]
    index.drop("acme", "vs_1")
    assert client.list_indexes(vectorBucketName=BUCKET)["indexes"] == []
    index.drop("acme", "vs_1")  # dropping twice, deleting from nothing: no error
    index.delete("acme", "vs_1", ["file-1#000000"])


def test_attributes_beyond_the_2kb_of_filterable_metadata_are_refused(moto_index):
    index, client = moto_index
    index.ensure("acme", "vs_1", 4)
    big = {f"k{n}": "v" * 200 for n in range(12)}
    with pytest.raises(InvalidRequest, match="2048"):
        index.put("acme", "vs_1", records(1, attributes=big))
    assert keys_of(client, index_name("acme", "vs_1")) == []


# ---- The index on the local S3 Vectors peer (QueryVectors)


@pytest.fixture
def peer_index(aws_env):
    url, stop = vector_peer.start_vector_peer()
    try:
        index = S3VectorIndex(boto3.client("s3vectors", endpoint_url=url), BUCKET)
        index.ensure_bucket()
        yield index
    finally:
        stop()


CHUNKS = [
    ("doc-a", "Reset your password from the account settings page.", {"lang": "en", "year": 2021}),
    ("doc-b", "Passwords expire every ninety days for admins.", {"lang": "en", "year": 2024}),
    ("doc-c", "Quarterly revenue grew on cloud demand.", {"lang": "en", "year": 2023}),
    ("doc-d", "Réinitialisez votre mot de passe.", {"lang": "fr", "year": 2024, "draft": True}),
]


def ingest(index, tenant="acme", store="vs_1"):
    embedder = OfflineEmbedder(128)
    index.ensure(tenant, store, 128)
    vectors = embedder.embed([text for _, text, _ in CHUNKS])
    index.put(
        tenant,
        store,
        [
            VectorRecord(
                f"{file_id}#000000",
                vector,
                {
                    "file_id": file_id,
                    "filename": f"{file_id}.txt",
                    "text": text,
                    "chunk_index": 0,
                    "attributes": attrs,
                },
            )
            for (file_id, text, attrs), vector in zip(CHUNKS, vectors, strict=True)
        ],
    )
    return embedder


def test_a_query_ranks_by_cosine_similarity_and_returns_the_metadata_as_put(peer_index):
    embedder = ingest(peer_index)
    query = embedder.embed(["how do I reset my password"])[0]
    matches = peer_index.query("acme", "vs_1", query, top_k=3)
    assert [m.key for m in matches][0] == "doc-a#000000"
    assert len(matches) == 3
    assert all(0.0 <= m.score <= 1.0 for m in matches)
    assert [m.score for m in matches] == sorted((m.score for m in matches), reverse=True)
    assert matches[0].metadata == {
        "file_id": "doc-a",
        "filename": "doc-a.txt",
        "text": CHUNKS[0][1],
        "chunk_index": 0,
        "attributes": {"lang": "en", "year": 2021},
    }
    stored = OfflineEmbedder(128).embed([CHUNKS[0][1]])[0]
    assert math.isclose(matches[0].score, cosine(query, stored), abs_tol=1e-5)


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"type": "eq", "key": "lang", "value": "fr"}, {"doc-d"}),
        ({"type": "ne", "key": "lang", "value": "fr"}, {"doc-a", "doc-b", "doc-c"}),
        ({"type": "gte", "key": "year", "value": 2024}, {"doc-b", "doc-d"}),
        ({"type": "lt", "key": "year", "value": 2023}, {"doc-a"}),
        ({"type": "in", "key": "year", "value": [2021, 2023]}, {"doc-a", "doc-c"}),
        ({"type": "nin", "key": "year", "value": [2021, 2023]}, {"doc-b", "doc-d"}),
        ({"type": "eq", "key": "draft", "value": True}, {"doc-d"}),
        (
            {
                "type": "and",
                "filters": [
                    {"type": "eq", "key": "lang", "value": "en"},
                    {
                        "type": "or",
                        "filters": [
                            {"type": "gt", "key": "year", "value": 2023},
                            {"type": "lte", "key": "year", "value": 2021},
                        ],
                    },
                ],
            },
            {"doc-a", "doc-b"},
        ),
        ({"type": "eq", "key": "file_id", "value": "doc-a"}, set()),  # attributes only
    ],
)
def test_filters_are_translated_and_honoured_by_the_query(peer_index, filters, expected):
    embedder = ingest(peer_index)
    query = embedder.embed(["password"])[0]
    matches = peer_index.query("acme", "vs_1", query, top_k=10, filters=filters)
    assert {m.metadata["file_id"] for m in matches} == expected


def test_another_tenants_store_of_the_same_id_is_another_index(peer_index):
    embedder = ingest(peer_index, tenant="acme")
    query = embedder.embed(["password"])[0]
    assert peer_index.query("globex", "vs_1", query, top_k=5) == []
    peer_index.ensure("globex", "vs_1", 128)
    assert peer_index.query("globex", "vs_1", query, top_k=5) == []
    assert len(peer_index.query("acme", "vs_1", query, top_k=5)) == 4


def test_drop_removes_everything_and_a_store_can_be_built_again(peer_index):
    embedder = ingest(peer_index)
    query = embedder.embed(["password"])[0]
    peer_index.drop("acme", "vs_1")
    assert peer_index.query("acme", "vs_1", query, top_k=5) == []
    ingest(peer_index)
    assert len(peer_index.query("acme", "vs_1", query, top_k=5)) == 4


def test_top_k_is_bounded_to_what_s3_vectors_serves(peer_index):
    embedder = ingest(peer_index)
    query = embedder.embed(["password"])[0]
    assert len(peer_index.query("acme", "vs_1", query, top_k=1000)) == 4
    assert len(peer_index.query("acme", "vs_1", query, top_k=0)) == 1


def test_the_peer_without_numpy_ranks_and_scores_as_with_it(peer_index, monkeypatch):
    embedder = ingest(peer_index)
    query = embedder.embed(["reset password settings"])[0]
    with_numpy = peer_index.query("acme", "vs_1", query, top_k=4)
    monkeypatch.setattr(vector_peer, "numpy", None)
    without = peer_index.query("acme", "vs_1", query, top_k=4)
    assert [m.key for m in without] == [m.key for m in with_numpy]
    for a, b in zip(without, with_numpy, strict=True):
        assert math.isclose(a.score, b.score, abs_tol=1e-5)
