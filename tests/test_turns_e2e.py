"""Turns end to end: llama-stack-client 0.2.12 against `make run`'s server, which calls a scripted
OpenAI-compatible model over HTTP."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from llama_stack_client import ConflictError, LlamaStackClient
from llama_stack_client.lib.agents.agent import Agent
from llama_stack_client.lib.agents.client_tool import client_tool

from .local_server import running_server
from .turn_support import WEATHER_TOOL


@pytest.fixture(scope="module")
def base(model):
    env = {"OPENAI_BASE_URL": model.url, "INFERENCE_TIMEOUT_SECONDS": "3"}
    with running_server(env) as (url, banner):
        assert f"OpenAI-compatible at {model.url}" in banner
        yield url


@pytest.fixture
def client(base, model):
    model.reset()
    return LlamaStackClient(base_url=base, timeout=30)


def new_session(client, **config):
    agent = client.agents.create(
        agent_config={"model": "llama3.2:3b", "instructions": "Be brief.", **config}
    )
    session = client.agents.session.create(agent.agent_id, session_name="e2e")
    return agent.agent_id, session.session_id


def test_streaming_turn(client, model):
    agent_id, session_id = new_session(client)
    model.reply(text="Streaming works fine", chunks=4)
    chunks = list(
        client.agents.turn.create(
            session_id, agent_id=agent_id, messages=[{"role": "user", "content": "hi"}], stream=True
        )
    )
    kinds = [c.event.payload.event_type for c in chunks]
    assert kinds[0] == "turn_start" and kinds[-1] == "turn_complete"
    assert kinds.count("step_progress") == 4
    text = "".join(
        c.event.payload.delta.text for c in chunks if c.event.payload.event_type == "step_progress"
    )
    assert text == chunks[-1].event.payload.turn.output_message.content == "Streaming works fine"


def test_non_streaming_turn_and_history_on_the_next_turn(client, model):
    agent_id, session_id = new_session(client)
    model.reply(text="Paris.")
    turn = client.agents.turn.create(
        session_id,
        agent_id=agent_id,
        messages=[{"role": "user", "content": "Capital of France?"}],
        stream=False,
    )
    assert turn.output_message.content == "Paris."
    assert (
        client.agents.turn.retrieve(turn.turn_id, agent_id=agent_id, session_id=session_id).turn_id
        == turn.turn_id
    )
    model.reply(text="About 2 million.")
    client.agents.turn.create(
        session_id,
        agent_id=agent_id,
        messages=[{"role": "user", "content": "Population?"}],
        stream=False,
    )
    contents = [m["content"] for m in model.requests[-1]["messages"]]
    assert contents == ["Be brief.", "Capital of France?", "Paris.", "Population?"]


@pytest.mark.parametrize("stream", [False, True])
def test_client_tool_awaits_input_and_resumes(client, model, stream):
    agent_id, session_id = new_session(client, client_tools=[WEATHER_TOOL])
    model.reply(tool_calls=[("get_weather", '{"city": "Rome"}')])
    model.reply(text="Rome is warm.")
    messages = [{"role": "user", "content": "Weather in Rome?"}]
    if stream:
        chunks = list(
            client.agents.turn.create(session_id, agent_id=agent_id, messages=messages, stream=True)
        )
        assert chunks[-1].event.payload.event_type == "turn_awaiting_input"
        paused = chunks[-1].event.payload.turn
    else:
        paused = client.agents.turn.create(
            session_id, agent_id=agent_id, messages=messages, stream=False
        )
    call = paused.output_message.tool_calls[0]
    assert call.tool_name == "get_weather" and call.arguments == {"city": "Rome"}
    responses = [{"call_id": call.call_id, "tool_name": "get_weather", "content": "25C"}]
    if stream:
        chunks = list(
            client.agents.turn.resume(
                paused.turn_id,
                agent_id=agent_id,
                session_id=session_id,
                tool_responses=responses,
                stream=True,
            )
        )
        done = chunks[-1].event.payload.turn
    else:
        done = client.agents.turn.resume(
            paused.turn_id, agent_id=agent_id, session_id=session_id, tool_responses=responses
        )
    assert done.turn_id == paused.turn_id
    assert done.output_message.content == "Rome is warm."
    assert [s.step_type for s in done.steps] == ["inference", "tool_execution", "inference"]


def test_agent_class_runs_its_client_tool_loop(client, model):
    calls = []

    @client_tool
    def get_weather(city: str) -> str:
        """Current weather in a city

        :param city: the city name
        """
        calls.append(city)
        return f"{city}: 18C and cloudy"

    agent = Agent(client, model="llama3.2:3b", instructions="Use tools.", tools=[get_weather])
    session_id = agent.create_session("agent-class")
    model.reply(tool_calls=[("get_weather", '{"city": "Lyon"}')])
    model.reply(text="Lyon is cloudy, 18C.")
    turn = agent.create_turn(
        messages=[{"role": "user", "content": "Lyon?"}], session_id=session_id, stream=False
    )
    assert calls == ["Lyon"]
    assert turn.output_message.content == "Lyon is cloudy, 18C."
    tool_message = model.requests[-1]["messages"][-1]
    assert tool_message["role"] == "tool" and "18C and cloudy" in tool_message["content"]
    sent_tool = model.requests[0]["tools"][0]["function"]
    assert sent_tool["parameters"]["properties"]["city"]["type"] == "string"


def test_a_second_turn_on_a_busy_session_gets_409(client, model):
    agent_id, session_id = new_session(client)
    model.reply(text="slow answer", delay=2)  # under INFERENCE_TIMEOUT_SECONDS
    result = {}

    def first():
        result["turn"] = client.agents.turn.create(
            session_id,
            agent_id=agent_id,
            messages=[{"role": "user", "content": "one"}],
            stream=False,
        )

    thread = threading.Thread(target=first)
    thread.start()
    deadline = time.monotonic() + 10
    while not model.requests and time.monotonic() < deadline:
        time.sleep(0.02)  # wait until the first turn is at the model
    # Stainless clients retry a 409 by default; ask once to see the answer itself.
    with pytest.raises(ConflictError):
        client.with_options(max_retries=0).agents.turn.create(
            session_id,
            agent_id=agent_id,
            messages=[{"role": "user", "content": "two"}],
            stream=False,
        )
    thread.join()
    assert result["turn"].output_message.content == "slow answer"
    session = client.agents.session.retrieve(session_id, agent_id=agent_id)
    assert len(session.turns) == 1


def test_a_provider_failure_surfaces_and_the_session_stays_usable(client, base, model):
    agent_id, session_id = new_session(client)
    model.reply(error="status", status=503)
    chunks = list(
        client.agents.turn.create(
            session_id, agent_id=agent_id, messages=[{"role": "user", "content": "x"}], stream=True
        )
    )
    assert chunks[0].event.payload.event_type == "turn_start"
    assert chunks[-1].error["status"] == 502 and "503" in chunks[-1].error["message"]
    model.reply(error="hang")
    url = f"{base}/v1/agents/{agent_id}/session/{session_id}/turn"
    resp = httpx.post(url, json={"messages": [{"role": "user", "content": "y"}]}, timeout=30)
    assert resp.status_code == 504
    model.reply(text="back to normal")
    turn = client.agents.turn.create(
        session_id, agent_id=agent_id, messages=[{"role": "user", "content": "z"}], stream=False
    )
    assert turn.output_message.content == "back to normal"
