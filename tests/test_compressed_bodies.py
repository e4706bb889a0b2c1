"""Compressed request bodies against `make run`'s server: gzip and zstd are read as if sent
plain; a bomb is a 413 and nothing runs; broken data is a 400; another encoding a 415."""

from __future__ import annotations

import gzip
import json

import httpx
import pytest
from backports import zstd

from .local_server import running_server

RESPONSE = {"model": "m", "input": "compressed hello", "store": False}


@pytest.fixture(scope="module")
def base(model):
    with running_server({"OPENAI_BASE_URL": model.url}) as (url, _):
        yield url


def post(base: str, path: str, body: bytes, encoding: str) -> httpx.Response:
    headers = {"Content-Type": "application/json", "Content-Encoding": encoding}
    return httpx.post(f"{base}{path}", content=body, headers=headers, timeout=30)


@pytest.mark.parametrize("encoding, compress", [("gzip", gzip.compress), ("zstd", zstd.compress)])
def test_a_compressed_body_is_read_as_if_sent_plain(base, model, encoding, compress):
    model.reset()
    model.reply(text="read it")
    made = post(base, "/v1/responses", compress(json.dumps(RESPONSE).encode()), encoding)
    assert made.status_code == 200, made.text
    assert made.json()["output"][0]["content"][0]["text"] == "read it"
    assert model.requests[-1]["messages"][-1]["content"] == "compressed hello"


def test_a_body_in_frames_is_read_whole(base, model):
    """Two zstd frames (or gzip members) one after the other are one body."""
    model.reset()
    text = json.dumps({"agent_config": {"model": "m", "instructions": "Be brief."}}).encode()
    framed = zstd.compress(text[:20]) + zstd.compress(text[20:])
    made = post(base, "/v1/agents", framed, "zstd")
    assert made.status_code == 200 and made.json()["agent_id"]


@pytest.mark.parametrize("encoding, compress", [("gzip", gzip.compress), ("zstd", zstd.compress)])
def test_a_decompression_bomb_is_a_413_and_nothing_runs(base, model, encoding, compress):
    model.reset()
    padded = {**RESPONSE, "metadata": {"pad": " " * 100}, "instructions": " " * (40 << 20)}
    bomb = compress(json.dumps(padded).encode())
    assert len(bomb) < 1 << 20  # a small request that would grow past 40 MB
    refused = post(base, "/v1/responses", bomb, encoding)
    assert refused.status_code == 413
    assert "decompresses to more than" in refused.json()["error"]["message"]
    assert model.requests == []


def test_broken_or_cut_data_is_a_400_and_another_encoding_a_415(base, model):
    model.reset()
    whole = zstd.compress(json.dumps(RESPONSE).encode())
    for body, encoding in ((b"not gzip at all", "gzip"), (whole[:-6], "zstd")):
        refused = post(base, "/v1/responses", body, encoding)
        assert refused.status_code == 400, (encoding, refused.text)
        assert "not valid" in refused.json()["error"]["message"]
    refused = post(base, "/v1/agents", b"{}", "br")
    assert refused.status_code == 415 and "br" in refused.json()["detail"]
    assert model.requests == []
