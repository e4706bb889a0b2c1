"""The OpenAI Agents SDK against `make run`'s server and a scripted model: an agent with a
function tool over the Responses API, and a session kept in a Conversations API conversation."""

from __future__ import annotations

import json

import pytest
from agents import (
    Agent,
    OpenAIConversationsSession,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from .local_server import running_server


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@pytest.fixture(scope="module")
def base(model):
    set_tracing_disabled(True)  # the SDK would send its traces to OpenAI
    with running_server({"OPENAI_BASE_URL": model.url}) as (url, _):
        yield url


@pytest.fixture
def client(base, model):
    model.reset()
    return AsyncOpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)


def agent(client: AsyncOpenAI) -> Agent:
    return Agent(
        name="forecaster",
        instructions="Answer briefly.",
        model=OpenAIResponsesModel(model="llama3.2:3b", openai_client=client),
        tools=[get_weather],
    )


def test_an_agent_calls_its_function_tool_and_answers(client, model):
    model.reply(tool_calls=[("get_weather", json.dumps({"city": "Paris"}))])
    model.reply(text="It is sunny in Paris.")
    result = Runner.run_sync(agent(client), "What is the weather in Paris?")
    assert result.final_output == "It is sunny in Paris."
    second = model.requests[-1]["messages"]
    assert second[0] == {"role": "system", "content": "Answer briefly."}
    call_id = second[-2]["tool_calls"][0]["id"]  # the SDK ran the tool, and sent its result
    assert second[-1] == {"role": "tool", "tool_call_id": call_id, "content": "sunny in Paris"}


def test_a_session_in_a_conversation_carries_the_earlier_turns(client, model):
    session = OpenAIConversationsSession(openai_client=client)
    model.reply(text="Nice to meet you, Ada.")
    first = Runner.run_sync(agent(client), "My name is Ada.", session=session)
    assert first.final_output == "Nice to meet you, Ada."
    model.reply(text="You are Ada.")
    second = Runner.run_sync(agent(client), "What is my name?", session=session)
    assert second.final_output == "You are Ada."
    said = [(m["role"], m["content"]) for m in model.requests[-1]["messages"]]
    assert ("user", "My name is Ada.") in said
    assert ("assistant", "Nice to meet you, Ada.") in said
    assert said[-1] == ("user", "What is my name?")
