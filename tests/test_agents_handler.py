"""The agents Lambda handler fed the API Gateway events in events/ (as `sam local invoke` does)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .lambda_support import ROOT, LambdaContext, load_event, load_function

EVENT_AGENT = "{{agent_id}}"
EVENT_SESSION = "{{session_id}}"
#: A turn and a step that exist nowhere (well-formed ids, so the answer is 404, not 400).
NO_SUCH = {
    "{{turn_id}}": "01937a2e-5f00-7000-8000-0000000000c1",
    "{{step_id}}": "01937a2e-5f00-7000-8000-0000000000d1",
}


@pytest.fixture
def handler(dynamodb):
    return load_function("agents").handler


def invoke(handler, event):
    resp = handler(event, LambdaContext())
    body = json.loads(resp["body"]) if resp.get("body") else None
    return resp["statusCode"], body


def with_identity(event, **identity):
    """The same event from another caller: an authorizer principal or an IAM/API key identity."""
    ctx = event["requestContext"]
    ctx["identity"] = {k: v for k, v in identity.items() if k != "principalId"}
    if "principalId" in identity:
        ctx["authorizer"] = {"principalId": identity["principalId"]}
    return event


def test_every_crud_event_through_the_handler(handler):
    status, body = invoke(handler, load_event("agents/create_agent.json"))
    assert status == 200
    ids = {EVENT_AGENT: body["agent_id"], **NO_SUCH}
    status, body = invoke(handler, load_event("agents/create_session.json", ids))
    assert status == 200
    ids[EVENT_SESSION] = body["session_id"]

    expected = {
        "list_agents.json": (
            200,
            lambda b: [a["agent_id"] for a in b["data"]] == [ids[EVENT_AGENT]],
        ),
        "get_agent.json": (200, lambda b: b["agent_config"]["enable_session_persistence"] is True),
        "list_sessions.json": (200, lambda b: b["data"][0]["session_name"] == "support chat"),
        "get_session.json": (
            200,
            lambda b: b["session_id"] == ids[EVENT_SESSION] and b["turns"] == [],
        ),
        "delete_session.json": (204, lambda b: b is None),
        "delete_agent.json": (204, lambda b: b is None),
    }
    for name, (want_status, check) in expected.items():
        status, body = invoke(handler, load_event(f"agents/{name}", ids))
        assert status == want_status, (name, body)
        assert check(body), (name, body)
    status, _ = invoke(handler, load_event("agents/get_agent.json", ids))
    assert status == 404


def test_every_crud_route_in_the_template_has_an_event():
    template = (ROOT / "template.yaml").read_text()
    events = {
        json.loads(p.read_text())["resource"]
        + " "
        + json.loads(p.read_text())["httpMethod"].lower()
        for p in Path(ROOT / "events" / "agents").glob("*.json")
    }
    for event in events:
        path, method = event.split()
        assert f"Path: {path}\n            Method: {method}" in template
    assert len(events) == 10
    for name in (
        "responses/get_response.json",
        "responses/list_input_items.json",
        "responses/delete_response.json",
        "responses/list_responses.json",
    ):
        event = json.loads((ROOT / "events" / name).read_text())
        method = event["httpMethod"].lower()
        assert f"Path: {event['resource']}\n            Method: {method}" in template, name
    streamed_routes = (
        ("turns/create_turn.json", "turn"),
        ("resume/resume_turn.json", "resume"),
        ("responses/create_response.json", "responses"),
    )
    for name, route in streamed_routes:
        event = json.loads((ROOT / "events" / name).read_text())
        streamed = (
            f"Path: {event['resource']}\n            Method: post\n"
            "            ResponseTransferMode: RESPONSE_STREAM"  # SAM's value (test_template.py)
        )
        assert streamed in template, route


def test_tenants_are_isolated(handler):
    alice = {"principalId": "user-alice"}
    bob = {"principalId": "user-bob"}
    status, body = invoke(handler, with_identity(load_event("agents/create_agent.json"), **alice))
    ids = {EVENT_AGENT: body["agent_id"], **NO_SUCH}
    status, body = invoke(
        handler, with_identity(load_event("agents/create_session.json", ids), **alice)
    )
    ids[EVENT_SESSION] = body["session_id"]

    for name in (
        "get_agent.json",
        "get_session.json",
        "list_sessions.json",
        "create_session.json",
        "delete_session.json",
        "delete_agent.json",
    ):
        status, body = invoke(handler, with_identity(load_event(f"agents/{name}", ids), **bob))
        assert status == 404, (name, body)
    status, body = invoke(handler, with_identity(load_event("agents/list_agents.json"), **bob))
    assert body["data"] == []
    # Alice still has everything bob tried to delete.
    status, body = invoke(
        handler, with_identity(load_event("agents/get_session.json", ids), **alice)
    )
    assert status == 200 and body["session_id"] == ids[EVENT_SESSION]


@pytest.mark.parametrize(
    ("identity", "tenant"),
    [
        ({"principalId": "p-1", "apiKeyId": "key-1"}, "p-1"),
        (
            {"userArn": "arn:aws:iam::123456789012:user/ci", "apiKeyId": "key-1"},
            "arn:aws:iam::123456789012:user/ci",
        ),
        ({"caller": "AIDAEXAMPLE", "apiKeyId": "key-1"}, "AIDAEXAMPLE"),
        ({"apiKeyId": "key-1"}, "key-1"),
        ({}, "default"),
    ],
)
def test_tenant_comes_from_the_request_context(handler, store, identity, tenant):
    status, body = invoke(
        handler, with_identity(load_event("agents/create_agent.json"), **identity)
    )
    assert status == 200
    assert store.get_agent(tenant, body["agent_id"]).agent_id == body["agent_id"]


def test_inside_lambda_a_request_without_a_caller_is_401_and_changes_nothing(dynamodb, monkeypatch):
    """`default` is for the local server: in Lambda a missing identity never falls open to it."""
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "AgentsFunction")
    handler = load_function("agents").handler
    status, body = invoke(handler, with_identity(load_event("agents/create_agent.json")))
    assert status == 401 and "caller" in body["detail"]
    assert dynamodb.scan(TableName="agents-test")["Items"] == []
    status, _ = invoke(handler, with_identity(load_event("agents/create_agent.json"), apiKeyId="k"))
    assert status == 200


def test_bad_event_body_is_400(handler):
    event = load_event("agents/create_agent.json")
    event["body"] = '{"agent_config": {"model": "m"}}'
    status, body = invoke(handler, event)
    assert status == 400 and "instructions" in body["detail"]
