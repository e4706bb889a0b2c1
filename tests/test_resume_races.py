"""Racing resumes of one paused turn, against `make run`'s code over a moto server in a process
of its own (serial_moto.py, as every local run uses): rounds of concurrent resumes, half of them
streamed, some with the turn's queued resume among them. Whatever the order, one resume wins
(200, or the queue's), every other one is a 409 (never a 404 or a 5xx), and the turn stores
exactly one tool step."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import boto3
import httpx
import pytest

from .local_server import aws_in_a_process, started_server
from .turn_support import WEATHER_TOOL, turn_url

ROUNDS = 20
RACERS = 10
BUS = "races-bus"
QUEUE = "races-resume"


@pytest.fixture(scope="module")
def aws_endpoint():
    with aws_in_a_process() as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def server(aws_endpoint, model):
    env = {
        "AWS_ENDPOINT_URL": aws_endpoint,
        "AWS_ACCESS_KEY_ID": "races",
        "AWS_SECRET_ACCESS_KEY": "races",
        "AWS_DEFAULT_REGION": "us-east-1",
        "OPENAI_BASE_URL": model.url,
        "TURN_LEASE_SECONDS": "8",
        "EVENT_BUS_NAME": BUS,
        "RESUME_QUEUE_NAME": QUEUE,
        "TABLE_NAME": "races",
    }
    with started_server(env) as started:
        yield started.base


@pytest.fixture(scope="module")
def aws(aws_endpoint, server):
    """The resume queue the server polls, and a queue that hears each pause's resume token."""
    options = {"endpoint_url": aws_endpoint, "region_name": "us-east-1"}
    sqs = boto3.client("sqs", aws_access_key_id="races", aws_secret_access_key="races", **options)
    events = boto3.client(
        "events", aws_access_key_id="races", aws_secret_access_key="races", **options
    )
    tokens = sqs.create_queue(QueueName="races-tokens")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=tokens, AttributeNames=["QueueArn"])["Attributes"]
    events.put_rule(
        Name="awaiting",
        EventBusName=BUS,
        EventPattern=json.dumps({"detail-type": ["Turn Awaiting Input"]}),
    )
    events.put_targets(
        Rule="awaiting", EventBusName=BUS, Targets=[{"Id": "t", "Arn": arn["QueueArn"]}]
    )
    return sqs, sqs.get_queue_url(QueueName=QUEUE)["QueueUrl"], tokens


def _paused_turn(http: httpx.Client, model) -> tuple[str, str, str, str]:
    """(agent id, session id, turn id, call id) of a turn awaiting its client tool."""
    agent_config = {"model": "m", "instructions": "Use tools.", "client_tools": [WEATHER_TOOL]}
    agent_id = http.post("/v1/agents", json={"agent_config": agent_config}).json()["agent_id"]
    session_id = http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "r"}).json()[
        "session_id"
    ]
    model.reply(tool_calls=[("get_weather", '{"city": "Rome"}')])
    turn = http.post(
        turn_url(agent_id, session_id),
        json={"messages": [{"role": "user", "content": "Weather?"}], "stream": False},
    ).json()
    assert turn["output_message"]["stop_reason"] == "end_of_message", turn
    call_id = turn["output_message"]["tool_calls"][0]["call_id"]
    return agent_id, session_id, turn["turn_id"], call_id


def _resume(base: str, url: str, call_id: str, stream: bool) -> int:
    """One racer on a connection of its own: its status (a stream's, from its headers)."""
    body = {
        "tool_responses": [{"call_id": call_id, "tool_name": "get_weather", "content": "25C"}],
        "stream": stream,
    }
    with (
        httpx.Client(base_url=base, timeout=30) as http,
        http.stream("POST", url, json=body) as response,
    ):
        response.read()
        return response.status_code


def _token(sqs, tokens_url: str, turn_id: str) -> str:
    """The resume token of the turn's pause, as a tool worker would hear it."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for message in sqs.receive_message(
            QueueUrl=tokens_url, MaxNumberOfMessages=10, WaitTimeSeconds=1
        ).get("Messages", []):
            sqs.delete_message(QueueUrl=tokens_url, ReceiptHandle=message["ReceiptHandle"])
            detail = json.loads(message["Body"])["detail"]
            if detail["turn_id"] == turn_id:
                return detail["resume_token"]
    raise AssertionError(f"no Turn Awaiting Input event for {turn_id}")


def _queue_resume(sqs, queue_url: str, ids: tuple[str, str, str, str], token: str) -> None:
    agent_id, session_id, turn_id, call_id = ids
    body = {
        "agent_id": agent_id,
        "session_id": session_id,
        "turn_id": turn_id,
        "tool_responses": [{"call_id": call_id, "tool_name": "get_weather", "content": "25C"}],
    }
    sqs.send_message(
        QueueUrl=queue_url,
        MessageBody=json.dumps(body),
        MessageAttributes={"resume_token": {"DataType": "String", "StringValue": token}},
    )


def _settled(http: httpx.Client, url: str) -> dict:
    """The turn once it has ended (the queue's resume may still be running)."""
    deadline = time.monotonic() + 30
    while True:
        turn = http.get(url).json()
        if turn.get("completed_at") or time.monotonic() > deadline:
            return turn
        time.sleep(0.1)


@pytest.mark.parametrize("with_queue", [False, True], ids=["http only", "queue among them"])
def test_racing_resumes_store_one_tool_step_and_answer_one_200(server, aws, model, with_queue):
    sqs, queue_url, tokens_url = aws
    model.reset()
    outcomes = []
    with httpx.Client(base_url=server, timeout=30) as http, ThreadPoolExecutor(RACERS) as pool:
        for _ in range(ROUNDS):
            ids = _paused_turn(http, model)
            agent_id, session_id, turn_id, call_id = ids
            url = f"{turn_url(agent_id, session_id)}/{turn_id}"
            token = _token(sqs, tokens_url, turn_id)
            if with_queue:  # sent first: the poller picks it up while the racers run
                _queue_resume(sqs, queue_url, ids, token)
            racers = [
                pool.submit(_resume, server, f"{url}/resume", call_id, stream=i % 2 == 0)
                for i in range(RACERS)
            ]
            statuses = sorted(racer.result() for racer in racers)
            turn = _settled(http, url)
            steps = [step["step_type"] for step in turn["steps"]]
            outcomes.append((statuses, steps))
    for statuses, steps in outcomes:
        assert set(statuses) <= {200, 409}, outcomes  # never a 404 or a 5xx
        # One winner: a 200, or, with none, the queue's resume (the turn ended all the same).
        assert statuses.count(200) == 1 or (with_queue and statuses.count(200) == 0), outcomes
        assert steps == ["inference", "tool_execution", "inference"], outcomes


FUNCTION_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def _function_call(http: httpx.Client, model, **where) -> tuple[str, str]:
    """(response id, call id) of a response that called the function tool."""
    model.reply(tool_calls=[("get_weather", '{"city": "Rome"}')])
    body = {"model": "m", "input": "Weather?", "tools": [FUNCTION_TOOL], **where}
    response = http.post("/v1/responses", json=body).json()
    call = response["output"][-1]
    assert call["type"] == "function_call", response
    return response["id"], call["call_id"]


def _continue(base: str, call_id: str, stream: bool, **where) -> tuple[int, str | None]:
    """One racer answering the call: (status, the new response's id)."""
    output = {"type": "function_call_output", "call_id": call_id, "output": "25C"}
    body = {"model": "m", "input": [output], "tools": [FUNCTION_TOOL], "stream": stream, **where}
    with (
        httpx.Client(base_url=base, timeout=30) as http,
        http.stream("POST", "/v1/responses", json=body) as response,
    ):
        text = response.read().decode()
    if response.status_code != 200:
        return response.status_code, None
    if not stream:
        return 200, json.loads(text)["id"]
    done = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")][-1]
    return (200 if done["type"] == "response.completed" else 500), done["response"]["id"]


def test_racing_outputs_for_one_previous_response_each_make_a_branch_of_their_own(server, model):
    """OpenAI's responses form a tree: any number of responses may continue one response, each
    a branch of its own, the response they continue unchanged."""
    model.reset()
    with httpx.Client(base_url=server, timeout=30) as http, ThreadPoolExecutor(RACERS) as pool:
        previous_id, call_id = _function_call(http, model)
        before = http.get(f"/v1/responses/{previous_id}").json()
        racers = [
            pool.submit(
                _continue, server, call_id, stream=i % 2 == 0, previous_response_id=previous_id
            )
            for i in range(RACERS)
        ]
        outcomes = [racer.result() for racer in racers]
        assert [status for status, _ in outcomes] == [200] * RACERS, outcomes
        branches = {response_id for _, response_id in outcomes}
        assert len(branches) == RACERS
        for response_id in branches:
            items = http.get(f"/v1/responses/{response_id}/input_items").json()["data"]
            assert [i["type"] for i in items].count("function_call_output") == 1, items
        assert http.get(f"/v1/responses/{previous_id}").json() == before
    sent = [r["messages"] for r in model.requests[1:]]  # each continuation's model request
    assert len(sent) == RACERS
    assert all([m["role"] for m in messages].count("tool") == 1 for messages in sent)


def test_racing_outputs_in_one_conversation_answer_the_call_once(server, model):
    """Responses answering one call in one conversation: one lands whole, every other one is a
    409 with nothing added (never a 404 or a 5xx), raced or late."""
    model.reset()
    with httpx.Client(base_url=server, timeout=30) as http, ThreadPoolExecutor(RACERS) as pool:
        conversation = http.post("/v1/conversations", json={}).json()["id"]
        _, call_id = _function_call(http, model, conversation=conversation)
        items_url = f"/v1/conversations/{conversation}/items"
        before = len(http.get(items_url, params={"limit": 100}).json()["data"])
        racers = [
            pool.submit(_continue, server, call_id, stream=False, conversation=conversation)
            for _ in range(RACERS)
        ]
        outcomes = [racer.result() for racer in racers]
        late = _continue(server, call_id, stream=False, conversation=conversation)
        items = http.get(items_url, params={"limit": 100, "order": "asc"}).json()["data"]
    statuses = sorted(status for status, _ in outcomes)
    assert statuses == [200] + [409] * (RACERS - 1), outcomes
    assert late[0] == 409
    # The winner added its function_call_output and the model's answer; the losers nothing.
    assert len(items) == before + 2, items
    assert [i["type"] for i in items].count("function_call_output") == 1
