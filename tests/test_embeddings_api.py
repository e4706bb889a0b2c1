"""`POST /v1/embeddings` with the openai SDK against the local server (`make run`), whose
embedder is the offline one: the SDK's default base64 encoding, floats, both prefixes, and the
refusals OpenAI answers."""

from __future__ import annotations

import math

import openai
import pytest
from agents_core.vectors.offline import OfflineEmbedder

from .local_server import running_server

MODEL = "offline-lexical"


@pytest.fixture(scope="module")
def server():
    with running_server() as (base, banner):
        yield base, banner


@pytest.fixture(params=["/v1", "/v1/openai/v1"])
def client(server, request):
    return openai.OpenAI(base_url=server[0] + request.param, api_key="unused", max_retries=0)


def close(a, b):
    return len(a) == len(b) and all(
        math.isclose(x, y, abs_tol=1e-6) for x, y in zip(a, b, strict=True)
    )


def test_the_banner_says_the_embedder_is_lexical_and_where_vectors_live(server):
    _, banner = server
    assert "embeddings: offline, lexical not semantic" in banner
    assert "S3 Vectors: local peer at http://127.0.0.1:" in banner


def test_the_sdk_default_base64_encoding_decodes_to_the_embedders_vectors(client):
    texts = ["serverless agents", "vectors in S3"]
    result = client.embeddings.create(input=texts, model=MODEL)  # the SDK asks for base64
    expected = OfflineEmbedder(256).embed(texts)
    assert result.object == "list" and result.model == MODEL
    assert [d.index for d in result.data] == [0, 1]
    assert all(close(d.embedding, e) for d, e in zip(result.data, expected, strict=True))
    assert result.usage.prompt_tokens == result.usage.total_tokens > 0


def test_float_encoding_and_a_single_string(client):
    result = client.embeddings.create(
        input="one text", model=MODEL, encoding_format="float", dimensions=256, user="u1"
    )
    assert len(result.data) == 1
    assert close(result.data[0].embedding, OfflineEmbedder(256).embed(["one text"])[0])


def test_an_unknown_model_is_404_as_openai_answers(client):
    with pytest.raises(openai.NotFoundError) as refused:
        client.embeddings.create(input="x", model="text-embedding-3-large")
    # OpenAI's envelope, which the SDK unwraps: its `error` object is the exception's body.
    assert "text-embedding-3-large" in refused.value.body["message"]
    assert refused.value.type == "invalid_request_error"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"input": [1, 2, 3]}, "token arrays"),
        ({"input": [[1, 2], [3]]}, "token arrays"),
        ({"input": ""}, "empty"),
        ({"input": []}, "empty"),
        ({"input": "x", "dimensions": 1024}, "256 dimensions"),
    ],
)
def test_what_the_embedder_cannot_serve_is_a_400(client, kwargs, message):
    with pytest.raises(openai.BadRequestError) as refused:
        client.embeddings.create(model=MODEL, **kwargs)
    assert message in str(refused.value.body)
