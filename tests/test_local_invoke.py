"""`make invoke` (functions/local/invoke.py): every file in events/ replayed through the function
template.yaml routes it to, started from its folder the way Lambda starts it, against the AWS
endpoint of a `make run` server; each answers as its name promises."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from .lambda_support import ROOT
from .local_server import free_port, running_server
from .turn_support import sse_events

INVOKE = ROOT / "functions" / "local" / "invoke.py"


def load_invoke():
    spec = importlib.util.spec_from_file_location("local_invoke", INVOKE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def last_payload(reply) -> dict:
    return sse_events(reply.body)[-1]["event"]["payload"]


def same_event(reply, event) -> bool:
    received = reply.payload
    return (received["detail-type"], received["detail"]) == (event["detail-type"], event["detail"])


#: event file -> (the resource it goes to, HTTP status, a check of the answer)
PROMISES = {
    "agents/create_agent.json": ("AgentsFunction", 200, lambda r, _: r.json()["agent_id"]),
    "agents/create_session.json": ("AgentsFunction", 200, lambda r, _: r.json()["session_id"]),
    "agents/get_agent.json": (
        "AgentsFunction",
        200,
        lambda r, _: r.json()["agent_config"]["client_tools"][0]["name"] == "get_weather",
    ),
    "agents/list_agents.json": ("AgentsFunction", 200, lambda r, _: r.json()["data"]),
    "agents/get_session.json": (
        "AgentsFunction",
        200,
        lambda r, _: r.json()["session_name"] == "support chat",
    ),
    "agents/list_sessions.json": (
        "AgentsFunction",
        200,
        lambda r, _: [s["session_name"] for s in r.json()["data"]] == ["support chat"],
    ),
    "agents/get_turn.json": (
        "TurnsFunction",
        200,
        lambda r, _: r.json()["output_message"]["tool_calls"][0]["tool_name"] == "get_weather",
    ),
    "agents/get_step.json": (
        "TurnsFunction",
        200,
        lambda r, _: r.json()["step"]["step_type"] == "inference",
    ),
    "agents/delete_session.json": ("AgentsFunction", 204, lambda r, _: r.body == ""),
    "agents/delete_agent.json": ("AgentsFunction", 204, lambda r, _: r.body == ""),
    "turns/create_turn.json": (
        "TurnsFunction",
        200,
        lambda r, _: r.json()["output_message"]["content"] == "You said: Hello!",
    ),
    "turns/create_turn_stream.json": (
        "TurnsFunction",
        200,
        lambda r, _: last_payload(r)["event_type"] == "turn_awaiting_input",
    ),
    "resume/resume_turn.json": (
        "ResumeFunction",
        200,
        lambda r, _: (
            last_payload(r)["turn"]["output_message"]["content"] == "Tool result: 18C and sunny"
        ),
    ),
    "resume/sqs_resume_batch.json": (
        "ResumeQueueFunction",
        200,
        lambda r, _: r.json() == {"batchItemFailures": []},
    ),
    "responses/create_response.json": (
        "ResponsesFunction",
        200,
        lambda r, _: r.json()["output"][0]["content"][0]["text"] == "You said: Hello!",
    ),
    "responses/create_response_stream.json": (
        "ResponsesFunction",
        200,
        lambda r, _: sse_events(r.body)[-1]["type"] == "response.completed",
    ),
    "responses/list_responses.json": ("ResponsesFunction", 200, lambda r, _: r.json()["data"]),
    "responses/get_response.json": (
        "ResponsesFunction",
        200,
        lambda r, _: r.json()["instructions"] == "Be brief.",
    ),
    "responses/list_input_items.json": (
        "ResponsesFunction",
        200,
        lambda r, _: r.json()["data"][0]["content"][0]["text"] == "Hello!",
    ),
    "responses/delete_response.json": (
        "ResponsesFunction",
        200,
        lambda r, _: r.json()["deleted"] is True,
    ),
    "lifecycle/turn_awaiting_input.json": ("TurnEventBus", None, same_event),
    "lifecycle/turn_completed.json": ("TurnEventBus", None, same_event),
    "lifecycle/response_completed.json": ("TurnEventBus", None, same_event),
    "lifecycle/turn_failed.json": ("TurnEventBus", None, same_event),
}


@pytest.fixture(scope="module")
def server():
    with running_server() as (base, _):
        yield int(base.rsplit(":", 1)[1])


def test_every_event_file_replays_with_the_answer_its_name_promises(server, tmp_path):
    invoke = load_invoke()
    files = {p.relative_to(invoke.EVENTS).as_posix() for p in invoke.EVENTS.rglob("*.json")}
    assert files == set(PROMISES), "every event file needs a promise here"
    with (tmp_path / "functions.log").open("w") as log, invoke.Invoker(server, log=log) as run:
        for name, (resource, status, check) in PROMISES.items():
            target, reply = run.replay(invoke.EVENTS / name)
            assert (target, reply.status) == (resource, status), (name, reply.body[:500])
            assert check(reply, json.loads((invoke.EVENTS / name).read_text())), (name, reply)


def test_make_invoke_prints_the_handlers_answer_and_says_what_it_seeded(server):
    result = subprocess.run(
        [sys.executable, str(INVOKE), "--port", str(server), "events/agents/get_session.json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    session = json.loads(answer["body"])
    assert answer["statusCode"] == 200 and session["session_name"] == "support chat"
    assert f"session_id {session['session_id']}" in result.stderr
    assert "AgentsFunction answered HTTP 200" in result.stderr


def test_without_a_server_make_invoke_says_in_one_line_how_to_get_one():
    port = free_port()
    result = subprocess.run(
        [sys.executable, str(INVOKE), "--port", str(port), "events/agents/get_agent.json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"make invoke: no `make run` server answers at http://127.0.0.1:{port}: start one in"
        " another terminal (make run), pass its PORT=, or set AWS_ENDPOINT_URL"
    ]
