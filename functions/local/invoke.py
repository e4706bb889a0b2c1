"""`make invoke`: run one function of template.yaml on one event, the way `sam local invoke`
does, without a container, against the AWS endpoint of a running `make run` server.

    make invoke EVENT=events/agents/get_agent.json [FUNCTION=AgentsFunction] [BUILD_DIR=...]

What runs is what the template declares: the function's folder (its CodeUri) as the working
directory and first on the import path, the layer next (where Lambda puts /opt/python), and the
template's environment variables.

- A Python handler (`app.handler`, AgentsFunction) runs in a child process that imports it once
  and is called with each event, like Lambda's Python runtime; its answer is printed as JSON.
- A `run.sh` handler (TurnsFunction, ResumeFunction, ResponsesFunction) runs under a stand-in for
  the Lambda Web Adapter: `run.sh` starts with AWS_LWA_PORT set, the adapter waits until `GET /`
  answers below 500, then replays an API Gateway event as an HTTP request (the event's path, query,
  headers and body, plus the request context in `x-amzn-request-context`) and prints the answer
  as it streams; any other event (an SQS batch) is POSTed as JSON to AWS_LWA_PASS_THROUGH_PATH.
- An EventBridge event (events/lifecycle) is put on the turn event bus, and what a subscribed
  rule's target receives is printed: the bus has no subscriber in the template, only users do.

Events carry `{{agent_id}}`, `{{session_id}}`, `{{turn_id}}`, `{{call_id}}`, `{{step_id}}`,
`{{resume_token}}` (from the paused turn's `Turn Awaiting Input` event) and `{{response_id}}`
where they need an existing item. Each replay fills them with fresh items made through the
functions themselves from the checked-in create events (an agent from
events/agents/create_agent.json, a session, a turn paused on its client tool from
events/turns/create_turn_stream.json, a response from events/responses/create_response.json),
so every event answers as its name promises, in any order.

The AWS endpoint is AWS_ENDPOINT_URL when set; otherwise the one the `make run` server on
127.0.0.1:$PORT reports at /local/aws (its embedded moto server).
"""

from __future__ import annotations

import argparse
import base64
import importlib
import json
import os
import re
import select
import socket
import subprocess
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
AGENT_SEEDS = {"agent_id", "session_id", "turn_id", "call_id", "step_id", "resume_token"}
PAUSED_SEEDS = {"turn_id", "call_id", "step_id", "resume_token"}
START_TIMEOUT = 30.0  # seconds a function may take to start (Lambda's init limit is 10 s)


class InvokeError(Exception):
    """A problem the user can fix: its message is the one line `make invoke` prints."""

    exit_code = 2


class FunctionFailed(InvokeError):
    """The function could not start, crashed, or returned an error."""

    exit_code = 1


# --- the template ---------------------------------------------------------------------------


def load_template(path: Path) -> dict[str, Any]:
    """template.yaml with CloudFormation's short tags (!Ref X) read as their long form."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
        name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
            if suffix == "GetAtt":
                value = value.split(".", 1)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        return {name: value}

    Loader.add_multi_constructor("!", tag)
    try:
        return yaml.load(path.read_text(), Loader=Loader)
    except OSError as err:
        raise InvokeError(f"cannot read {path}: {err.strerror}") from None


@dataclass
class FunctionSpec:
    """One AWS::Serverless::Function as `make invoke` runs it."""

    logical_id: str
    code_dir: Path
    handler: str
    memory: int
    timeout: int
    variables: dict[str, Any]
    routes: set[tuple[str, str]] = field(default_factory=set)  # (resource path, METHOD)
    sqs: bool = False

    @property
    def web_adapter(self) -> bool:
        """Started by the Lambda Web Adapter: the handler is a script serving HTTP on
        $AWS_LWA_PORT."""
        return not re.fullmatch(r"[\w.]+\.\w+", self.handler) or self.handler.endswith(".sh")


class Template:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.doc = load_template(path)
        self.resources: dict[str, Any] = self.doc.get("Resources", {})
        self.parameters: dict[str, Any] = self.doc.get("Parameters", {})
        self.globals: dict[str, Any] = (self.doc.get("Globals") or {}).get("Function", {})

    def of_type(self, kind: str) -> list[str]:
        return [name for name, res in self.resources.items() if res.get("Type") == kind]

    def function(self, logical_id: str) -> FunctionSpec:
        functions = self.of_type("AWS::Serverless::Function")
        if logical_id not in functions:
            raise InvokeError(
                f"{logical_id} is not a function of {self.path.name}: use one of"
                f" {', '.join(functions)}"
            )
        props = self.resources[logical_id]["Properties"]
        variables = dict((self.globals.get("Environment") or {}).get("Variables", {}))
        variables.update((props.get("Environment") or {}).get("Variables", {}))
        spec = FunctionSpec(
            logical_id=logical_id,
            code_dir=(self.path.parent / props["CodeUri"]).resolve(),
            handler=props.get("Handler", self.globals.get("Handler", "")),
            memory=int(props.get("MemorySize", self.globals.get("MemorySize", 128))),
            timeout=int(props.get("Timeout", self.globals.get("Timeout", 3))),
            variables=variables,
        )
        for event in (props.get("Events") or {}).values():
            if event.get("Type") == "Api":
                where = event["Properties"]
                spec.routes.add((where["Path"], where["Method"].upper()))
            elif event.get("Type") == "SQS":
                spec.sqs = True
        return spec

    def layer_dirs(self, logical_id: str) -> list[Path]:
        """The function's layers defined in this template (the Web Adapter's, an ARN, is
        emulated), as the directories Lambda would put on the import path."""
        props = self.resources[logical_id]["Properties"]
        refs = [*self.globals.get("Layers", []), *props.get("Layers", [])]
        layers = self.of_type("AWS::Serverless::LayerVersion")
        names = [ref.get("Ref") for ref in refs if isinstance(ref, dict)]
        dirs = [self._layer_dir(name) for name in names if name in layers]
        code = self.path.parent / props["CodeUri"]
        if not dirs and not (code / "agents_core").is_dir():
            # Built with its own dependencies (the authorizer): from source, the package comes
            # from the layer's folder, as its build copies it in.
            dirs = [self._layer_dir(name) for name in layers]
        return [d.resolve() for d in dirs]

    def _layer_dir(self, name: str) -> Path:
        """A built layer holds python/ (Lambda's /opt/python); the source tree holds the
        package itself."""
        content = self.path.parent / self.resources[name]["Properties"]["ContentUri"]
        return content / "python" if (content / "python").is_dir() else content

    def route(self, event: dict[str, Any]) -> str:
        """The resource the template sends `event` to: a function, or the event bus."""
        kind = event_kind(event)
        if kind == "eventbridge":
            buses = self.of_type("AWS::Events::EventBus")
            if buses:
                return buses[0]
        for name in self.of_type("AWS::Serverless::Function"):
            spec = self.function(name)
            if kind == "api" and (event.get("resource"), event.get("httpMethod")) in spec.routes:
                return name
            if kind == "sqs" and spec.sqs:
                return name
        raise InvokeError(
            f"no function in the template takes this event ({event.get('httpMethod', '')}"
            f" {event.get('resource', kind)}): name one with FUNCTION="
        )


def event_kind(event: dict[str, Any]) -> str:
    if "httpMethod" in event and "requestContext" in event:
        return "api"
    records = event.get("Records") or [{}]
    if records[0].get("eventSource") == "aws:sqs":
        return "sqs"
    if "detail-type" in event and "source" in event:
        return "eventbridge"
    return "other"


# --- the local AWS endpoint -----------------------------------------------------------------


@dataclass
class LocalAws:
    endpoint_url: str
    region: str
    table_name: str
    event_bus_name: str

    @classmethod
    def find(cls, port: int) -> LocalAws:
        """AWS_ENDPOINT_URL if set, else what the `make run` server on `port` uses."""
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        if os.environ.get("AWS_ENDPOINT_URL"):
            return cls(
                os.environ["AWS_ENDPOINT_URL"],
                region,
                os.environ.get("TABLE_NAME", "serverless-agents"),
                os.environ.get("EVENT_BUS_NAME", "serverless-agents"),
            )
        import httpx

        url = f"http://127.0.0.1:{port}/local/aws"
        try:
            info = httpx.get(url, timeout=5).raise_for_status().json()
        except (httpx.HTTPError, ValueError):
            raise InvokeError(
                f"no `make run` server answers at http://127.0.0.1:{port}: start one in another"
                " terminal (make run), pass its PORT=, or set AWS_ENDPOINT_URL"
            ) from None
        return cls(info["endpoint_url"], info["region"], info["table_name"], info["event_bus_name"])

    def client(self, service: str) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            service,
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            config=Config(connect_timeout=2, read_timeout=10, retries={"total_max_attempts": 2}),
            **_credentials(),
        )


def _credentials() -> dict[str, str]:
    """Yours when you have any; moto (and LocalStack) take any others."""
    if os.environ.get("AWS_ACCESS_KEY_ID") or os.environ.get("AWS_PROFILE"):
        return {}
    return {
        "aws_access_key_id": "local",
        "aws_secret_access_key": "local",
        "aws_session_token": "local",
    }


# --- running functions ----------------------------------------------------------------------


@dataclass
class Reply:
    """What a function answered: an HTTP status and body, or (for a Python handler) its raw
    return value or error too."""

    status: int | None
    body: str
    headers: dict[str, str] = field(default_factory=dict)
    payload: Any = None
    error: dict[str, Any] | None = None

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def function_env(spec: FunctionSpec, template: Template, aws: LocalAws, layers: list[Path]):
    """The environment Lambda would give the function: its template variables (resources
    resolved to the local ones, parameters to your shell's value of the same variable, else their
    default), Lambda's own variables, and the local AWS endpoint."""
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "TZ": ":UTC",
        "PYTHONPATH": os.pathsep.join(str(d) for d in layers),
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "AWS_ENDPOINT_URL": aws.endpoint_url,
        "AWS_REGION": aws.region,
        "AWS_DEFAULT_REGION": aws.region,
        "AWS_LAMBDA_FUNCTION_NAME": spec.logical_id,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory),
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",  # $LATEST: no snapshot; init is primed
        "LAMBDA_TASK_ROOT": str(spec.code_dir),
        "_HANDLER": spec.handler,
    }
    for name, value in os.environ.items():
        credentials = name.startswith("AWS_") and any(
            part in name for part in ("ACCESS_KEY", "SECRET", "SESSION_TOKEN", "PROFILE", "FILE")
        )
        passed = ("AWS_ENDPOINT_URL_", "OPENAI_", "POWERTOOLS_")  # local choices of yours
        if credentials or name == "HOME" or name.startswith(passed):
            env[name] = value
    env.update({f"AWS_{k.removeprefix('aws_').upper()}": v for k, v in _credentials().items()})
    # As under `make run`: metric lines stay out of the console unless asked for.
    env.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    resources = {
        **{name: aws.table_name for name in template.of_type("AWS::DynamoDB::Table")},
        **{name: aws.event_bus_name for name in template.of_type("AWS::Events::EventBus")},
    }
    for name, raw in spec.variables.items():
        ref = raw.get("Ref") if isinstance(raw, dict) else None
        if ref in resources:
            env[name] = resources[ref]
        elif name in os.environ:
            env[name] = os.environ[name]
        elif ref in template.parameters:
            default = template.parameters[ref].get("Default")
            if default is not None:
                env[name] = str(default)
        elif isinstance(raw, str | int | float):
            env[name] = str(raw)
        # anything else (a secret, an ARN) has no local equivalent: left unset
    env.pop("AWS_LAMBDA_EXEC_WRAPPER", None)  # this script stands in for the wrapper
    return env


def _lambda_context(spec: FunctionSpec, request_id: str) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "deadline": int(time.time() * 1000) + spec.timeout * 1000,
        "invoked_function_arn": f"arn:aws:lambda:us-east-1:123456789012:function:{spec.logical_id}",
        "env_config": {
            "function_name": spec.logical_id,
            "memory": spec.memory,
            "version": "$LATEST",
        },
    }


class PythonFunction:
    """A Python handler in its own process: imported once (the cold start), then called with
    each event over a pipe, like Lambda's runtime calls it."""

    def __init__(self, spec: FunctionSpec, env: dict[str, str], log: Any) -> None:
        self.spec, self.env, self.log = spec, env, log
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--runtime", self.spec.handler],
            cwd=self.spec.code_dir,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        ready = self._read(START_TIMEOUT)
        if "error" in ready:
            raise FunctionFailed(f"{self.spec.logical_id} failed to start: {ready['error']}")

    def invoke(self, event: dict[str, Any], on_chunk: Callable[[str], None] | None = None) -> Reply:
        assert self.proc and self.proc.stdin
        request_id = str(uuid.uuid4())
        message = {"event": event, "context": _lambda_context(self.spec, request_id)}
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        answer = self._read(self.spec.timeout)
        if "error" in answer:
            return Reply(None, "", payload=answer["error"], error=answer["error"])
        result = answer["result"]
        if not isinstance(result, dict) or "statusCode" not in result:
            return Reply(None, json.dumps(result), payload=result)
        body = result.get("body") or ""
        if result.get("isBase64Encoded"):
            body = base64.b64decode(body).decode(errors="replace")
        return Reply(result["statusCode"], body, result.get("headers") or {}, payload=result)

    def _read(self, timeout: float) -> dict[str, Any]:
        assert self.proc and self.proc.stdout
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            if not ready:
                self.stop()
                raise FunctionFailed(f"{self.spec.logical_id} timed out after {timeout:g} s")
            raise FunctionFailed(
                f"{self.spec.logical_id} exited (status {self.proc.wait()}); its log is above"
            )
        return json.loads(line)

    def stop(self) -> None:
        _stop(self.proc)


def _stop(proc: subprocess.Popen | None) -> None:
    """End a function's process: politely, then for good after five seconds."""
    if proc and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()


class WebAdapterFunction:
    """A `run.sh` function under a stand-in for the Lambda Web Adapter (its contract:
    AWS_LWA_PORT, readiness on GET /, the request context header, the pass-through path)."""

    def __init__(self, spec: FunctionSpec, env: dict[str, str], log: Any) -> None:
        self.spec, self.log = spec, log
        self.port = _free_port()
        self.env = {**env, "AWS_LWA_PORT": str(self.port), "PORT": str(self.port)}
        self.pass_through = env.get("AWS_LWA_PASS_THROUGH_PATH", "/events")
        self.ready_path = env.get("AWS_LWA_READINESS_CHECK_PATH", "/")
        self.base_path = env.get("AWS_LWA_REMOVE_BASE_PATH", "")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        import httpx

        script = self.spec.code_dir / self.spec.handler
        if not os.access(script, os.X_OK):
            raise FunctionFailed(
                f"{script} is missing or not executable, so Lambda could not start it either:"
                f" chmod +x {script}"
            )
        self.proc = subprocess.Popen(
            [str(script)], cwd=self.spec.code_dir, env=self.env, stdout=self.log, stderr=self.log
        )
        deadline = time.monotonic() + START_TIMEOUT
        url = f"http://127.0.0.1:{self.port}{self.ready_path}"
        while True:
            if self.proc.poll() is not None:
                raise FunctionFailed(
                    f"{self.spec.logical_id}'s {self.spec.handler} exited while starting"
                    f" (status {self.proc.returncode}); its log is above"
                )
            try:
                if httpx.get(url, timeout=1).status_code < 500:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise FunctionFailed(f"{self.spec.logical_id} did not serve {url} within 30 s")
            time.sleep(0.05)

    def invoke(self, event: dict[str, Any], on_chunk: Callable[[str], None] | None = None) -> Reply:
        import httpx

        context = _lambda_context(self.spec, str(uuid.uuid4()))
        headers: list[tuple[str, str]] = [("x-amzn-lambda-context", json.dumps(context))]
        if event_kind(event) == "api":
            method, path = event["httpMethod"], event.get("path") or "/"
            if self.base_path and path.startswith(self.base_path):
                path = path[len(self.base_path) :] or "/"
            multi = event.get("multiValueHeaders") or {
                k: [v] for k, v in (event.get("headers") or {}).items()
            }
            headers += [
                (k, v) for k, vs in multi.items() if k.lower() != "content-length" for v in vs
            ]
            headers.append(("x-amzn-request-context", json.dumps(event["requestContext"])))
            query = event.get("multiValueQueryStringParameters") or {
                k: [v] for k, v in (event.get("queryStringParameters") or {}).items()
            }
            params = [(k, v) for k, vs in query.items() for v in vs]
            body = event.get("body") or ""
            content = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode()
        else:  # a non-HTTP event goes to the pass-through path as it is
            method, path, params = "POST", self.pass_through, []
            headers.append(("content-type", "application/json"))
            content = json.dumps(event).encode()
        timeout = httpx.Timeout(connect=5, read=self.spec.timeout, write=30, pool=5)
        url = f"http://127.0.0.1:{self.port}{path}"
        chunks: list[str] = []
        try:
            with httpx.stream(
                method, url, params=params, headers=headers, content=content, timeout=timeout
            ) as resp:
                for chunk in resp.iter_text():
                    chunks.append(chunk)
                    if on_chunk:
                        on_chunk(chunk)
                return Reply(resp.status_code, "".join(chunks), dict(resp.headers))
        except httpx.HTTPError as err:
            raise FunctionFailed(f"{self.spec.logical_id} failed to answer: {err}") from None

    def stop(self) -> None:
        _stop(self.proc)


# --- replaying events -----------------------------------------------------------------------


class Invoker:
    """Started functions (each started once, on first use, and reused: a warm container) and
    the seed items events need. `replay(path)` is what `make invoke` does with one event."""

    def __init__(
        self,
        port: int = 8321,
        build_dir: Path | None = None,
        layer_dir: Path | None = None,
        log: Any = None,
        note: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.template = Template((build_dir or ROOT) / "template.yaml")
        if build_dir and not self.template.path.exists():
            raise InvokeError(f"{self.template.path} does not exist: run `make build` first")
        if layer_dir and not layer_dir.is_dir():
            raise InvokeError(f"LAYER_DIR {layer_dir} is not a directory")
        if layer_dir and (layer_dir / "python").is_dir():  # a built layer: Lambda's /opt/python
            layer_dir = layer_dir / "python"
        self.layer_dir = layer_dir.resolve() if layer_dir else None
        self.aws = LocalAws.find(port)
        self.log = log if log is not None else sys.stderr.fileno()
        self.note = note
        self._functions: dict[str, PythonFunction | WebAdapterFunction] = {}

    def __enter__(self) -> Invoker:
        return self

    def __exit__(self, *exc: object) -> None:
        for function in self._functions.values():
            function.stop()

    def function(self, logical_id: str) -> PythonFunction | WebAdapterFunction:
        if logical_id not in self._functions:
            spec = self.template.function(logical_id)
            if not spec.code_dir.is_dir():
                raise InvokeError(f"{logical_id}'s code folder {spec.code_dir} does not exist")
            layers = [self.layer_dir] if self.layer_dir else self.template.layer_dirs(logical_id)
            env = function_env(spec, self.template, self.aws, layers)
            kind = WebAdapterFunction if spec.web_adapter else PythonFunction
            function = kind(spec, env, self.log)
            where = ", ".join(map(str, layers))
            self.note(f"starting {logical_id} from {spec.code_dir} (layer {where})")
            function.start()
            self._functions[logical_id] = function
        return self._functions[logical_id]

    def invoke(
        self, target: str, event: dict[str, Any], on_chunk: Callable[[str], None] | None = None
    ) -> Reply:
        if target in self.template.of_type("AWS::Events::EventBus"):
            if event_kind(event) != "eventbridge":
                raise InvokeError(f"{target} takes EventBridge events, like events/lifecycle/*")
            received = self.publish(event)
            return Reply(None, json.dumps(received), payload=received)
        return self.function(target).invoke(event, on_chunk)

    def replay(
        self,
        path: Path,
        function: str | None = None,
        on_chunk: Callable[[str], None] | None = None,
    ) -> tuple[str, Reply]:
        """(the resource that took it, its answer) for the event file at `path`."""
        event = self.fill(read_event_text(path))
        target = function or self.template.route(event)
        return target, self.invoke(target, event, on_chunk)

    # Seeds: fresh items for the placeholders an event uses, made through the functions.

    def fill(self, text: str, ids: dict[str, str] | None = None) -> dict[str, Any]:
        wanted = set(PLACEHOLDER.findall(text))
        ids = dict(ids or {})
        if wanted - ids.keys():
            ids.update(self._seed(wanted - ids.keys(), ids))
        try:
            return json.loads(PLACEHOLDER.sub(lambda m: ids[m.group(1)], text))
        except ValueError as err:
            raise InvokeError(f"the event is not JSON: {err}") from None

    def _seed(self, wanted: set[str], ids: dict[str, str]) -> dict[str, str]:
        unknown = wanted - {*AGENT_SEEDS, "response_id"}
        if unknown:
            raise InvokeError(f"the event names {{{{{sorted(unknown)[0]}}}}}, which no seed makes")
        seeds: dict[str, str] = {}
        if wanted & AGENT_SEEDS:  # an agent always has a session, so a listing shows one
            seeds["agent_id"] = self._create("agents/create_agent.json", {})["agent_id"]
            seeds["session_id"] = self._create("agents/create_session.json", seeds)["session_id"]
        if wanted & PAUSED_SEEDS:
            seeds.update(self._paused_turn(seeds, with_token="resume_token" in wanted))
        if "response_id" in wanted:
            seeds["response_id"] = self._create("responses/create_response.json", {})["id"]
        seeds = {k: v for k, v in seeds.items() if k in wanted}
        self.note("seeded " + ", ".join(f"{k} {v}" for k, v in seeds.items()))
        return seeds

    def _create(self, name: str, ids: dict[str, str]) -> dict[str, Any]:
        event = self.fill(read_event_text(EVENTS / name), ids)
        target = self.template.route(event)
        reply = self.invoke(target, event)
        if reply.status != 200:
            raise FunctionFailed(
                f"seeding with events/{name} through {target}: {reply.status} {reply.body[:300]}"
            )
        return reply.json()

    def _paused_turn(self, ids: dict[str, str], with_token: bool = False) -> dict[str, str]:
        """A turn awaiting its client tool's result (the agent of create_agent.json declares
        get_weather, and create_turn_stream.json asks for it); `with_token`: also its resume
        token, as its `Turn Awaiting Input` event carries it (the only place it is told)."""
        if with_token:
            pattern = {
                "source": ["serverless-agents"],
                "detail-type": ["Turn Awaiting Input"],
                "detail": {"session_id": [ids["session_id"]]},
            }
            with self.subscribed(pattern) as receive:
                seeds = self._paused_turn(ids)
                return {**seeds, "resume_token": receive()["detail"]["resume_token"]}
        event = self.fill(read_event_text(EVENTS / "turns/create_turn_stream.json"), ids)
        reply = self.invoke(self.template.route(event), event)
        events = sse_events(reply.body) if reply.status == 200 else []
        last = events[-1] if events else {}
        payload = (last.get("event") or {}).get("payload") or {}
        if payload.get("event_type") != "turn_awaiting_input":
            raise FunctionFailed(
                "seeding with events/turns/create_turn_stream.json: the turn did not pause on its"
                f" client tool ({reply.status} {reply.body[-300:]})"
            )
        turn = payload["turn"]
        return {
            "turn_id": turn["turn_id"],
            "call_id": turn["output_message"]["tool_calls"][0]["call_id"],
            "step_id": turn["steps"][0]["step_id"],
        }

    def publish(self, event: dict[str, Any]) -> dict[str, Any]:
        """Put `event` on the bus and return what a rule matching its source and detail-type
        delivers to its target (a queue made for the occasion, then removed)."""
        events = self.aws.client("events")
        bus = self.aws.event_bus_name
        pattern = {"source": [event["source"]], "detail-type": [event["detail-type"]]}
        with self.subscribed(pattern) as receive:
            entry = {
                "Source": event["source"],
                "DetailType": event["detail-type"],
                "Detail": json.dumps(event["detail"]),
                "Resources": event.get("resources") or [],
                "EventBusName": bus,
            }
            if events.put_events(Entries=[entry])["FailedEntryCount"]:
                raise FunctionFailed(f"the bus {bus} refused the event")
            delivered = receive()
            self.note(f"put on bus {bus}; a rule matching {json.dumps(pattern)} delivered:")
            return delivered

    @contextmanager
    def subscribed(self, pattern: dict[str, Any]) -> Iterator[Callable[[], dict[str, Any]]]:
        """A rule on the bus matching `pattern`, delivering to a queue made for the occasion
        (both removed after); yields a function that returns the next event delivered."""
        events, sqs = self.aws.client("events"), self.aws.client("sqs")
        name = f"make-invoke-{uuid.uuid4().hex[:12]}"
        bus = self.aws.event_bus_name
        queue_url = sqs.create_queue(QueueName=name)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])

        def receive() -> dict[str, Any]:
            got = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=5)
            if not got.get("Messages"):
                raise FunctionFailed(f"a rule on {bus} matching {pattern} received nothing")
            return json.loads(got["Messages"][0]["Body"])

        try:
            events.put_rule(Name=name, EventBusName=bus, EventPattern=json.dumps(pattern))
            events.put_targets(
                Rule=name,
                EventBusName=bus,
                Targets=[{"Id": "subscriber", "Arn": arn["Attributes"]["QueueArn"]}],
            )
            yield receive
        finally:
            try:
                events.remove_targets(Rule=name, EventBusName=bus, Ids=["subscriber"])
                events.delete_rule(Name=name, EventBusName=bus)
            except ClientError:  # the rule may not exist if put_rule failed
                pass
            sqs.delete_queue(QueueUrl=queue_url)


def read_event_text(path: Path) -> str:
    for candidate in (path, ROOT / path, EVENTS / path):
        if candidate.is_file():
            return candidate.read_text()
    raise InvokeError(
        f"no event file {path}: name one under events/, e.g. EVENT=events/agents/get_agent.json"
    )


def sse_events(body: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]


# --- the child side of a Python function ------------------------------------------------------


@dataclass
class LambdaContext:
    """The context object Lambda's Python runtime passes a handler."""

    function_name: str
    memory_limit_in_mb: int
    invoked_function_arn: str
    aws_request_id: str
    deadline_ms: int
    function_version: str = "$LATEST"
    log_group_name: str = ""
    log_stream_name: str = ""
    client_context: Any = None
    identity: Any = None

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self.deadline_ms - int(time.time() * 1000))


def runtime(handler: str) -> None:
    """Import `module.function` from the working directory (the function's folder) and answer
    each event read on stdin with one JSON line, on what was stdout; the function's own output
    goes to stderr, as it would to the function's log."""
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.path[0] = os.getcwd()

    def answer(message: dict[str, Any]) -> None:
        answers.write(json.dumps(message) + "\n")
        answers.flush()

    module, _, name = handler.rpartition(".")
    try:
        function = getattr(importlib.import_module(module), name)
    except Exception as err:  # noqa: BLE001 - reported to the parent, as Lambda reports init errors
        traceback.print_exc()
        answer({"error": f"{type(err).__name__}: {err}"})
        return
    answer({"ready": True})
    for line in sys.stdin:
        message = json.loads(line)
        ctx = message["context"]
        context = LambdaContext(
            function_name=ctx["env_config"]["function_name"],
            memory_limit_in_mb=ctx["env_config"]["memory"],
            invoked_function_arn=ctx["invoked_function_arn"],
            aws_request_id=ctx["request_id"],
            deadline_ms=ctx["deadline"],
        )
        try:
            answer({"result": function(message["event"], context)})
        except Exception as err:  # noqa: BLE001 - Lambda answers an unhandled error this way
            traceback.print_exc()
            answer({"error": {"errorType": type(err).__name__, "errorMessage": str(err)}})


# --- command line -----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("event", nargs="?", help="event file, e.g. events/agents/get_agent.json")
    parser.add_argument(
        "--function", help="logical id in template.yaml (default: where the template routes it)"
    )
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("PORT", "8321")),
        help="port of the `make run` server whose AWS endpoint to use",
    )
    parser.add_argument(
        "--build-dir", type=Path, help="run sam build's output (e.g. .aws-sam/build)"
    )
    parser.add_argument(
        "--layer-dir", type=Path, help="import the layer from here (default: the template's)"
    )
    args = parser.parse_args(argv)

    def note(text: str) -> None:
        print(f"make invoke: {text}", file=sys.stderr, flush=True)

    def out(chunk: str) -> None:
        sys.stdout.write(chunk)
        sys.stdout.flush()

    try:
        if not args.event:
            raise InvokeError(
                "no event: make invoke EVENT=events/agents/get_agent.json [FUNCTION=AgentsFunction]"
            )
        with Invoker(args.port, args.build_dir, args.layer_dir, note=note) as invoker:
            target, reply = invoker.replay(Path(args.event), args.function, on_chunk=out)
            if reply.error is not None:
                print(json.dumps(reply.error))
                message = reply.error.get("errorMessage", reply.error)
                raise FunctionFailed(f"{target} failed: {message}")
            if target in invoker.template.of_type("AWS::Events::EventBus"):
                print(json.dumps(reply.payload, indent=2))
            elif isinstance(invoker.function(target), PythonFunction):
                print(json.dumps(reply.payload))  # the handler's return value, as Lambda's
            elif reply.body and not reply.body.endswith("\n"):
                print()  # the streamed body is already out
            if reply.status is not None:
                note(f"{target} answered HTTP {reply.status}")
        return 0
    except InvokeError as err:
        print(f"make invoke: {err}", file=sys.stderr, flush=True)
        return err.exit_code
    except (BotoCoreError, ClientError) as err:  # the bus replay's own AWS calls
        print(f"make invoke: the AWS endpoint failed: {err}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--runtime":
        runtime(sys.argv[2])
    else:
        sys.exit(main())
