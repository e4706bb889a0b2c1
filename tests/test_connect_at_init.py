"""In Lambda, but under SnapStart, a streaming function opens at init the connections its first
run makes (`Services.connect`, in the app's lifespan, which uvicorn runs before it listens): on
demand, init has a full vCPU and the first request the memory's share, which the connections'
TLS handshakes and the model key's read would spend. Each function is served by run.sh's
command, with AWS (a moto server) and the model behind forwarders that count connections."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import time

import boto3
import httpx
import pytest
from agents_core.api.agents import AgentConfig
from agents_core.services import build_services
from agents_core.settings import DEFAULT_TENANT, Settings
from agents_core.store.schema import create_table_if_missing

from .lambda_support import ROOT
from .local_server import local_module
from .peers.forwarder import CountingForwarder
from .peers.openai_server import ScriptedOpenAI
from .turn_support import event_types, sse_events

TABLE = "connect-test"
BUS = "connect-test-turns"
SECRET = "connect-test-model-key"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture(scope="module")
def aws():
    """The local AWS (a moto server that keeps JSON-protocol connections open, as AWS does)
    with the table, the event bus and the model's key in a secret."""
    server = local_module("serial_moto").SerialMotoServer()
    url = server.start()
    session = boto3.Session(**{k.lower(): v for k, v in CREDENTIALS.items() if "KEY" in k})
    kwargs = {"endpoint_url": url, "region_name": "us-east-1"}
    create_table_if_missing(session.client("dynamodb", **kwargs), TABLE)
    session.client("events", **kwargs).create_event_bus(Name=BUS)
    session.client("secretsmanager", **kwargs).create_secret(Name=SECRET, SecretString="sk-test")
    yield url
    server.stop()


def _session(aws_url: str) -> tuple[str, str]:
    """A new agent's id and a session of it, made in the table directly."""
    settings = Settings(table_name=TABLE)
    dynamodb = boto3.client("dynamodb", endpoint_url=aws_url, **_client_credentials())
    store = build_services(settings, dynamodb=dynamodb).agents
    agent = store.create_agent(DEFAULT_TENANT, AgentConfig(model="m", instructions="Be brief."))
    session = store.create_session(DEFAULT_TENANT, agent.agent_id, "s")
    return agent.agent_id, session.session_id


def _client_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
        "region_name": "us-east-1",
    }


def _serve(function: str, port: int, env: dict[str, str]) -> subprocess.Popen:
    """The function served by the command its run.sh execs (this interpreter for `python`)."""
    run_sh = (ROOT / "functions" / function / "run.sh").read_text().splitlines()
    words = shlex.split(next(line for line in run_sh if line.startswith("exec python ")))[2:]
    words = [str(port) if "PORT" in word else word for word in words]
    return subprocess.Popen(
        [sys.executable, *words],
        cwd=ROOT / "functions" / function,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # its log lines (a few) and uvicorn's
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _ready(process: subprocess.Popen, url: str) -> None:
    """As the Web Adapter's readiness check: GET / until it answers."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(process.stdout.read().decode()[-3000:])
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise AssertionError("the function never answered")


@pytest.mark.parametrize(
    ("init_type", "connected"), [("on-demand", True), ("snap-start", False), (None, False)]
)
def test_a_function_opens_its_first_turn_s_connections_at_init_except_under_snapstart(
    aws, init_type, connected
):
    """On demand, the turns function's init reads the model's key from its secret and opens a
    connection for the lifecycle events and two for DynamoDB (a turn's lock and its agent's
    read go out at once; and one for the secret's read) and one to the model; its first streamed turn then opens none. Under SnapStart (a snapshot's
    sockets are dead after a restore) and outside Lambda, init opens none and the first turn
    opens them."""
    agent_id, session_id = _session(aws)
    with (
        CountingForwarder(aws) as aws_front,
        ScriptedOpenAI() as model,
        CountingForwarder(model.url.rsplit("/v1", 1)[0]) as model_front,
    ):
        port = _free_port()
        env = {
            **CREDENTIALS,
            "PATH": os.environ["PATH"],
            "PYTHONPATH": str(ROOT / "layers" / "agents_core"),
            "AWS_ENDPOINT_URL": aws_front.url,
            **({"AWS_LAMBDA_INITIALIZATION_TYPE": init_type} if init_type else {}),
            "TABLE_NAME": TABLE,
            "EVENT_BUS_NAME": BUS,
            "OPENAI_BASE_URL": model_front.url + "/v1",
            "OPENAI_API_KEY_SECRET_ID": SECRET,
            "POWERTOOLS_METRICS_DISABLED": "true",
        }
        process = _serve("turns", port, env)
        try:
            base = f"http://127.0.0.1:{port}"
            _ready(process, base)
            at_init = (aws_front.connections, model_front.connections)
            model.reply(text="Hello there", chunks=2)
            with httpx.stream(
                "POST",
                f"{base}/v1/agents/{agent_id}/session/{session_id}/turn",
                json={"messages": [{"role": "user", "content": "hi"}], "stream": True},
                timeout=30,
            ) as answer:
                events = sse_events(answer.read().decode())
            time.sleep(0.2)  # the lifecycle event follows the stream's end
            after_turn = (aws_front.connections, model_front.connections)
        finally:
            process.terminate()
            process.wait(timeout=30)
    assert event_types(events)[-1] == "turn_complete"
    assert model.authorizations == ["Bearer sk-test"]
    if connected:
        assert at_init == (4, 1)  # DynamoDB's two, the events', the secret's read; the model's
        assert after_turn == at_init
    else:
        assert at_init == (0, 0)
        assert after_turn[0] >= 4 and after_turn[1] == 1


def test_a_connection_that_fails_at_init_leaves_the_function_serving(aws):
    """The model's endpoint refuses connections and its key's secret is missing: init logs
    it and the function serves; the turn meets the failure as it would have anyway."""
    agent_id, session_id = _session(aws)
    port = _free_port()
    env = {
        **CREDENTIALS,
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(ROOT / "layers" / "agents_core"),
        "AWS_ENDPOINT_URL": aws,
        "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
        "TABLE_NAME": TABLE,
        "EVENT_BUS_NAME": BUS,
        "OPENAI_BASE_URL": f"http://127.0.0.1:{_free_port()}/v1",  # nothing listens
        "OPENAI_API_KEY_SECRET_ID": "no-such-secret",
        "POWERTOOLS_METRICS_DISABLED": "true",
    }
    process = _serve("turns", port, env)
    try:
        base = f"http://127.0.0.1:{port}"
        _ready(process, base)
        answer = httpx.post(
            f"{base}/v1/agents/{agent_id}/session/{session_id}/turn",
            json={"messages": [{"role": "user", "content": "hi"}]},
            timeout=30,
        )
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert "could not connect at init" in process.stdout.read().decode()
    assert answer.status_code == 502
    assert "API key is unavailable" in answer.text
