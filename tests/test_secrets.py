"""The model API key comes from Secrets Manager (moto here) at run time, never from the
environment: the turns function, loaded as Lambda loads it, with only the secret's id set."""

from __future__ import annotations

import json
import logging
import os
import uuid

import boto3
import pytest
from agents_core import secrets
from agents_core.api.agents import AgentConfig
from fastapi.testclient import TestClient

from .lambda_support import load_function

SECRET = "serverless-agents/model-api-key"


@pytest.fixture
def function_env(monkeypatch, model, dynamodb):
    """The environment template.yaml gives the turns function: the endpoint and the secret's
    id, no key."""
    monkeypatch.setenv("OPENAI_BASE_URL", model.url)
    monkeypatch.setenv("OPENAI_API_KEY_SECRET_ID", SECRET)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model.reset()
    secrets.forget()
    yield boto3.client("secretsmanager", region_name="us-east-1")
    secrets.forget()


def run_turn(function, text: str = "Hello", stream: bool = False) -> dict | str:
    """One turn on a new session, through the function's app: its JSON (the SSE text when
    streamed), or the error's status and detail."""
    store = function.services.agents
    agent = store.create_agent("default", AgentConfig(model="gpt-test", instructions="Be brief."))
    session = store.create_session("default", agent.agent_id, "s")
    url = f"/v1/agents/{agent.agent_id}/session/{session.session_id}/turn"
    body = {"messages": [{"role": "user", "content": text}], "stream": stream}
    reply = TestClient(function.app).post(url, json=body)
    if reply.status_code != 200:
        return f"{reply.status_code} {reply.text}"
    return reply.text if stream else reply.json()


def test_the_model_receives_the_key_read_from_the_secret_and_it_is_read_once(
    function_env, model, capsys, caplog
):
    key = f"sk-test-{uuid.uuid4().hex}"
    function_env.create_secret(Name=SECRET, SecretString=key)
    caplog.set_level(logging.INFO)  # template.yaml's level (botocore's DEBUG logs bodies)
    turns = load_function("turns")

    assert run_turn(turns)["output_message"]["content"] == "echo: Hello"
    assert model.authorizations == [f"Bearer {key}"]
    # Read at the first model call and kept: the next turn uses it without another read.
    function_env.put_secret_value(SecretId=SECRET, SecretString="sk-rotated")
    assert "turn_complete" in run_turn(turns, "Again", stream=True)
    assert model.authorizations == [f"Bearer {key}"] * 2

    assert not any(key in value for value in os.environ.values())
    printed = capsys.readouterr()
    assert key not in printed.out + printed.err
    assert key not in caplog.text


@pytest.mark.parametrize(
    "stored",
    [
        "{key}",
        json.dumps({"api_key": "{key}", "note": "for the model"}),
        json.dumps({"OPENAI_API_KEY": "{key}"}),  # the console's key/value form, one field
    ],
)
def test_a_key_is_stored_as_a_plain_string_or_as_json(function_env, stored):
    function_env.create_secret(Name=SECRET, SecretString=stored.replace("{key}", "sk-1"))
    assert secrets.model_api_key(SECRET, function_env) == "sk-1"


def test_json_without_a_single_key_is_refused_with_the_reason(function_env):
    function_env.create_secret(Name=SECRET, SecretString=json.dumps({"a": "1", "b": "2"}))
    with pytest.raises(secrets.SecretUnavailable, match="without an `api_key` field"):
        secrets.model_api_key(SECRET, function_env)


def test_a_missing_secret_fails_the_turn_with_502_naming_the_secret(function_env, model):
    turns = load_function("turns")
    failed = run_turn(turns)
    assert failed.startswith("502 "), failed
    assert SECRET in failed and "ResourceNotFoundException" in failed
    assert model.requests == []  # nothing reached the model without its key
