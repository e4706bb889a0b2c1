"""What ships is what is tested: every function started from its build output, as Lambda runs it.

`sam build` is done as SAM does it, for this machine's platform: each resource's Makefile target
runs from a scratch copy of its folder with ARTIFACTS_DIR set (template.yaml: BuildMethod
makefile), the layer with LAYER_TARGET=--host, from the same dependency list (its install cached
under build/layer-cache/ by a hash of that list). Each function then starts with nothing
importable but its own folder, the layer's python/ folder (Lambda's /opt/python) and the
runtime's boto3: the buffered agents function behind a stand-in for the Lambda runtime
(tests/artifact_runtime.py) fed events/ files; the streaming ones through their run.sh, as the
Lambda Web Adapter starts them (PORT set, uvicorn), each sent an events/ file as the adapter
forwards it (an HTTP request carrying x-amzn-request-context; an SQS event POSTed to the
pass-through path /events). AWS is a moto server, the Responses API's model a scripted
OpenAI-compatible server.
"""

from __future__ import annotations

import ast
import compileall
import importlib.util
import json
import os
import selectors
import shutil
import socket
import subprocess
import sys
import time
from base64 import b64decode
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import boto3
import httpx
import pytest
from agents_core.store.schema import create_table_if_missing
from moto.server import ThreadedMotoServer

from .lambda_support import ROOT, load_event
from .test_template import template
from .turn_support import sse_events

TABLE = "artifact-test"
BUS = "artifact-test-turns"
# The functions the Lambda Web Adapter runs (run.sh): three streaming, the queue consumer not.
STREAMING = ("TurnsFunction", "ResumeFunction", "ResumeQueueFunction", "ResponsesFunction")
STARTUP_SECONDS = 60

# The placeholders the events/ files carry, replaced by the ids the functions hand out.
AGENT = "{{agent_id}}"
SESSION = "{{session_id}}"
TURN = "{{turn_id}}"
CALL = "{{call_id}}"
TOKEN = "{{resume_token}}"
AWAITING_QUEUE = "artifact-test-awaiting"
BACKGROUND_QUEUE = "artifact-test-background"

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}


def _build_layer_module():
    path = ROOT / "layers" / "agents_core" / "build_layer.py"
    spec = importlib.util.spec_from_file_location("build_layer", path)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sam_build(out: Path, scratch: Path) -> dict[str, Path]:
    """Every resource built as `sam build` builds a BuildMethod makefile one: the build output
    of each, by logical id."""
    built = {}
    for logical_id, resource in template()["Resources"].items():
        if (resource.get("Metadata") or {}).get("BuildMethod") != "makefile":
            continue
        properties = resource["Properties"]
        source = ROOT / (properties.get("CodeUri") or properties["ContentUri"])
        work = scratch / logical_id
        shutil.copytree(source, work, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        artifacts = out / logical_id
        artifacts.mkdir(parents=True)
        env = {
            **os.environ,
            "ARTIFACTS_DIR": str(artifacts),
            "PYTHON": sys.executable,
            "LAYER_TARGET": "--host",
        }
        result = subprocess.run(
            ["make", "--makefile", str(source / "Makefile"), f"build-{logical_id}"],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, f"{logical_id}: {result.stdout}{result.stderr}"
        built[logical_id] = artifacts
    return built


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """The build output of every resource, and a folder with the runtime's own packages."""
    base = tmp_path_factory.mktemp("artifacts")
    built = sam_build(base / "build", base / "scratch")
    build_layer = _build_layer_module()
    runtime = build_layer.install(build_layer.runtime_requirements(), build_layer.HOST)
    compileall.compile_dir(runtime, quiet=1, workers=2)  # as the runtime's boto3 comes; once
    return built, runtime


@pytest.fixture(scope="module")
def aws():
    """A moto server with the table (the layer's own definition) and the event bus."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    session = boto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )
    create_table_if_missing(session.client("dynamodb", endpoint_url=url), TABLE)
    events = session.client("events", endpoint_url=url)
    events.create_event_bus(Name=BUS)
    # A tool worker's subscription: where a paused turn's resume token is learnt.
    sqs = session.client("sqs", endpoint_url=url)
    sqs.create_queue(QueueName=BACKGROUND_QUEUE)
    queue = sqs.create_queue(QueueName=AWAITING_QUEUE)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]
    pattern = {"detail-type": ["Turn Awaiting Input"]}
    events.put_rule(Name="awaiting", EventBusName=BUS, EventPattern=json.dumps(pattern))
    events.put_targets(
        Rule="awaiting", EventBusName=BUS, Targets=[{"Id": "q", "Arn": arn["QueueArn"]}]
    )
    yield url
    server.stop()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class BufferedFunction:
    """A buffered function's build output behind the runtime stand-in: one event in, one
    result out, in the same process (a warm container)."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self._selector = selectors.DefaultSelector()
        self._selector.register(process.stdout, selectors.EVENT_READ)
        self._pending = b""

    def read(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._pending:
            if not self._selector.select(max(0.0, deadline - time.monotonic())):
                raise TimeoutError("the function did not answer")
            data = os.read(self.process.stdout.fileno(), 65536)
            if not data:
                raise RuntimeError("the function exited")
            self._pending += data
        line, self._pending = self._pending.split(b"\n", 1)
        return json.loads(line)

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        self.process.stdin.write(json.dumps(event).encode() + b"\n")
        self.process.stdin.flush()
        return self.read(timeout=30)


@contextmanager
def buffered_function(build, logical_id: str, env: dict[str, str]):
    """A plain-handler function's build output behind the runtime stand-in, ready; stopped on
    exit, and its stderr must hold no traceback."""
    built, runtime = build
    layers = template()["Resources"][logical_id]["Properties"].get("Layers", [])
    # /opt/python: the layer's, or, for a function without it, a folder with nothing in it.
    uses_layer = any("AgentsCoreLayer" in str(layer) for layer in layers)  # !Ref, as loaded
    layer = built["AgentsCoreLayer"] / "python" if uses_layer else built[logical_id] / ".no-layer"
    layer.mkdir(exist_ok=True)
    process = subprocess.Popen(
        [
            sys.executable,
            "-I",  # no PYTHON* variables, no script folder on sys.path
            "-S",  # no site-packages
            "-B",  # no bytecode written (/opt is read-only in Lambda)
            str(Path(__file__).with_name("artifact_runtime.py")),
            str(built[logical_id]),
            str(layer),
            str(runtime),
            template()["Resources"][logical_id]["Properties"]["Handler"],
        ],
        cwd=built[logical_id],
        env={
            **CREDENTIALS,
            "PATH": "/usr/bin:/bin",
            "AWS_LAMBDA_FUNCTION_NAME": logical_id,
            "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
            "POWERTOOLS_SERVICE_NAME": "serverless-agents",
            **env,
        },
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        function = BufferedFunction(process)
        assert function.read(timeout=STARTUP_SECONDS) == {"ready": True}
        yield function
    finally:
        process.terminate()
        _, errors = process.communicate(timeout=10)
    assert b"Traceback" not in errors, errors.decode(errors="replace")[-3000:]


@pytest.fixture(scope="module")
def functions(build, aws, model, tmp_path_factory):
    """Every function started from its build output, in parallel; their logs in `logs/`."""
    built, runtime = build
    layer = built["AgentsCoreLayer"] / "python"
    base = tmp_path_factory.mktemp("lambda")
    logs = base / "logs"
    logs.mkdir()
    # The runtime's `python`: this interpreter without its site-packages (-S).
    shim = base / "bin"
    shim.mkdir()
    (shim / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    (shim / "python").chmod(0o755)
    resources = template()["Resources"]

    def environment(logical_id: str) -> dict[str, str]:
        return {
            **CREDENTIALS,
            "PATH": f"{shim}:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "AWS_ENDPOINT_URL": aws,
            "AWS_LAMBDA_FUNCTION_NAME": logical_id,
            # As Lambda starts a function on demand: its init primed (Services.prime).
            "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
            "LAMBDA_TASK_ROOT": str(built[logical_id]),
            "PYTHONPATH": str(runtime),  # in Lambda, the runtime's own packages
            "PYTHONDONTWRITEBYTECODE": "1",  # /opt is read-only in Lambda
            "TABLE_NAME": TABLE,
            "EVENT_BUS_NAME": BUS,
            "BACKGROUND_QUEUE_NAME": BACKGROUND_QUEUE,
            "POWERTOOLS_SERVICE_NAME": "serverless-agents",
        }

    processes: dict[str, subprocess.Popen] = {}
    ports: dict[str, int] = {}
    outputs = {name: (logs / f"{name}.log").open("wb") for name in (*STREAMING, "AgentsFunction")}
    try:
        for logical_id in STREAMING:
            ports[logical_id] = free_port()
            env = {
                **environment(logical_id),
                "PORT": str(ports[logical_id]),
                "LAYER_PYTHON_DIR": str(layer),
            }
            if logical_id == "ResponsesFunction":
                env |= {"OPENAI_BASE_URL": model.url, "INFERENCE_TIMEOUT_SECONDS": "10"}
            handler = resources[logical_id]["Properties"]["Handler"]  # run.sh
            processes[logical_id] = subprocess.Popen(
                [str(built[logical_id] / handler)],
                cwd=built[logical_id],
                env=env,
                stdout=outputs[logical_id],
                stderr=subprocess.STDOUT,
            )
        processes["AgentsFunction"] = subprocess.Popen(
            [
                sys.executable,
                "-I",  # no PYTHON* variables, no script folder on sys.path
                "-S",  # no site-packages
                "-B",  # no bytecode written (/opt is read-only in Lambda)
                str(Path(__file__).with_name("artifact_runtime.py")),
                str(built["AgentsFunction"]),
                str(layer),
                str(runtime),
                resources["AgentsFunction"]["Properties"]["Handler"],
            ],
            cwd=built["AgentsFunction"],
            env=environment("AgentsFunction"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=outputs["AgentsFunction"],
        )
        agents = BufferedFunction(processes["AgentsFunction"])
        urls = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
        try:
            assert agents.read(timeout=STARTUP_SECONDS) == {"ready": True}
            for logical_id, url in urls.items():
                wait_until_ready(processes[logical_id], url)
        except Exception as err:
            raise AssertionError(f"{err}\n{_logs(logs)}") from err
        yield agents, urls, logs, processes
    finally:
        for process in processes.values():
            process.terminate()
        for process in processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    pipe.close()
        for output in outputs.values():
            output.close()


def wait_until_ready(process: subprocess.Popen, url: str) -> None:
    """The Web Adapter's readiness check: any answer below 500 on GET /."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args[0]} exited with {process.returncode}")
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise TimeoutError(f"{process.args[0]} did not answer on {url}")


def _logs(folder: Path) -> str:
    return "\n".join(
        f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in folder.iterdir()
    )


def forward(url: str, event: dict[str, Any]) -> httpx.Response:
    """An API Gateway event as the Web Adapter forwards it: an HTTP request, the request context
    in x-amzn-request-context."""
    headers = {k: v[0] for k, v in (event.get("multiValueHeaders") or {}).items()}
    headers = headers or dict(event.get("headers") or {})
    headers["x-amzn-request-context"] = json.dumps(event["requestContext"])
    query = event.get("multiValueQueryStringParameters") or {}
    path = event["path"] + (f"?{urlencode(query, doseq=True)}" if query else "")
    body = event.get("body") or ""
    content = b64decode(body) if event.get("isBase64Encoded") else body.encode()
    return httpx.request(
        event["httpMethod"], url + path, headers=headers, content=content, timeout=30
    )


def imported_modules(source: str) -> set[str]:
    """The top-level modules a file imports, at run time (not under `if TYPE_CHECKING:`)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return found


def test_every_module_the_built_code_imports_is_in_the_layer_or_the_runtime(build):
    """...including imports on paths the other test does not take (Bedrock, errors, lazy ones)."""
    built, runtime = build
    layer = built["AgentsCoreLayer"] / "python"
    sources = [*(layer / "agents_core").rglob("*.py")]
    sources += [out / "app.py" for name, out in built.items() if (out / "app.py").is_file()]
    modules = set().union(*(imported_modules(path.read_text()) for path in sources))
    own = {"agents_core", "app"}
    third_party = modules - own - set(sys.stdlib_module_names)
    assert {"fastapi", "pydantic", "botocore", "httpx"} <= third_party  # the scan sees imports

    def present(root: Path, name: str) -> bool:
        return (
            (root / name).is_dir()
            or (root / f"{name}.py").is_file()
            or any(root.glob(f"{name}.*.so"))
        )

    # What only the authorizer imports (PyJWT) is in its own build, which the layer leaves out.
    authorizer = built["AuthorizerFunction"]
    missing = sorted(
        m
        for m in third_party
        if not (present(layer, m) or present(runtime, m) or present(authorizer, m))
    )
    assert not missing, f"imported but neither in the layer nor in the runtime: {missing}"
    assert present(authorizer, "jwt") and not present(layer, "jwt")


def test_every_built_function_starts_with_only_its_layer_and_serves_its_events(
    functions, model, aws
):
    agents, urls, logs, _ = functions
    try:
        check_turns_resumed_over_http_and_from_the_queue(agents, urls, aws)
        check_the_playground_is_served_by_the_agents_function(agents)
        check_a_streamed_response_from_an_openai_compatible_model(urls, model)
    except AssertionError as err:
        raise AssertionError(f"{err}\n{_logs(logs)}") from err


def resume_token(aws_url: str, turn_id: str) -> str:
    """The token of the turn's `Turn Awaiting Input` event, as a subscribed worker gets it."""
    sqs = boto3.client("sqs", endpoint_url=aws_url, region_name="us-east-1", **_keys())
    queue = sqs.get_queue_url(QueueName=AWAITING_QUEUE)["QueueUrl"]
    for _ in range(20):
        for message in sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get(
            "Messages", []
        ):
            detail = json.loads(message["Body"])["detail"]
            if detail["turn_id"] == turn_id:
                return detail["resume_token"]
        time.sleep(0.25)
    raise AssertionError(f"no Turn Awaiting Input event for {turn_id}")


def _keys() -> dict[str, str]:
    return {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def check_turns_resumed_over_http_and_from_the_queue(
    agents: BufferedFunction, urls, aws_url: str
) -> None:
    create = load_event("agents/create_agent.json")
    weather = {
        "name": "get_weather",
        "description": "Weather",
        "parameters": [
            {"name": "city", "parameter_type": "string", "description": "City", "required": True}
        ],
    }
    config = {"model": "offline", "instructions": "Be brief.", "client_tools": [weather]}
    create["body"] = json.dumps({"agent_config": config})
    created = agents.invoke(create)
    assert created["statusCode"] == 200, created
    ids = {AGENT: json.loads(created["body"])["agent_id"]}
    session = agents.invoke(load_event("agents/create_session.json", ids))
    assert session["statusCode"] == 200, session
    ids[SESSION] = json.loads(session["body"])["session_id"]

    def paused_turn() -> dict[str, str]:
        """A streamed turn from the turns function, paused on the client tool."""
        reply = forward(urls["TurnsFunction"], load_event("turns/create_turn_stream.json", ids))
        assert reply.status_code == 200 and reply.headers["content-type"].startswith(
            "text/event-stream"
        ), reply.text
        paused = sse_events(reply.text)[-1]["event"]["payload"]
        assert paused["event_type"] == "turn_awaiting_input", paused
        call = paused["turn"]["output_message"]["tool_calls"][0]
        assert call["arguments"] == {"city": "Paris"}
        return {**ids, TURN: paused["turn"]["turn_id"], CALL: call["call_id"]}

    # Resumed over HTTP: the resume function streams the rest of the turn.
    first = paused_turn()
    resumed = forward(urls["ResumeFunction"], load_event("resume/resume_turn.json", first))
    final = sse_events(resumed.text)[-1]["event"]["payload"]
    assert final["event_type"] == "turn_complete", final
    assert final["turn"]["output_message"]["content"] == "Tool result: 18C and sunny"

    # Resumed from the queue: an SQS event on the Web Adapter's pass-through path.
    second = paused_turn()
    second[TOKEN] = resume_token(aws_url, second[TURN])
    batch = load_event("resume/sqs_resume_batch.json", second)
    answer = httpx.post(f"{urls['ResumeQueueFunction']}/events", json=batch, timeout=30)
    assert answer.status_code == 200 and answer.json() == {"batchItemFailures": []}, answer.text
    turn = forward(urls["TurnsFunction"], load_event("agents/get_turn.json", second))
    assert turn.status_code == 200, turn.text  # streamed: a turn may pass 6 MB
    assert turn.json()["output_message"]["content"] == "Tool result: 18C and sunny"


def check_the_playground_is_served_by_the_agents_function(agents: BufferedFunction) -> None:
    """The page and its script from the layer's package data, through Mangum."""
    for path, kind in (
        ("/playground", "text/html"),
        ("/playground/playground.js", "text/javascript"),
    ):
        event = load_event("agents/list_agents.json")
        event.update(path=path, resource=path, queryStringParameters=None)
        event.update(multiValueQueryStringParameters=None)
        event["requestContext"].update(resourcePath=path, path=f"/v0{path}")
        answer = agents.invoke(event)
        assert answer["statusCode"] == 200, answer
        headers = dict(answer.get("headers") or {})
        headers.update((k, v[0]) for k, v in (answer.get("multiValueHeaders") or {}).items())
        assert headers["content-type"].startswith(kind), answer
        assert "data-testid" in answer["body"] or "fetch(" in answer["body"]


def check_a_streamed_response_from_an_openai_compatible_model(urls, model) -> None:
    model.reset()
    event = load_event("responses/create_response_stream.json")
    body = json.loads(event["body"])
    event["body"] = json.dumps({**body, "model": "meta-llama/Llama-3.2-3B-Instruct"})  # not offline
    reply = forward(urls["ResponsesFunction"], event)
    events = sse_events(reply.text)
    assert events and events[-1]["type"] == "response.completed", reply.text
    output = events[-1]["response"]["output"][0]["content"][0]["text"]
    assert output == "echo: Hello, streaming!"
    assert model.requests[-1]["messages"][-1]["content"] == "Hello, streaming!"


def test_the_built_authorizer_answers_api_gateways_events_from_the_table(build, aws):
    """The authorizer from its build output, as Lambda runs it: a TOKEN and a REQUEST event with a
    stored key are allowed for its tenant; so are JWTs of the configured issuer (RS256 and
    ES256: PyJWT and cryptography are in its own build, not the layer); an unknown key is the error API Gateway
    turns into a 401."""
    from agents_core.auth import KeyStore

    from .test_authorizer import request_event, token_event
    from .test_jwt import CLIENT_ID, EC_KEY, jwks_issuer

    dynamodb = boto3.client(
        "dynamodb",
        endpoint_url=aws,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    issued = KeyStore(dynamodb, TABLE).create("acme")

    with jwks_issuer() as issuer:
        env = {
            "AWS_ENDPOINT_URL": aws,
            "TABLE_NAME": TABLE,
            "JWT_ISSUER": issuer.url,
            "JWT_AUDIENCE": CLIENT_ID,
        }
        with buffered_function(build, "AuthorizerFunction", env) as authorizer:
            for event in (
                token_event(f"Bearer {issued.key}"),
                request_event({"authorization": f"Bearer {issued.key}"}),
            ):
                answer = authorizer.invoke(event)
                assert answer["principalId"] == "acme", answer
                assert answer["policyDocument"]["Statement"][0]["Effect"] == "Allow"
            access = issuer.token(EC_KEY, "ec-1", "ES256", token_use="access", client_id=CLIENT_ID)
            for token in (issuer.token(), access):
                answer = authorizer.invoke(token_event(f"Bearer {token}"))
                assert answer.get("context") == {"tenant": "acme", "key_id": "jwt:5f8a-user"}, (
                    answer
                )
            refused = authorizer.invoke(token_event("Bearer " + issued.key[:-1] + "_"))
            assert refused["errorMessage"] == "Unauthorized", refused
            expired = authorizer.invoke(token_event(f"Bearer {issuer.token(exp=1)}"))
            assert expired["errorMessage"] == "Unauthorized", expired


def test_the_built_background_function_runs_a_queued_response_from_its_queue_message(
    functions, build, aws, model
):
    """A background response created through the built responses function, its queue message
    handed to the built background function (a plain handler) as Lambda's SQS poller hands it:
    the response ends completed, readable through the responses function."""
    from agents_core.services.resume_queue import lambda_sqs_event

    _, urls, logs, _ = functions
    model.reset()
    event = load_event("responses/create_response.json")
    body = json.loads(event["body"])
    event["body"] = json.dumps(
        {**body, "model": "meta-llama/Llama-3.2-3B-Instruct", "background": True}
    )
    created = forward(urls["ResponsesFunction"], event)
    assert created.status_code == 200 and created.json()["status"] == "queued", created.text
    response_id = created.json()["id"]

    sqs = boto3.client("sqs", endpoint_url=aws, region_name="us-east-1", **_keys())
    queue = sqs.get_queue_url(QueueName=BACKGROUND_QUEUE)["QueueUrl"]
    messages = sqs.receive_message(
        QueueUrl=queue, MaxNumberOfMessages=1, MessageAttributeNames=["All"], WaitTimeSeconds=5
    )["Messages"]
    sqs_event = lambda_sqs_event(messages, "arn:aws:sqs:us-east-1:123456789012:bg", "us-east-1")
    env = {
        "AWS_ENDPOINT_URL": aws,
        "TABLE_NAME": TABLE,
        "EVENT_BUS_NAME": BUS,
        "BACKGROUND_QUEUE_NAME": BACKGROUND_QUEUE,
        "OPENAI_BASE_URL": model.url,
        "RUN_SUSPEND_MARGIN_SECONDS": "1",
    }
    with buffered_function(build, "BackgroundFunction", env) as worker:
        assert worker.invoke(sqs_event) == {"batchItemFailures": []}
    read = forward(
        urls["ResponsesFunction"],
        load_event("responses/get_response.json", {"{{response_id}}": response_id}),
    )
    assert read.status_code == 200, f"{read.text}\n{_logs(logs)}"
    assert read.json()["status"] == "completed", read.text
    assert read.json()["output"][0]["content"][0]["text"].startswith("echo: ")


def test_the_built_ingest_function_ingests_a_file_attached_to_a_vector_store(build, aws):
    """A file uploaded and attached through the services (against the same moto server), its
    ingestion message handed to the built ingest function (a plain handler) as Lambda's SQS
    poller hands it: the file ends completed, its vectors in the store's index."""
    from agents_core.api.files import CreateVectorStoreRequest
    from agents_core.services import build_services
    from agents_core.services.resume_queue import lambda_sqs_event
    from agents_core.settings import Settings

    session = boto3.Session(region_name="us-east-1", **_keys())
    clients = {name: session.client(name, endpoint_url=aws) for name in ("sqs", "s3", "s3vectors")}
    settings = Settings(
        table_name=TABLE,
        files_bucket="artifact-test-files",
        vector_bucket_name="artifact-test-vectors",
        ingest_queue_name="artifact-test-ingest",
    )
    clients["s3"].create_bucket(Bucket=settings.files_bucket)
    clients["sqs"].create_queue(QueueName=settings.ingest_queue_name)
    services = build_services(settings, session.client("dynamodb", endpoint_url=aws))
    services.sqs_client, services.s3_client = clients["sqs"], clients["s3"]
    services.s3vectors_client = clients["s3vectors"]
    services.vector_index.ensure_bucket()
    file = services.files.upload("acme", "note.md", "assistants", b"# Note\nSeals bask on rocks.")
    store = services.vector_stores.create("acme", CreateVectorStoreRequest(file_ids=[file.id]))
    queue = services.vector_stores.queue_url
    messages = clients["sqs"].receive_message(
        QueueUrl=queue,
        MaxNumberOfMessages=1,
        MessageAttributeNames=["All"],
        AttributeNames=["All"],
        WaitTimeSeconds=5,
    )["Messages"]
    sqs_event = lambda_sqs_event(messages, "arn:aws:sqs:us-east-1:123456789012:in", "us-east-1")
    env = {
        "AWS_ENDPOINT_URL": aws,
        "TABLE_NAME": TABLE,
        "FILES_BUCKET": settings.files_bucket,
        "VECTOR_BUCKET_NAME": settings.vector_bucket_name,
        "INGEST_QUEUE_URL": queue,
    }
    with buffered_function(build, "IngestFunction", env) as worker:
        assert worker.invoke(sqs_event) == {"batchItemFailures": []}
    assert services.vector_stores.file("acme", store.id, file.id).status == "completed"
    assert services.vector_stores.get("acme", store.id).file_counts.completed == 1


_LOADED = """
import json, sys
sys.path[:0] = sys.argv[1:4]
import app
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("boto3", "s3transfer", "urllib3")
    or m.startswith(("pydantic.v1", "agents_core.api.responses"))
    or m.startswith("botocore.") and not m.startswith(("botocore.exceptions", "botocore.vendored")))))
"""


@pytest.mark.parametrize(
    ("logical_id", "responses_models"),
    [("TurnsFunction", False), ("ResumeFunction", False), ("ResponsesFunction", True)],
)
def test_a_built_function_s_init_leaves_out_what_none_of_its_requests_use(
    build, logical_id, responses_models
):
    """Neither boto3 (with s3transfer) nor pydantic's copy of its 1.x API, which FastAPI imports
    only to ask whether a model is a 1.x one (about 120 ms of an init at a full core); of
    botocore only its exceptions, its clients being made when first needed, which no run is
    (about 0.2 s); the turns and resume functions no Responses API models either."""
    built, _ = build
    layer = built["AgentsCoreLayer"] / "python"
    assert (layer / "pydantic").is_dir() and not (layer / "pydantic" / "v1").exists()
    loaded = after_init(build, logical_id, _LOADED)
    assert [m for m in loaded if not m.startswith("agents_core")] == []
    assert bool(loaded) is responses_models


def after_init(build, logical_id: str, script: str, env: dict[str, str] | None = None) -> Any:
    """What `script` prints last (JSON) in a built function's folder, run as an on-demand init
    with its layer (if it has one: an empty folder in its place) and the runtime's packages
    first on sys.path (`sys.argv[1:4]`)."""
    built, runtime = build
    layers = template()["Resources"][logical_id]["Properties"].get("Layers", [])
    if any("AgentsCoreLayer" in str(layer) for layer in layers):
        layer = built["AgentsCoreLayer"] / "python"
    else:
        layer = built[logical_id] / ".no-layer"
        layer.mkdir(exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-B", "-c", script]
        + [str(built[logical_id]), str(layer), str(runtime)],
        cwd=built[logical_id],
        env={
            **CREDENTIALS,
            "PATH": "/usr/bin:/bin",
            "AWS_LAMBDA_FUNCTION_NAME": logical_id,
            "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
            "TABLE_NAME": TABLE,
            **(env or {}),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


_CERTIFICATES = """
import json, os, sys
sys.path[:0] = sys.argv[1:4]
import app
import certifi
from agents_core import aws, http1
cafile, capath = http1.default_certificates()
print(json.dumps({
    "model": [cafile, capath],
    "aws": list(aws._certificates()),
    "contexts": http1.tls_context.cache_info().currsize,
    "loaded": http1.default_tls_context().cert_store_stats()["x509_ca"],
    "files": len(os.listdir(capath)),
    "bundle": open(certifi.where()).read().count("-----BEGIN CERTIFICATE-----"),
}))
"""


def test_a_built_function_verifies_tls_with_the_layers_hashed_directory_of_certifis_bundle(build):
    """Its primed init makes the one TLS context the model's, the tools' and AWS's clients
    share, over the directory the layer build wrote (a file per certificate of certifi's
    bundle), and parses none of them: a handshake reads the root it needs."""
    found = after_init(build, "TurnsFunction", _CERTIFICATES)
    folder = str(build[0]["AgentsCoreLayer"] / "python" / "agents_core" / "certificates")
    assert found["model"] == found["aws"] == [None, folder]
    assert found["contexts"] == 1 and found["loaded"] == 0
    assert found["files"] == found["bundle"] > 100


_AUTHORIZER_CERTIFICATES = """
import json, os, sys
sys.path[:0] = sys.argv[1:4]
import app
import certifi
from agents_core import aws, http1
from agents_core.auth import tokens
print(json.dumps({
    "aws": list(aws._certificates()),
    "jwks": tokens._tls_context() is http1.default_tls_context(),
    "contexts": http1.tls_context.cache_info().currsize,
    "loaded": tokens._tls_context().cert_store_stats()["x509_ca"],
    "files": len(os.listdir(aws._certificates()[1])),
    "bundle": open(certifi.where()).read().count("-----BEGIN CERTIFICATE-----"),
}))
"""


def test_the_built_authorizer_verifies_tls_with_its_own_hashed_directory_of_certifis_bundle(
    build,
):
    """The authorizer, built without the layer, carries certifi and its directory too: its
    primed init (JWTs on) makes one context for its key store's DynamoDB client and the JWKS
    fetch, and parses no certificate."""
    jwt = {"JWT_ISSUER": "https://issuer.example", "JWT_AUDIENCE": "app"}
    found = after_init(build, "AuthorizerFunction", _AUTHORIZER_CERTIFICATES, jwt)
    folder = str(build[0]["AuthorizerFunction"] / "agents_core" / "certificates")
    assert found["aws"] == [None, folder]
    assert found["jwks"] and found["contexts"] == 1 and found["loaded"] == 0
    assert found["files"] == found["bundle"] > 100


def test_the_layer_carries_the_playground_page_and_nothing_else_of_its_folder_is_served(build):
    built, _ = build
    folder = built["AgentsCoreLayer"] / "python" / "agents_core" / "web" / "playground"
    assert sorted(p.name for p in folder.iterdir()) == [
        "index.html",
        "playground.css",
        "playground.js",
    ]


def test_the_layer_leaves_the_authorizers_jwt_stack_to_the_authorizers_own_build(build):
    """The shared layer carries no PyJWT or cryptography (16 MB only the authorizer imports);
    the authorizer's artifact carries them, agents_core, and none of the layer's web stack."""
    built, _ = build
    layer, authorizer = built["AgentsCoreLayer"] / "python", built["AuthorizerFunction"]
    for package in ("jwt", "cryptography", "cffi"):
        assert not (layer / package).exists(), package
        assert (authorizer / package).exists(), package
    # cryptography's OpenSSL bindings load cffi's backend at the first RS256/ES256 JWT.
    assert any(authorizer.glob("_cffi_backend*.so")) and not any(layer.glob("_cffi_backend*"))
    assert (authorizer / "agents_core" / "auth" / "tokens.py").is_file()
    for package in ("fastapi", "pydantic_core", "httpx", "mcp"):
        assert not (authorizer / package).exists(), package
    resources = template()["Resources"]
    assert "Layers" not in resources["AuthorizerFunction"]["Properties"]


def section_names(library: Path) -> list[str]:
    """The names in a 64-bit little-endian ELF file's section table, read as the format says."""
    data = library.read_bytes()
    shoff, shentsize, shnum, names_index = (
        int.from_bytes(data[0x28:0x30], "little"),
        *(int.from_bytes(data[at : at + 2], "little") for at in (0x3A, 0x3C, 0x3E)),
    )

    def field(index: int, at: int, size: int) -> int:
        start = shoff + index * shentsize + at
        return int.from_bytes(data[start : start + size], "little")

    names_at = field(names_index, 0x18, 8)
    found = []
    for index in range(shnum):
        start = names_at + field(index, 0, 4)
        found.append(data[start : data.index(b"\0", start)].decode())
    return found


def test_the_layers_shared_objects_carry_no_symbols_or_debug_information(build):
    """uvloop's, greenlet's and httptools' wheels ship their debug information (15 MB of
    uvloop's 16): the layer's copies have none, nor a symbol table."""
    built, _ = build
    libraries = list((built["AgentsCoreLayer"] / "python").rglob("*.so"))
    assert {p.parent.name for p in libraries} >= {"uvloop", "greenlet", "parser"}
    for library in libraries:
        names = section_names(library)
        assert ".dynsym" in names and ".text" in names, library
        assert not [n for n in names if n.startswith(".debug") or n == ".symtab"], library


def test_the_streaming_functions_serve_on_uvloops_event_loop(functions):
    """run.sh asks uvicorn for uvloop: each server has the layer's (stripped) uvloop loaded."""
    *_, processes = functions
    for logical_id in STREAMING:
        maps = Path(f"/proc/{processes[logical_id].pid}/maps").read_text()
        assert "/uvloop/loop." in maps, logical_id
