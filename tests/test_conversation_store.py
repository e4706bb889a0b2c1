"""Conversations in the table (moto) and in the engine's memory storage: tenants apart, the
append of two responses racing on one conversation (the second gets 409, nothing of it stored,
nothing lost or interleaved), the bounds, and the model catalog's endpoint failures."""

from __future__ import annotations

import asyncio
import logging

import httpx
import openai
import pytest
from agents_core.api.conversations import AddItemsRequest, CreateConversationRequest
from agents_core.api.responses import CreateOpenaiResponseRequest
from agents_core.engine.responses import ResponsesEngine
from agents_core.errors import RunFailed
from agents_core.inference.catalog import ModelCatalog
from agents_core.inference.router import InferenceSettings, ModelRouter
from agents_core.services import build_services
from agents_core.settings import Settings
from agents_core.web.app import create_app
from agents_core.web.conversations import router as conversations_router
from agents_core.web.responses import router as responses_router
from fastapi.testclient import TestClient

from .conftest import TABLE
from .legacy_support import tenant_headers
from .local_server import free_port
from .memory_storage import MemoryResponseStorage


@pytest.fixture
def svc(dynamodb):
    return build_services(Settings(table_name=TABLE, trust_request_context_header=True), dynamodb)


def sdk(svc, tenant: str) -> openai.OpenAI:
    """The openai SDK on the app in-process, as `tenant` (API Gateway's request context)."""
    app = create_app(responses_router, conversations_router, services=svc)
    http = TestClient(app, base_url="http://testserver", headers=tenant_headers(tenant))
    return openai.OpenAI(
        base_url="http://testserver/v1", api_key="unused", http_client=http, max_retries=0
    )


def request(text: str, conversation: str, **fields) -> CreateOpenaiResponseRequest:
    return CreateOpenaiResponseRequest.model_validate(
        {"model": "offline", "input": text, "conversation": conversation, **fields}
    )


def texts(items) -> list[str]:
    return [i.content[0].text for i in items]


def test_another_tenants_conversation_is_404_everywhere(svc):
    alice, bob = sdk(svc, "alice"), sdk(svc, "bob")
    conversation = alice.conversations.create(items=[{"role": "user", "content": "secret"}])
    item_id = alice.conversations.items.list(conversation.id).data[0].id
    for call in (
        lambda: bob.conversations.retrieve(conversation.id),
        lambda: bob.conversations.update(conversation.id, metadata={"x": "y"}),
        lambda: bob.conversations.items.list(conversation.id),
        lambda: bob.conversations.items.create(
            conversation.id, items=[{"role": "user", "content": "x"}]
        ),
        lambda: bob.conversations.items.retrieve(item_id, conversation_id=conversation.id),
        lambda: bob.conversations.items.delete(item_id, conversation_id=conversation.id),
        lambda: bob.responses.create(model="offline", input="hi", conversation=conversation.id),
        lambda: bob.conversations.delete(conversation.id),
    ):
        with pytest.raises(openai.NotFoundError):
            call()
    assert texts(alice.conversations.items.list(conversation.id).data) == ["secret"]
    assert alice.conversations.retrieve(conversation.id).metadata == {}
    assert bob.get("/conversations", cast_to=httpx.Response).json()["data"] == []
    mine = alice.get("/conversations", cast_to=httpx.Response).json()["data"]
    assert [c["id"] for c in mine] == [conversation.id]


def test_two_responses_racing_on_a_conversation_the_second_gets_409_and_adds_nothing(svc):
    conversation = svc.conversations.create("t", CreateConversationRequest())
    engine = svc.responses_engine

    async def race():
        first = await engine.start("t", request("one", conversation.id))
        second = await engine.start("t", request("two", conversation.id))  # read the same
        won = await first.result()
        with pytest.raises(RunFailed) as lost:
            await second.result()
        return won, second, lost.value

    won, second, lost = asyncio.run(race())
    assert won.status == "completed"
    assert lost.status == 409 and "changed" in lost.message
    assert second.response.status == "failed"
    assert second.response.error.code == "conversation_conflict"
    items, _ = svc.conversation_store.context("t", conversation.id)
    assert texts(items) == ["one", "You said: one"]
    assert items[1].id == won.output[0].id
    loser = svc.responses.get("t", second.response.id)  # readable while it ran; now failed
    assert (loser.status, loser.error.code) == ("failed", "conversation_conflict")
    with pytest.raises(Exception, match="not found"):
        svc.responses.context("t", second.response.id)  # nothing to chain from
    assert svc.responses.get("t", won.id).status == "completed"


def test_a_streamed_loser_ends_with_response_failed_naming_the_conflict(svc):
    conversation = svc.conversations.create("t", CreateConversationRequest())
    engine = svc.responses_engine

    async def race():
        first = await engine.start("t", request("one", conversation.id))
        second = await engine.start("t", request("two", conversation.id, stream=True))
        await first.result()
        return [event async for event in second.events()]

    events = asyncio.run(race())
    assert events[-1].type == "response.failed"
    assert events[-1].response.error.code == "conversation_conflict"
    assert [e.type for e in events].count("response.output_text.delta") > 0  # it did run


def test_items_added_while_a_response_runs_make_its_append_a_conflict(svc):
    conversation = svc.conversations.create("t", CreateConversationRequest())
    engine = svc.responses_engine
    added = AddItemsRequest.model_validate({"items": [{"role": "user", "content": "meanwhile"}]})

    async def race():
        run = await engine.start("t", request("q", conversation.id))
        svc.conversations.add_items("t", conversation.id, added.items)
        with pytest.raises(RunFailed) as lost:
            await run.result()
        return lost.value

    assert asyncio.run(race()).status == 409
    assert texts(svc.conversation_store.context("t", conversation.id)[0]) == ["meanwhile"]


def test_a_conversation_deleted_while_a_response_runs_is_a_404_for_it(svc):
    conversation = svc.conversations.create("t", CreateConversationRequest())

    async def race():
        run = await svc.responses_engine.start("t", request("q", conversation.id))
        svc.conversations.delete("t", conversation.id)
        with pytest.raises(RunFailed) as lost:
            await run.result()
        return lost.value

    assert asyncio.run(race()).status == 404


def test_more_items_than_one_append_takes_is_a_413_with_nothing_stored(svc):
    conversation = svc.conversations.create("t", CreateConversationRequest())
    many = [{"role": "user", "content": f"m{n}"} for n in range(96)]  # and the answer: 97

    async def run():
        body = CreateOpenaiResponseRequest.model_validate(
            {"model": "offline", "input": many, "conversation": conversation.id}
        )
        started = await svc.responses_engine.start("t", body)
        with pytest.raises(RunFailed) as refused:
            await started.result()
        return refused.value

    assert asyncio.run(run()).status == 413
    assert svc.conversation_store.context("t", conversation.id) == ([], 0)


def test_the_memory_storage_answers_a_race_as_the_table_does():
    storage = MemoryResponseStorage()
    conversation = storage.add_conversation("t")
    engine = ResponsesEngine(storage, ModelRouter(InferenceSettings()))

    async def race():
        first = await engine.start("t", request("one", conversation))
        second = await engine.start("t", request("two", conversation))
        await first.result()
        with pytest.raises(RunFailed) as lost:
            await second.result()
        return lost.value

    assert asyncio.run(race()).status == 409
    assert texts(storage.conversation_items("t", conversation)) == ["one", "You said: one"]
    assert len(storage.records) == 1


def test_an_unreachable_model_endpoint_is_left_out_of_the_models_with_a_log(caplog):
    down = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    catalog = ModelCatalog(InferenceSettings(openai_base_url=down), ("amazon.nova-lite-v1:0",))
    with caplog.at_level(logging.WARNING):
        models = asyncio.run(catalog.models())
    assert [m.id for m in models] == ["offline", "bedrock/amazon.nova-lite-v1:0"]
    assert "model endpoint list unavailable" in caplog.text


def test_the_endpoints_models_are_kept_for_a_while(model):
    catalog = ModelCatalog(InferenceSettings(openai_base_url=model.url))
    first = asyncio.run(catalog.models())
    model.models = [{"id": "other", "object": "model", "created": 1, "owned_by": "x"}]
    try:
        again = asyncio.run(catalog.models())
        fresh = asyncio.run(ModelCatalog(InferenceSettings(openai_base_url=model.url)).models())
    finally:
        model.models = [
            {"id": "llama3.2:3b", "object": "model", "created": 1700000000, "owned_by": "ollama"}
        ]
    assert [m.id for m in first] == [m.id for m in again] == ["offline", "llama3.2:3b"]
    assert [m.id for m in fresh] == ["offline", "other"]


def test_the_models_route_answers_when_the_endpoint_does_not(dynamodb):
    settings = Settings(table_name=TABLE, openai_base_url=f"http://127.0.0.1:{free_port()}/v1")
    from agents_core.web.discovery import router as discovery_router

    app = create_app(discovery_router, services=build_services(settings, dynamodb))
    with TestClient(app) as http:
        answer = http.get("/v1/openai/v1/models")
    assert answer.status_code == 200
    assert [m["id"] for m in answer.json()["data"]] == [
        "offline",
        "offline-lexical",
    ]  # no endpoint's


def test_the_responses_function_serves_conversations_with_the_rights_it_is_given(dynamodb):
    """Every conversation route through the deployed function's app (as API Gateway calls it),
    and every DynamoDB action they make is one template.yaml grants the function."""
    import json

    from mangum import Mangum

    from .lambda_support import LambdaContext, load_event, load_function, record_dynamodb_actions
    from .test_template import table_actions

    function = load_function("responses")
    calls = record_dynamodb_actions(function)

    def call(method: str, path: str, body: dict | None = None, query: dict | None = None):
        event = load_event("responses/get_response.json")
        event.update(
            httpMethod=method,
            path=path,
            resource=path,
            pathParameters=None,
            queryStringParameters=query,
            multiValueQueryStringParameters={k: [v] for k, v in (query or {}).items()} or None,
            body=json.dumps(body) if body is not None else None,
        )
        if body is not None:
            event["headers"]["Content-Type"] = "application/json"
            event["multiValueHeaders"]["Content-Type"] = ["application/json"]
        answer = Mangum(function.app, lifespan="off")(event, LambdaContext())
        return answer["statusCode"], json.loads(answer["body"])

    status, conversation = call("POST", "/v1/conversations", {"metadata": {"a": "b"}})
    assert status == 200
    base = f"/v1/openai/v1/conversations/{conversation['id']}"
    assert call("POST", base, {"metadata": {"a": "c"}})[1]["metadata"] == {"a": "c"}
    status, added = call("POST", f"{base}/items", {"items": [{"role": "user", "content": "hi"}]})
    item_id = added["data"][0]["id"]
    reply = call(
        "POST",
        "/v1/responses",
        {"model": "offline", "input": "again", "conversation": conversation["id"]},
    )
    assert reply[1]["status"] == "completed"
    status, listed = call("GET", f"{base}/items", query={"order": "asc", "limit": "10"})
    assert [i["type"] for i in listed["data"]] == ["message"] * 3
    assert call("GET", f"{base}/items/{item_id}")[1]["id"] == item_id
    assert call("DELETE", f"{base}/items/{item_id}")[0] == 200
    assert [c["id"] for c in call("GET", "/v1/conversations")[1]["data"]] == [conversation["id"]]
    assert call("DELETE", base)[1]["deleted"] is True
    assert call("GET", base)[0] == 404
    missing = calls - table_actions("ResponsesFunction")
    assert not missing, f"ResponsesFunction calls {sorted(missing)} without the permission"
    assert {"dynamodb:UpdateItem", "dynamodb:PutItem", "dynamodb:DeleteItem"} <= calls


@pytest.fixture(params=["memory", "dynamodb"])
def port(request, svc):
    """(the engine's response storage, new_conversation(items) -> id), on both implementations."""
    from agents_core.api.responses import OpenAIResponseMessage

    first = [OpenAIResponseMessage(id="msg_a", role="user", content="hello", status="completed")]
    if request.param == "memory":
        memory = MemoryResponseStorage()
        return memory, lambda: memory.add_conversation("t", first)
    storage = svc.responses_engine.storage

    def new_conversation() -> str:
        body = CreateConversationRequest.model_validate(
            {"items": [item.model_dump() for item in first]}
        )
        return svc.conversations.create("t", body).id

    return storage, new_conversation


def test_the_port_appends_only_at_the_version_read_on_both_storages(port):
    from agents_core.api.responses import OpenAIResponseMessage, OpenAIResponseObjectWithInput
    from agents_core.domain import ConversationAppend
    from agents_core.errors import Conflict, NotFound

    storage, new_conversation = port
    conversation = new_conversation()

    def response(text: str) -> OpenAIResponseObjectWithInput:
        message = OpenAIResponseMessage(id=f"msg_{text}", role="user", content=text)
        return OpenAIResponseObjectWithInput(
            id=f"resp_{text}",
            created_at=0,
            model="m",
            output=[],
            status="completed",
            input=[message],
        )

    async def scenario():
        items, version = await storage.conversation_context("t", conversation)
        assert [i.id for i in items] == ["msg_a"]
        one = response("one")
        await storage.save("t", one, [], ConversationAppend(conversation, version, one.input))
        two = response("two")
        with pytest.raises(Conflict):  # read at the old version
            await storage.save("t", two, [], ConversationAppend(conversation, version, two.input))
        with pytest.raises(NotFound):
            await storage.context("t", two.id)  # nothing of it was stored
        with pytest.raises(NotFound):
            await storage.conversation_context("other-tenant", conversation)
        items, newer = await storage.conversation_context("t", conversation)
        assert [i.id for i in items] == ["msg_a", "msg_one"] and newer > version
        await storage.save("t", two, [], ConversationAppend(conversation, newer, two.input))
        items, _ = await storage.conversation_context("t", conversation)
        assert [i.id for i in items] == ["msg_a", "msg_one", "msg_two"]

    asyncio.run(scenario())
