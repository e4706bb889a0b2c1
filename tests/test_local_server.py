"""`make run`'s server, driven by llama-stack-client 0.2.12 and plain HTTP."""

from __future__ import annotations

import http.client
import statistics
import time

import httpx
import pytest
from llama_stack_client import LlamaStackClient, NotFoundError

from .local_server import running_server


@pytest.fixture(scope="module")
def server():
    with running_server() as (base, banner):
        yield base, banner


def test_startup_line_names_address_endpoint_and_table(server):
    base, banner = server
    assert base in banner
    assert "embedded moto" in banner and "http://127.0.0.1:" in banner.split("AWS endpoint")[1]
    assert "table serverless-agents" in banner


def test_llama_stack_client_drives_agents_and_sessions(server):
    base, _ = server
    client = LlamaStackClient(base_url=base)
    agent = client.agents.create(
        agent_config={
            "model": "meta-llama/Llama-3.2-3B-Instruct",
            "instructions": "You are a helpful assistant.",
            "enable_session_persistence": True,
            "client_tools": [
                {
                    "name": "get_weather",
                    "description": "Weather for a city",
                    "parameters": [
                        {
                            "name": "city",
                            "parameter_type": "string",
                            "description": "City",
                            "required": True,
                        }
                    ],
                }
            ],
        }
    )
    session = client.agents.session.create(agent.agent_id, session_name="weather chat")
    got = client.agents.session.retrieve(session.session_id, agent_id=agent.agent_id)
    assert got.session_id == session.session_id
    assert got.session_name == "weather chat"
    assert got.turns == []

    # Routes this client version lacks, over plain HTTP.
    described = httpx.get(f"{base}/v1/agents/{agent.agent_id}").json()
    assert described["agent_config"]["client_tools"][0]["name"] == "get_weather"
    listed = httpx.get(f"{base}/v1/agents").json()
    assert agent.agent_id in [a["agent_id"] for a in listed["data"]]
    sessions = httpx.get(f"{base}/v1/agents/{agent.agent_id}/sessions").json()
    assert [s["session_id"] for s in sessions["data"]] == [session.session_id]

    client.agents.session.delete(session.session_id, agent_id=agent.agent_id)
    with pytest.raises(NotFoundError):
        client.agents.session.retrieve(session.session_id, agent_id=agent.agent_id)
    client.agents.delete(agent.agent_id)
    with pytest.raises(NotFoundError):
        client.agents.session.create(agent.agent_id, session_name="too late")
    assert httpx.get(f"{base}/v1/agents/{agent.agent_id}").status_code == 404


def test_client_sees_validation_errors_as_400(server):
    from llama_stack_client import BadRequestError

    base, _ = server
    client = LlamaStackClient(base_url=base)
    with pytest.raises(BadRequestError) as err:
        client.agents.create(
            agent_config={
                "model": "m",
                "instructions": "i",
                "tool_choice": "auto",
                "tool_config": {"tool_choice": "none"},
            }
        )
    assert "tool_choice is deprecated" in str(err.value)


def test_make_run_resumes_turns_from_its_queue(server):
    """The local server made the resume queue and polls it with the Lambda's worker."""
    import json
    import re
    import time

    import boto3

    base, banner = server
    endpoint = re.search(r"AWS endpoint (\S+)", banner).group(1)
    assert (
        "queues serverless-agents-resume, serverless-agents-background,"
        " serverless-agents-ingest (polled here)"
        in banner
        and "bus serverless-agents" in banner
    )
    tool = {
        "name": "get_weather",
        "description": "Weather",
        "parameters": [
            {"name": "city", "parameter_type": "string", "description": "City", "required": True}
        ],
    }
    config = {"model": "offline", "instructions": "x", "client_tools": [tool]}
    agent = httpx.post(f"{base}/v1/agents", json={"agent_config": config}).json()["agent_id"]
    session = httpx.post(f"{base}/v1/agents/{agent}/session", json={"session_name": "q"}).json()[
        "session_id"
    ]
    turns = f"{base}/v1/agents/{agent}/session/{session}/turn"
    clients = {
        "endpoint_url": endpoint,
        "region_name": "us-east-1",
        "aws_access_key_id": "local",
        "aws_secret_access_key": "local",
    }
    sqs, events = boto3.client("sqs", **clients), boto3.client("events", **clients)
    # A tool worker's subscription to the bus: the awaiting-input event carries the resume token.
    worker = sqs.create_queue(QueueName="local-tool-worker")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=worker, AttributeNames=["QueueArn"])["Attributes"]
    pattern = {"detail-type": ["Turn Awaiting Input"], "detail": {"session_id": [session]}}
    events.put_rule(
        Name="tool-worker", EventBusName="serverless-agents", EventPattern=json.dumps(pattern)
    )
    events.put_targets(
        Rule="tool-worker",
        EventBusName="serverless-agents",
        Targets=[{"Id": "worker", "Arn": arn["QueueArn"]}],
    )
    paused = httpx.post(
        turns, json={"messages": [{"role": "user", "content": "use get_weather city=Oslo"}]}
    ).json()
    call = paused["output_message"]["tool_calls"][0]
    announced = sqs.receive_message(QueueUrl=worker, WaitTimeSeconds=5)["Messages"][0]
    detail = json.loads(announced["Body"])["detail"]
    url = sqs.get_queue_url(QueueName="serverless-agents-resume")["QueueUrl"]
    body = {
        "agent_id": agent,
        "session_id": session,
        "turn_id": paused["turn_id"],
        "tool_responses": [
            {"call_id": call["call_id"], "tool_name": "get_weather", "content": "-5C"}
        ],
    }
    attributes = {
        name: {"DataType": "String", "StringValue": detail[name]}
        for name in ("tenant", "resume_token")
    }
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(body), MessageAttributes=attributes)
    for _ in range(100):
        turn = httpx.get(f"{turns}/{paused['turn_id']}").json()
        if turn["completed_at"]:
            break
        time.sleep(0.1)
    assert turn["output_message"]["content"] == "Tool result: -5C"


def _round_trip_ms(conn: http.client.HTTPConnection) -> float:
    start = time.perf_counter()
    conn.request("GET", "/v1/health")
    response = conn.getresponse()
    response.read()
    assert response.status == 200
    return (time.perf_counter() - start) * 1000


def test_a_request_on_a_kept_alive_connection_is_no_slower_than_on_a_fresh_one(server):
    """Every SDK keeps its connections alive: a server that leaves Nagle's algorithm on answers
    each request after the first one on a connection a delayed ACK late (some 40 ms)."""
    host, port = server[0].removeprefix("http://").split(":")
    kept = http.client.HTTPConnection(host, int(port), timeout=10)
    _round_trip_ms(kept)  # the connection is open from here on
    kept_alive, fresh = [], []
    for _ in range(30):  # interleaved: whatever else the machine does weighs on both alike
        kept_alive.append(_round_trip_ms(kept))
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        fresh.append(_round_trip_ms(conn))  # connects, then asks
        conn.close()
    kept.close()
    # With the delay every kept-alive request waits; without it, most take no longer than a
    # fresh one (which also connects). The typical fresh one is the yardstick: one machine's
    # noise moves a median of one side across the other's, not every kept-alive request.
    assert sorted(kept_alive)[len(kept_alive) // 4] <= statistics.median(fresh), (kept_alive, fresh)
