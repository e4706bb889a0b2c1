"""Turns on Amazon Bedrock (Converse / ConverseStream) through boto3, against the HTTP emulator."""

from __future__ import annotations

import json

import pytest
from agents_core.services import build_services
from agents_core.settings import Settings
from agents_core.web.agents import router as agents_router
from agents_core.web.app import create_app
from agents_core.web.turns import resume_router, turns_router
from fastapi.testclient import TestClient

from .conftest import TABLE
from .peers.bedrock_emulator import BedrockEmulator
from .turn_support import WEATHER_TOOL, event_types, new_session, sse_events, turn_url, user

MODEL = "bedrock/anthropic.claude-3-haiku-20240307-v1:0"


@pytest.fixture
def bedrock(monkeypatch):
    with BedrockEmulator() as emulator:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", emulator.url)
        yield emulator


@pytest.fixture
def api(dynamodb, bedrock):
    services = build_services(Settings(table_name=TABLE), dynamodb)
    app = create_app(agents_router, turns_router, resume_router, services=services)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def test_streaming_turn_on_converse_stream(api, bedrock):
    agent_id, session_id = new_session(
        api,
        model=MODEL,
        sampling_params={
            "strategy": {"type": "top_p", "temperature": 0.5, "top_p": 0.8},
            "max_tokens": 99,
        },
    )
    bedrock.reply(text="Hello from Bedrock")
    resp = api.post(turn_url(agent_id, session_id), json={"messages": [user("hi")], "stream": True})
    events = sse_events(resp.text)
    assert event_types(events)[-1] == "turn_complete"
    assert (
        events[-1]["event"]["payload"]["turn"]["output_message"]["content"].strip()
        == "Hello from Bedrock"
    )
    sent = bedrock.requests[-1]
    assert sent["modelId"] == "anthropic.claude-3-haiku-20240307-v1:0"
    assert sent["system"] == [{"text": "You are terse."}]
    assert sent["inferenceConfig"] == {"temperature": 0.5, "topP": 0.8, "maxTokens": 99}


def test_tool_use_pauses_and_resumes_on_converse(api, bedrock):
    agent_id, session_id = new_session(api, model=MODEL, client_tools=[WEATHER_TOOL])
    url = turn_url(agent_id, session_id)
    bedrock.reply(tool_uses=[("get_weather", {"city": "Kyiv"})])
    paused = api.post(url, json={"messages": [user("Kyiv?")]}).json()
    call = paused["output_message"]["tool_calls"][0]
    assert call["arguments"] == {"city": "Kyiv"} and call["call_id"] == "tooluse_0"
    assert bedrock.requests[-1]["toolConfig"]["tools"][0]["toolSpec"]["name"] == "get_weather"
    bedrock.reply(text="Snowing.")
    body = {
        "tool_responses": [{"call_id": "tooluse_0", "tool_name": "get_weather", "content": "snow"}]
    }
    done = api.post(f"{url}/{paused['turn_id']}/resume", json=body).json()
    assert done["output_message"]["content"] == "Snowing."
    messages = bedrock.requests[-1]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"][0]["toolUse"]["input"] == {"city": "Kyiv"}
    assert messages[2]["content"][0]["toolResult"]["toolUseId"] == "tooluse_0"


def test_a_bedrock_error_fails_the_turn_with_502(api, bedrock):
    agent_id, session_id = new_session(api, model=MODEL)
    bedrock.reply(error="throttling")
    resp = api.post(turn_url(agent_id, session_id), json={"messages": [user("x")]})
    assert resp.status_code == 502 and "ThrottlingException" in resp.json()["detail"]
    bedrock.reply(text="fine now")
    assert (
        api.post(turn_url(agent_id, session_id), json={"messages": [user("y")]}).status_code == 200
    )


def test_response_format_is_refused_for_bedrock_before_anything_runs(api, bedrock):
    agent_id, session_id = new_session(
        api, model=MODEL, response_format={"type": "json_schema", "json_schema": {"type": "object"}}
    )
    resp = api.post(turn_url(agent_id, session_id), json={"messages": [user("x")]})
    assert resp.status_code == 400 and "response_format" in resp.json()["detail"]
    assert bedrock.requests == []


def test_images_go_to_converse_as_bytes_and_links_are_refused(api, bedrock):
    import base64

    agent_id, session_id = new_session(api, model=MODEL)
    png = base64.b64encode(b"\x89PNG fake").decode()
    image = {"type": "image", "image": {"data": png}}
    message = {"role": "user", "content": [{"type": "text", "text": "look"}, image]}
    assert api.post(turn_url(agent_id, session_id), json={"messages": [message]}).status_code == 200
    block = bedrock.requests[-1]["messages"][0]["content"][1]["image"]
    assert (
        block["format"] == "png" and base64.b64decode(block["source"]["bytes"]) == b"\x89PNG fake"
    )
    link = {"type": "image", "image": {"url": {"uri": "https://example.com/x.png"}}}
    resp = api.post(
        turn_url(agent_id, session_id), json={"messages": [{"role": "user", "content": [link]}]}
    )
    assert resp.status_code == 400 and "data: URLs" in resp.json()["detail"]


def test_input_tokens_are_bedrocks_own_count(dynamodb, bedrock):
    """A Bedrock model's input is counted by Bedrock (CountTokens, as Converse would read it);
    other models' by the estimate."""
    from agents_core.web.responses import router as responses_router

    services = build_services(Settings(table_name=TABLE), dynamodb)
    app = create_app(responses_router, services=services)
    with TestClient(app) as client:
        body = {"model": MODEL, "input": "one two three", "instructions": "Be terse."}
        counted = client.post("/v1/responses/input_tokens", json=body)
        estimated = client.post("/v1/responses/input_tokens", json={**body, "model": "offline"})
    assert counted.status_code == 200, counted.text
    asked = bedrock.requests[-1]
    assert asked["modelId"] == "anthropic.claude-3-haiku-20240307-v1:0"
    assert asked["input"]["converse"]["system"] == [{"text": "Be terse."}]
    assert asked["input"]["converse"]["messages"][0]["content"] == [{"text": "one two three"}]
    assert counted.json()["input_tokens"] == len(json.dumps(asked["input"]).split())
    assert estimated.json()["input_tokens"] == (len("one two three") + len("Be terse.")) // 4 + 1
