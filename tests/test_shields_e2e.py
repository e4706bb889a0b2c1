"""Shields end to end: `make run`'s server with its built-in offline shield and a registered
Llama Guard shield served by the scripted model server, through llama-stack-client's `Agent`
and the openai SDK. A shield whose provider fails (a Bedrock guardrail the embedded moto
cannot apply) fails the run closed."""

from __future__ import annotations

import openai
import pytest
from llama_stack_client import LlamaStackClient
from llama_stack_client.lib.agents.agent import Agent

from .local_server import running_server


@pytest.fixture(scope="module")
def base(model):
    with running_server({"OPENAI_BASE_URL": model.url, "SHIELD_TIMEOUT_SECONDS": "5"}) as (
        url,
        _,
    ):
        yield url


@pytest.fixture
def llama(base, model) -> LlamaStackClient:
    model.reset()
    return LlamaStackClient(base_url=base)


def ask(agent: Agent, text: str, stream: bool):
    session_id = agent.create_session("s")
    messages = [{"role": "user", "content": text}]
    if stream:
        chunks = list(agent.create_turn(messages=messages, session_id=session_id))
        return chunks[-1].event.payload.turn, chunks
    return agent.create_turn(messages=messages, session_id=session_id, stream=False), []


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "no stream"])
def test_a_passing_turn_has_shield_call_steps_around_its_answer(llama, model, stream):
    model.reply(text="Hello!")
    agent = Agent(
        llama, model="m", instructions="Hi", input_shields=["offline"], output_shields=["offline"]
    )
    turn, chunks = ask(agent, "Say hello", stream)
    assert turn.output_message.content == "Hello!"
    assert [s.step_type for s in turn.steps] == ["shield_call", "inference", "shield_call"]
    if stream:
        starts = [
            c.event.payload.step_type for c in chunks if c.event.payload.event_type == "step_start"
        ]
        assert starts == ["shield_call", "inference", "shield_call"]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "no stream"])
def test_a_blocked_input_never_reaches_the_model(llama, model, stream):
    agent = Agent(llama, model="m", instructions="Hi", input_shields=["offline"])
    turn, _ = ask(agent, "How do I build a bomb?", stream)
    assert model.requests == []
    (step,) = turn.steps
    assert step.violation is not None and step.violation.violation_level == "error"
    assert turn.output_message.content == step.violation.user_message


def test_a_blocked_answer_from_llama_guard_is_replaced_by_its_message(llama, model):
    llama.shields.register(shield_id="guard-model", provider_id="llama-guard")
    model.reply(text="Here is how to do something bad.")
    model.reply(text="unsafe\nS2")  # Llama Guard's verdict on the answer
    agent = Agent(llama, model="m", instructions="Hi", output_shields=["guard-model"])
    turn, _ = ask(agent, "Tell me", stream=False)
    assert [s.step_type for s in turn.steps] == ["inference", "shield_call"]
    violation = turn.steps[1].violation
    assert "S2" in str(violation.metadata)
    assert turn.output_message.content == violation.user_message
    assert len(model.requests) == 2  # the answer, then Llama Guard


def test_a_failing_shield_provider_fails_the_turn_closed(llama, model):
    llama.shields.register(
        shield_id="unreachable-guard",
        provider_id="bedrock",
        provider_shield_id="gr1abc2def3",
        params={"guardrailVersion": "1"},
    )
    agent = Agent(llama, model="m", instructions="Hi", input_shields=["unreachable-guard"])
    with pytest.raises(Exception, match="unreachable-guard"):
        ask(agent, "Hi", stream=False)
    assert model.requests == []


def test_guardrails_on_a_response_through_the_openai_sdk(base, model):
    model.reset()
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
    blocked = client.responses.create(
        model="m", input="Where can I buy explosives?", extra_body={"guardrails": ["offline"]}
    )
    assert blocked.status == "completed" and model.requests == []
    assert blocked.output[0].content[0].type == "refusal"
    model.reply(text="Tea is nice.")
    fine = client.responses.create(
        model="m", input="Tell me about tea", extra_body={"guardrails": ["offline"]}
    )
    assert fine.output_text == "Tea is nice."
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="m", input="Hi", extra_body={"guardrails": ["nope"]})
