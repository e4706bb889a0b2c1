"""AWS is moto (in-process); the app is the real FastAPI app over the real store."""

from __future__ import annotations

import threading

import boto3
import pytest
from agents_core.services import Services, build_services
from agents_core.settings import Settings
from agents_core.store.agents import AgentStore
from agents_core.store.schema import create_table_if_missing
from agents_core.web.agents import router as agents_router
from agents_core.web.app import create_app
from agents_core.web.turns import resume_router, turns_router
from fastapi.testclient import TestClient
from moto import mock_aws

from .peers.openai_server import ScriptedOpenAI

TABLE = "agents-test"


@pytest.fixture(autouse=True)
def aws_env(monkeypatch):
    """Fake credentials and a region, so nothing can reach a real AWS account."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("TABLE_NAME", TABLE)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture(scope="module")
def model():
    """A scripted OpenAI-compatible model server (tests queue its replies)."""
    with ScriptedOpenAI() as server:
        yield server


@pytest.fixture
def dynamodb(aws_env, monkeypatch):
    """moto in this process. DynamoDB takes each request whole; moto's mock runs a request on
    its caller's thread, and a transaction deep-copies the table while another thread (a
    stream log's writer, a running turn's record) may write to it: so here requests are taken
    one at a time, as functions/local/serial_moto.py takes them for local runs."""
    from moto.dynamodb.responses import DynamoHandler

    lock = threading.RLock()
    take = DynamoHandler.call_action

    def one_at_a_time(handler: DynamoHandler):
        with lock:
            return take(handler)

    monkeypatch.setattr(DynamoHandler, "call_action", one_at_a_time)
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table_if_missing(client, TABLE)
        yield client


@pytest.fixture
def services(dynamodb) -> Services:
    return build_services(Settings(table_name=TABLE, ephemeral_session_ttl_seconds=3600), dynamodb)


@pytest.fixture
def store(services) -> AgentStore:
    return services.agents


@pytest.fixture
def api(services) -> TestClient:
    app = create_app(agents_router, turns_router, resume_router, services=services)
    return TestClient(app, raise_server_exceptions=False)


def agent_config(**overrides):
    config = {"model": "test-model", "instructions": "You are terse."}
    config.update(overrides)
    return config


def error_message(response) -> str:
    """An error answer's message, in the shape its route gives (Llama Stack's `{"detail"}`, or
    OpenAI's `{"error": {"message", ...}}`)."""
    body = response.json()
    return body["error"]["message"] if "error" in body else body["detail"]
