"""Shields through the clients users have, against the local server `make run` starts:
llama-stack-client 0.2.12 (shields, run-shield) and the openai SDK (moderations), with the
ApplyGuardrail emulator as Bedrock and the scripted model server serving Llama Guard."""

from __future__ import annotations

import llama_stack_client
import openai
import pytest
from llama_stack_client import LlamaStackClient

from .conftest import error_message
from .local_server import started_server
from .peers.guardrail_emulator import GuardrailEmulator
from .peers.openai_server import ScriptedOpenAI


@pytest.fixture(scope="module")
def peers():
    with GuardrailEmulator() as guardrails, ScriptedOpenAI() as model:
        guardrails.guardrail("gr1abc", version="1", words=["password"])
        yield guardrails, model


@pytest.fixture(scope="module")
def server(peers):
    guardrails, model = peers
    env = {"OPENAI_BASE_URL": model.url, "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": guardrails.url}
    with started_server(env) as started:
        yield started


@pytest.fixture(scope="module")
def client(server):
    return LlamaStackClient(base_url=server.base)


def test_the_server_announces_its_built_in_offline_shield(server):
    assert "shields: built-in 'offline'" in server.banner
    assert "provider failures fail closed" in server.banner


def test_shields_register_list_and_retrieve_through_llama_stack_client(client):
    shields = client.shields.list()
    assert [s.identifier for s in shields] == ["offline"] and shields[0].provider_id == "offline"

    guard = client.shields.register(
        shield_id="guard",
        provider_id="bedrock",
        provider_shield_id="gr1abc",
        params={"guardrailVersion": "1"},
    )
    assert guard.identifier == "guard" and guard.provider_resource_id == "gr1abc"
    assert guard.type == "shield" and guard.params == {"guardrailVersion": "1"}
    client.shields.register(shield_id="meta-llama/Llama-Guard-3-8B", provider_id="llama-guard")

    names = [s.identifier for s in client.shields.list()]
    assert names == ["offline", "guard", "meta-llama/Llama-Guard-3-8B"]
    lg = client.shields.retrieve("meta-llama/Llama-Guard-3-8B")
    assert lg.provider_id == "llama-guard" and lg.provider_resource_id == lg.identifier
    with pytest.raises(llama_stack_client.NotFoundError):
        client.shields.retrieve("absent")
    with pytest.raises(llama_stack_client.BadRequestError):
        client.shields.register(shield_id="x", provider_id="bedrock", provider_shield_id="gr1abc")


def run(client, shield_id, text):
    messages = [{"role": "user", "content": text}]
    return client.safety.run_shield(shield_id=shield_id, messages=messages, params={}).violation


def test_run_shield_with_each_provider_through_llama_stack_client(client, peers):
    guardrails, model = peers
    client.shields.register(
        shield_id="guard",
        provider_id="bedrock",
        provider_shield_id="gr1abc",
        params={"guardrailVersion": "1"},
    )
    client.shields.register(shield_id="meta-llama/Llama-Guard-3-8B", provider_id="llama-guard")

    assert run(client, "offline", "Bake bread") is None
    assert run(client, "offline", "Make explosives").violation_level == "error"

    assert run(client, "guard", "Hello") is None
    blocked = run(client, "guard", "Give me the admin password")
    assert blocked.user_message == "Sorry, the model cannot answer this question."
    assert guardrails.requests[-1]["guardrail"] == "gr1abc"

    model.reply(text="safe")
    assert run(client, "meta-llama/Llama-Guard-3-8B", "Hello") is None
    model.reply(text="unsafe\nS9")
    blocked = run(client, "meta-llama/Llama-Guard-3-8B", "Make a nerve agent")
    assert blocked.metadata["categories"] == ["Indiscriminate Weapons"]
    assert "User: Make a nerve agent" in model.requests[-1]["messages"][0]["content"]

    with pytest.raises(llama_stack_client.BadRequestError, match="Shield nope not found"):
        run(client, "nope", "Hello")


def test_moderations_through_the_openai_sdk(server):
    for base in (f"{server.base}/v1/openai/v1", f"{server.base}/v1"):
        sdk = openai.OpenAI(base_url=base, api_key="unused")
        answer = sdk.moderations.create(model="offline", input=["a bomb threat", "good morning"])
        assert answer.model == "offline" and len(answer.results) == 2
        flagged, clean = answer.results
        assert flagged.flagged and flagged.categories.illicit_violent
        assert flagged.category_scores.illicit_violent == 1.0 and not flagged.categories.hate
        assert flagged.category_applied_input_types.illicit_violent == ["text"]
        assert not clean.flagged and not clean.categories.violence
        with pytest.raises(openai.BadRequestError) as refused:
            sdk.moderations.create(model="nope", input="hi")
        assert "Shield nope not found" in error_message(refused.value.response)
