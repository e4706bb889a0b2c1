"""Shields in process: the registry per tenant, each provider against its local peer (an
ApplyGuardrail emulator through a real boto3 client, Llama Guard verdicts from the scripted
model server, the offline shield), the service the engine calls, failures, bad input."""

from __future__ import annotations

import asyncio

import boto3
import pytest
from agents_core.errors import InvalidRequest, UpstreamFailed
from agents_core.services import Services
from agents_core.settings import Settings
from agents_core.web.app import create_app
from agents_core.web.safety import safety_router, shields_router
from botocore.config import Config
from fastapi.testclient import TestClient

from .conftest import TABLE, error_message
from .peers.guardrail_emulator import GuardrailEmulator


@pytest.fixture(scope="module")
def guardrails():
    with GuardrailEmulator() as emulator:
        emulator.guardrail(
            "gr1abc", version="2", words=["password"], filters={"VIOLENCE": ["attack"]}
        )
        yield emulator


def make_services(dynamodb, guardrails, model, **settings):
    """Services whose Bedrock client is a real boto3 client aimed at the emulator."""
    bedrock = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=guardrails.url,
        config=Config(retries={"mode": "standard", "total_max_attempts": 2}),
    )
    settings = Settings(table_name=TABLE, openai_base_url=model.url, **settings)
    return Services(settings=settings, dynamodb=dynamodb, bedrock_client=bedrock)


@pytest.fixture
def services(dynamodb, guardrails, model):
    guardrails.reset()
    model.reset()
    return make_services(dynamodb, guardrails, model)


def as_tenant(app):
    """The app as API Gateway hands it a request: the caller (here from an `x-tenant` header) in
    the event's authorizer context, where Mangum puts it."""

    async def wrapped(scope, receive, send):
        if scope["type"] == "http":
            tenant = dict(scope["headers"]).get(b"x-tenant")
            if tenant:
                context = {"requestContext": {"authorizer": {"principalId": tenant.decode()}}}
                scope = {**scope, "aws.event": context}
        await app(scope, receive, send)

    return wrapped


@pytest.fixture
def http(services):
    app = create_app(shields_router, safety_router, services=services)
    return TestClient(as_tenant(app), raise_server_exceptions=False)


BEDROCK = {
    "shield_id": "guard",
    "provider_id": "bedrock",
    "provider_shield_id": "gr1abc",
    "params": {"guardrailVersion": "2"},
}
LLAMA_GUARD = {"shield_id": "meta-llama/Llama-Guard-3-8B", "provider_id": "llama-guard"}


def user(text):
    return [{"role": "user", "content": text}]


def run_shield(http, shield_id, text, tenant="alice", role="user"):
    message = {"role": role, "content": text}
    if role == "assistant":
        message["stop_reason"] = "end_of_turn"
    body = {"shield_id": shield_id, "messages": [message], "params": {}}
    return http.post("/v1/safety/run-shield", json=body, headers={"x-tenant": tenant})


def test_a_bedrock_guardrail_blocks_with_its_own_message_and_assessments(http, guardrails):
    assert http.post("/v1/shields", json=BEDROCK, headers={"x-tenant": "alice"}).status_code == 200
    assert run_shield(http, "guard", "What's the weather?").json() == {"violation": None}

    violation = run_shield(http, "guard", "Tell me your password").json()["violation"]
    assert violation["violation_level"] == "error"
    assert violation["user_message"] == "Sorry, the model cannot answer this question."
    words = violation["metadata"]["assessments"][0]["wordPolicy"]["customWords"]
    assert words[0]["match"] == "password" and violation["metadata"]["guardrail_version"] == "2"

    run_shield(http, "guard", "an attack plan", role="assistant")
    sent = guardrails.requests[-1]
    assert sent["path"] == "/guardrail/gr1abc/version/2/apply"
    assert sent["source"] == "OUTPUT" and sent["content"] == [{"text": {"text": "an attack plan"}}]
    assert guardrails.requests[0]["source"] == "INPUT"


def test_a_guardrail_may_be_named_by_its_arn(http, guardrails):
    arn = "arn:aws:bedrock:us-east-1:123456789012:guardrail/gr1abc"
    body = {**BEDROCK, "shield_id": "by-arn", "provider_shield_id": arn}
    assert http.post("/v1/shields", json=body, headers={"x-tenant": "alice"}).status_code == 200
    violation = run_shield(http, "by-arn", "the password is 1234").json()["violation"]
    assert violation["metadata"]["guardrail_id"] == arn
    assert guardrails.requests[-1]["guardrail"] == arn


def test_llama_guard_asks_the_model_with_its_prompt_and_reads_its_verdict(http, model):
    assert (
        http.post("/v1/shields", json=LLAMA_GUARD, headers={"x-tenant": "alice"}).status_code == 200
    )
    model.reply(text="safe")
    assert run_shield(http, "meta-llama/Llama-Guard-3-8B", "Hello").json() == {"violation": None}
    model.reply(text="unsafe\nS1,S10")
    violation = run_shield(http, "meta-llama/Llama-Guard-3-8B", "Hurt them").json()["violation"]
    assert violation["violation_level"] == "error"
    assert violation["metadata"]["violation_type"] == "S1,S10"
    assert violation["metadata"]["categories"] == ["Violent Crimes", "Hate"]

    asked = model.requests[-1]
    assert asked["model"] == "meta-llama/Llama-Guard-3-8B" and asked["temperature"] == 0.0
    prompt = asked["messages"][0]["content"]
    assert "S14: Code Interpreter Abuse." in prompt and "User: Hurt them" in prompt
    assert "ONLY THE LAST User message" in prompt


def test_llama_guard_excluded_categories_never_block_and_an_unreadable_verdict_fails(http, model):
    body = {**LLAMA_GUARD, "params": {"excluded_categories": ["S6"]}}
    http.post("/v1/shields", json=body, headers={"x-tenant": "alice"})
    model.reply(text="unsafe\nS6")
    assert run_shield(http, "meta-llama/Llama-Guard-3-8B", "Dose?").json() == {"violation": None}
    assert "S6: Specialized Advice" not in model.requests[-1]["messages"][0]["content"]

    model.reply(text="I think this is fine")
    resp = run_shield(http, "meta-llama/Llama-Guard-3-8B", "Hello")
    assert resp.status_code == 502
    assert "answered neither 'safe' nor 'unsafe'" in error_message(resp)


def test_the_built_in_offline_shield_and_a_registered_one_with_patterns(http):
    assert run_shield(http, "offline", "How do I bake bread?").json() == {"violation": None}
    violation = run_shield(http, "offline", "How do I build a BOMB?").json()["violation"]
    assert violation["metadata"]["violation_type"] == "illicit/violent"
    assert violation["metadata"]["match"] == "BOMB"

    body = {
        "shield_id": "no-pii",
        "provider_id": "offline",
        "params": {"patterns": [r"\b\d{3}-\d{2}-\d{4}\b"], "user_message": "No SSNs, please."},
    }
    assert http.post("/v1/shields", json=body, headers={"x-tenant": "alice"}).status_code == 200
    blocked = run_shield(http, "no-pii", "mine is 123-45-6789").json()["violation"]
    assert blocked["user_message"] == "No SSNs, please."
    assert run_shield(http, "no-pii", "a bomb").json() == {"violation": None}


def test_shields_belong_to_their_tenant(http):
    assert http.post("/v1/shields", json=BEDROCK, headers={"x-tenant": "alice"}).status_code == 200
    assert http.get("/v1/shields/guard", headers={"x-tenant": "alice"}).json()["provider_id"] == (
        "bedrock"
    )
    assert http.get("/v1/shields/guard", headers={"x-tenant": "mallory"}).status_code == 404
    mallory = http.get("/v1/shields", headers={"x-tenant": "mallory"}).json()["data"]
    assert [s["identifier"] for s in mallory] == ["offline"]
    assert http.delete("/v1/shields/guard", headers={"x-tenant": "mallory"}).status_code == 404
    resp = run_shield(http, "guard", "hello", tenant="mallory")
    assert resp.status_code == 400 and "Shield guard not found" in error_message(resp)
    # alice's shield is untouched
    assert http.get("/v1/shields/guard", headers={"x-tenant": "alice"}).status_code == 200


def test_a_shield_is_replaced_by_registering_it_again_and_gone_once_deleted(http):
    http.post("/v1/shields", json=BEDROCK, headers={"x-tenant": "alice"})
    again = {**BEDROCK, "params": {"guardrailVersion": "DRAFT"}}
    assert http.post("/v1/shields", json=again, headers={"x-tenant": "alice"}).status_code == 200
    shield = http.get("/v1/shields/guard", headers={"x-tenant": "alice"}).json()
    assert shield["params"] == {"guardrailVersion": "DRAFT"}
    assert http.delete("/v1/shields/guard", headers={"x-tenant": "alice"}).status_code == 204
    assert http.get("/v1/shields/guard", headers={"x-tenant": "alice"}).status_code == 404
    assert run_shield(http, "guard", "hi").status_code == 400


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({**BEDROCK, "shield_id": "bad#id"}, "shield_id"),
        ({**BEDROCK, "provider_id": "openai"}, "provider_id"),
        ({**BEDROCK, "params": {}}, "guardrailVersion is required"),
        ({**BEDROCK, "params": {"guardrailVersion": "v2"}}, "guardrailVersion is required"),
        ({**BEDROCK, "provider_shield_id": "not a guardrail"}, "not a Bedrock guardrail id"),
        ({**BEDROCK, "params": {"guardrailVersion": "2", "x": 1}}, "['x'] are not bedrock params"),
        (
            {"shield_id": "p", "provider_id": "offline", "params": {"patterns": ["(unclosed"]}},
            "not a regular expression",
        ),
        (
            {"shield_id": "p", "provider_id": "offline", "params": {"patterns": []}},
            "1 to 100 patterns",
        ),
        (
            {"shield_id": "p", "provider_id": "offline", "params": {"patterns": ["x" * 20000]}},
            "at most 16384 bytes",
        ),
        (
            {**LLAMA_GUARD, "params": {"excluded_categories": ["S99"]}},
            "excluded_categories",
        ),
        ({"shield_id": "offline", "provider_id": "offline"}, "built in"),
    ],
)
def test_a_bad_registration_is_400_and_changes_nothing(http, body, says):
    before = http.get("/v1/shields", headers={"x-tenant": "alice"}).json()
    resp = http.post("/v1/shields", json=body, headers={"x-tenant": "alice"})
    assert resp.status_code == 400 and says in error_message(resp)
    assert http.get("/v1/shields", headers={"x-tenant": "alice"}).json() == before


def test_bad_run_shield_and_moderation_requests_are_400(http):
    no_messages = {"shield_id": "offline", "messages": [], "params": {}}
    assert http.post("/v1/safety/run-shield", json=no_messages).status_code == 400
    overridden = {
        "shield_id": "offline",
        "messages": user("hi"),
        "params": {"patterns": ["("]},
    }
    resp = http.post("/v1/safety/run-shield", json=overridden)
    assert resp.status_code == 400 and "not a regular expression" in error_message(resp)
    resp = http.post("/v1/moderations", json={"input": "hi"})
    assert resp.status_code == 400 and "model is required" in error_message(resp)
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    resp = http.post("/v1/moderations", json={"model": "offline", "input": [image]})
    assert resp.status_code == 400 and "images are not supported" in error_message(resp)
    resp = http.post("/v1/moderations", json={"model": "nope", "input": "hi"})
    assert resp.status_code == 400 and "Shield nope not found" in error_message(resp)


def test_moderations_answer_one_result_per_input_in_openai_categories(http):
    http.post("/v1/shields", json=BEDROCK, headers={"x-tenant": "alice"})
    body = {"model": "guard", "input": ["plan an attack", "nice weather"]}
    for path in ("/v1/moderations", "/v1/openai/v1/moderations"):
        answer = http.post(path, json=body, headers={"x-tenant": "alice"}).json()
        assert answer["model"] == "guard" and answer["id"].startswith("modr-")
        first, second = answer["results"]
        assert first["flagged"] is True and first["categories"]["violence"] is True
        assert first["category_scores"]["violence"] == 1.0 and first["categories"]["hate"] is False
        assert first["user_message"] == "Sorry, the model cannot answer this question."
        assert second["flagged"] is False and not any(second["categories"].values())
        assert len(second["categories"]) == 13


def test_a_failing_guardrail_fails_closed_with_a_clear_502(http, guardrails):
    http.post("/v1/shields", json=BEDROCK, headers={"x-tenant": "alice"})
    guardrails.fail("AccessDeniedException")
    resp = run_shield(http, "guard", "hello")
    assert resp.status_code == 502
    assert error_message(resp) == (
        "Shield guard (bedrock) failed: Bedrock guardrail gr1abc version 2 failed:"
        " AccessDeniedException: emulated"
    )
    unknown_version = {**BEDROCK, "shield_id": "old", "params": {"guardrailVersion": "9"}}
    http.post("/v1/shields", json=unknown_version, headers={"x-tenant": "alice"})
    resp = run_shield(http, "old", "hello")
    assert resp.status_code == 502 and "ResourceNotFoundException" in error_message(resp)


# --- the service the engine calls -------------------------------------------------------------


def register(services, tenant, **body):
    from agents_core.api.safety import RegisterShieldRequest

    return services.safety.register(tenant, RegisterShieldRequest(**body))


def test_check_runs_every_shield_and_returns_the_first_blocking_violation(services, guardrails):
    register(services, "alice", **BEDROCK)
    check = services.safety.check
    messages = [{"role": "user", "content": "Hello"}, {"role": "user", "content": "a bomb"}]
    violation = asyncio.run(check("alice", ["guard", "offline"], messages, source="input"))
    assert violation.metadata["violation_type"] == "illicit/violent"
    assert len(guardrails.requests) == 1  # the guardrail ran too, in parallel

    both = [{"role": "assistant", "content": "an attack with a bomb"}]
    violation = asyncio.run(check("alice", ["guard", "offline"], both, source="output"))
    assert violation.metadata["guardrail_id"] == "gr1abc"  # the first in the order asked
    assert guardrails.requests[-1]["source"] == "OUTPUT"
    assert asyncio.run(check("alice", ["guard", "offline"], user("hi"), source="input")) is None
    assert asyncio.run(check("alice", [], user("a bomb"), source="input")) is None


def test_check_refuses_an_unknown_shield_before_running_any(services, guardrails):
    register(services, "alice", **BEDROCK)
    with pytest.raises(InvalidRequest, match="Shield missing not found"):
        asyncio.run(services.safety.check("alice", ["guard", "missing"], user("x"), source="input"))
    with pytest.raises(InvalidRequest, match="Shield guard not found"):
        asyncio.run(services.safety.check("bob", ["guard"], user("x"), source="input"))
    assert guardrails.requests == []


def test_a_failing_shield_fails_the_check_closed_or_passes_when_fail_open(
    dynamodb, guardrails, model
):
    closed = make_services(dynamodb, guardrails, model)
    register(closed, "alice", **BEDROCK)
    guardrails.reset()
    guardrails.fail("InternalServerException", times=2)
    with pytest.raises(UpstreamFailed, match="Shield guard \\(bedrock\\) failed"):
        asyncio.run(closed.safety.check("alice", ["guard"], user("hello"), source="input"))

    opened = make_services(dynamodb, guardrails, model, shield_fail_open=True)
    guardrails.reset()
    guardrails.fail("InternalServerException", times=2)
    assert asyncio.run(opened.safety.check("alice", ["guard"], user("hi"), source="input")) is None
    # fail-open passes a failing shield only: the offline one still blocks
    messages = user("a bomb")
    violation = asyncio.run(
        opened.safety.check("alice", ["guard", "offline"], messages, source="input")
    )
    assert violation is not None and violation.metadata["match"] == "bomb"


def test_a_llama_guard_model_that_fails_fails_the_check(services, model):
    register(services, "alice", **LLAMA_GUARD)
    model.reply(error="status", status=500)
    with pytest.raises(
        UpstreamFailed, match="Shield meta-llama/Llama-Guard-3-8B \\(llama-guard\\)"
    ):
        asyncio.run(
            services.safety.check(
                "alice", ["meta-llama/Llama-Guard-3-8B"], user("hi"), source="input"
            )
        )
