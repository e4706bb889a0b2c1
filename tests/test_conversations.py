"""The Conversations API with the official openai SDK against `make run`'s server and a scripted
model: conversations and their items, responses that continue a conversation, the paths the SDK
calls under `/v1` and `/v1/openai/v1`, models and health."""

from __future__ import annotations

import httpx
import openai
import pytest

from .conftest import error_message
from .local_server import running_server


@pytest.fixture(scope="module")
def base(model):
    env = {
        "OPENAI_BASE_URL": model.url,
        "INFERENCE_TIMEOUT_SECONDS": "3",
        "BEDROCK_MODEL_IDS": "anthropic.claude-3-haiku-20240307-v1:0,meta.llama*",
    }
    with running_server(env) as (url, _):
        yield url


@pytest.fixture
def client(base, model):
    model.reset()
    return openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)


@pytest.fixture
def compat(base, model):
    """The same server through Llama Stack's OpenAI-compatible prefix."""
    model.reset()
    return openai.OpenAI(base_url=f"{base}/v1/openai/v1", api_key="unused", max_retries=0)


def detail(raised: pytest.ExceptionInfo) -> str:
    return error_message(raised.value.response)


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": text}


def test_create_retrieve_update_and_delete_a_conversation(client):
    conversation = client.conversations.create(
        items=[user("Hello"), {"role": "assistant", "content": "Hi there"}],
        metadata={"topic": "greetings"},
    )
    assert conversation.id.startswith("conv_") and conversation.object == "conversation"
    assert conversation.metadata == {"topic": "greetings"}
    again = client.conversations.retrieve(conversation.id)
    assert (again.id, again.created_at, again.metadata) == (
        conversation.id,
        conversation.created_at,
        {"topic": "greetings"},
    )
    updated = client.conversations.update(conversation.id, metadata={"topic": "farewells"})
    assert updated.metadata == {"topic": "farewells"}
    assert client.conversations.retrieve(conversation.id).metadata == {"topic": "farewells"}
    items = client.conversations.items.list(conversation.id, order="asc")
    assert [(i.role, i.content[0].text) for i in items.data] == [
        ("user", "Hello"),
        ("assistant", "Hi there"),
    ]
    assert [i.content[0].type for i in items.data] == ["input_text", "output_text"]
    assert all(i.id.startswith("msg_") and i.status == "completed" for i in items.data)
    deleted = client.conversations.delete(conversation.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (
        conversation.id,
        True,
        "conversation.deleted",
    )
    with pytest.raises(openai.NotFoundError):
        client.conversations.retrieve(conversation.id)
    with pytest.raises(openai.NotFoundError):
        client.conversations.items.list(conversation.id)


def test_items_are_added_listed_paged_in_both_orders_retrieved_and_deleted(client):
    conversation = client.conversations.create()
    added = client.conversations.items.create(
        conversation.id, items=[user(f"m{n}") for n in range(5)]
    )
    assert [i.content[0].text for i in added.data] == [f"m{n}" for n in range(5)]
    assert added.first_id == added.data[0].id and added.last_id == added.data[-1].id
    more = client.conversations.items.create(
        conversation.id,
        items=[
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "42"},
        ],
    )
    assert [i.type for i in more.data] == ["function_call", "function_call_output"]
    every = [i.id for i in added.data + more.data]

    first = client.conversations.items.list(conversation.id, limit=3, order="asc")
    assert [i.id for i in first.data] == every[:3] and first.has_more
    ascending = [
        i.id for i in client.conversations.items.list(conversation.id, limit=3, order="asc")
    ]
    assert ascending == every  # the SDK's auto-paging follows `after`
    descending = client.conversations.items.list(conversation.id, limit=4)  # desc by default
    assert [i.id for i in descending.data] == every[::-1][:4] and descending.has_more
    rest = client.conversations.items.list(conversation.id, after=descending.last_id, limit=10)
    assert [i.id for i in rest.data] == every[::-1][4:] and not rest.has_more

    item = client.conversations.items.retrieve(every[6], conversation_id=conversation.id)
    assert item.type == "function_call_output" and item.output == "42"
    answer = client.conversations.items.delete(every[2], conversation_id=conversation.id)
    assert answer.id == conversation.id and answer.object == "conversation"
    left = [i.id for i in client.conversations.items.list(conversation.id, order="asc")]
    assert left == every[:2] + every[3:]
    with pytest.raises(openai.NotFoundError):
        client.conversations.items.retrieve(every[2], conversation_id=conversation.id)
    with pytest.raises(openai.NotFoundError):
        client.conversations.items.delete(every[2], conversation_id=conversation.id)


def test_a_response_in_a_conversation_sees_its_items_and_adds_its_input_and_output(client, model):
    conversation = client.conversations.create(
        items=[user("My name is Ada."), {"role": "assistant", "content": "Hello Ada."}]
    )
    model.reply(text="Your name is Ada.")
    response = client.responses.create(
        model="m", input="What is my name?", conversation=conversation.id
    )
    assert response.status == "completed" and response.output_text == "Your name is Ada."
    assert model.requests[-1]["messages"] == [
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": "Hello Ada."},
        {"role": "user", "content": "What is my name?"},
    ]
    items = client.conversations.items.list(conversation.id, order="asc").data
    assert [i.role for i in items] == ["user", "assistant", "user", "assistant"]
    assert items[2].content[0].text == "What is my name?"
    assert items[3].id == response.output[0].id  # the output item itself, id and all
    assert response.conversation.id == conversation.id
    assert items[3].content[0].text == "Your name is Ada."

    model.reply(text="Still Ada.")
    second = client.responses.create(
        model="m", input="And now?", conversation={"id": conversation.id}
    )
    assert second.output_text == "Still Ada."
    sent = model.requests[-1]["messages"]
    assert [m["content"] for m in sent[-3:]] == [
        "What is my name?",
        "Your name is Ada.",
        "And now?",
    ]
    assert len(client.conversations.items.list(conversation.id, limit=100).data) == 6


def test_a_streamed_response_with_a_function_call_is_appended_and_continued(client, model):
    conversation = client.conversations.create()
    tool = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
    model.reply(tool_calls=[("get_weather", '{"city": "Paris"}')])
    with client.responses.stream(
        model="m", input="Weather?", tools=[tool], conversation=conversation.id
    ) as stream:
        first = stream.get_final_response()
    call = first.output[0]
    items = client.conversations.items.list(conversation.id, order="asc").data
    assert [i.type for i in items] == ["message", "function_call"]
    assert items[1].call_id == call.call_id
    model.reply(text="Sunny.")
    second = client.responses.create(
        model="m",
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
        tools=[tool],
        conversation=conversation.id,
    )
    assert second.output_text == "Sunny."
    sent = model.requests[-1]["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == call.call_id
    assert sent[-1] == {"role": "tool", "content": "sunny", "tool_call_id": call.call_id}
    types = [i.type for i in client.conversations.items.list(conversation.id, order="asc")]
    assert types == ["message", "function_call", "function_call_output", "message"]


def test_conversation_with_previous_response_id_or_store_false_is_refused(client, model):
    conversation = client.conversations.create()
    model.reply(text="A")
    first = client.responses.create(model="m", input="Q")
    with pytest.raises(openai.BadRequestError) as both:
        client.responses.create(
            model="m", input="Q2", conversation=conversation.id, previous_response_id=first.id
        )
    assert "previous_response_id" in detail(both)
    with pytest.raises(openai.BadRequestError) as unstored:
        client.responses.create(model="m", input="Q2", conversation=conversation.id, store=False)
    assert "store" in detail(unstored)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="m", input="Q2", conversation="conv_missing")
    assert client.conversations.items.list(conversation.id).data == []
    assert len(model.requests) == 1  # none of the refused ones reached the model


@pytest.mark.parametrize(
    "metadata",
    [
        {f"k{n}": "v" for n in range(17)},
        {"k" * 65: "v"},
        {"k": "v" * 513},
    ],
)
def test_metadata_beyond_openais_limits_is_a_400_and_changes_nothing(client, metadata):
    with pytest.raises(openai.BadRequestError) as created:
        client.conversations.create(metadata=metadata)
    assert "metadata" in detail(created)
    conversation = client.conversations.create(metadata={"a": "b"})
    with pytest.raises(openai.BadRequestError) as updated:
        client.conversations.update(conversation.id, metadata=metadata)
    assert "metadata" in detail(updated)
    assert client.conversations.retrieve(conversation.id).metadata == {"a": "b"}


def test_metadata_at_the_limits_is_kept(client):
    metadata = {f"{n:02d}" + "k" * 62: "v" * 512 for n in range(16)}
    conversation = client.conversations.create(metadata=metadata)
    assert client.conversations.retrieve(conversation.id).metadata == metadata


def test_more_than_twenty_items_at_once_is_a_400(client):
    conversation = client.conversations.create()
    with pytest.raises(openai.BadRequestError):
        client.conversations.items.create(conversation.id, items=[user("x")] * 21)
    with pytest.raises(openai.BadRequestError):
        client.conversations.create(items=[user("x")] * 21)
    assert client.conversations.items.list(conversation.id).data == []


@pytest.mark.parametrize("item_id", ["", "i" * 129, "fc.1"])
def test_an_item_id_that_cannot_be_a_key_is_a_400_and_changes_nothing(client, item_id):
    """Conversations index items by id (a DynamoDB key: never empty, at most 1,024 bytes, which
    moto does not enforce) and serve them back under it: ids are what the item path takes."""
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "id": item_id}
    with pytest.raises(openai.BadRequestError) as created:
        client.conversations.create(items=[call])
    assert "id" in detail(created)
    conversation = client.conversations.create()
    with pytest.raises(openai.BadRequestError):
        client.conversations.items.create(conversation.id, items=[call])
    assert client.conversations.items.list(conversation.id).data == []
    good = client.conversations.items.create(conversation.id, items=[{**call, "id": "fc_1"}])
    assert [item.id for item in good.data] == ["fc_1"]
    assert client.conversations.items.retrieve("fc_1", conversation_id=conversation.id).id == "fc_1"


def test_a_large_item_round_trips(client):
    text = "é" * 300_000  # 600 KB of JSON: written in parts
    conversation = client.conversations.create(items=[user("before")])
    added = client.conversations.items.create(conversation.id, items=[user(text), user("after")])
    listed = client.conversations.items.list(conversation.id, order="asc").data
    assert [i.content[0].text for i in listed] == ["before", text, "after"]
    again = client.conversations.items.retrieve(added.data[0].id, conversation_id=conversation.id)
    assert again.content[0].text == text
    client.conversations.items.delete(added.data[0].id, conversation_id=conversation.id)
    listed = client.conversations.items.list(conversation.id, order="asc").data
    assert [i.content[0].text for i in listed] == ["before", "after"]


def test_conversations_are_listed_newest_first(base, client):
    made = [client.conversations.create(metadata={"n": str(n)}).id for n in range(3)]
    page = httpx.get(f"{base}/v1/conversations", params={"limit": 2}).json()
    assert page["object"] == "list" and page["has_more"] is True
    ids = [c["id"] for c in page["data"]]
    assert ids == made[::-1][:2]
    rest = httpx.get(f"{base}/v1/conversations", params={"after": ids[-1], "limit": 100}).json()
    assert rest["data"][0]["id"] == made[0]
    client.conversations.delete(made[2])
    listed = httpx.get(f"{base}/v1/openai/v1/conversations", params={"limit": 100}).json()
    assert made[2] not in [c["id"] for c in listed["data"]]


def test_the_sdk_works_under_both_prefixes(base, client, compat, model):
    model.reply(text="one")
    response = client.responses.create(model="m", input="hi")
    assert compat.responses.retrieve(response.id).output_text == "one"
    model.reply(text="two")
    other = compat.responses.create(model="m", input="hi")
    assert client.responses.retrieve(other.id).output_text == "two"
    listed = httpx.get(f"{base}/v1/responses", params={"limit": 2}).json()["data"]
    assert [r["id"] for r in listed] == [other.id, response.id]
    conversation = compat.conversations.create(items=[user("x")])
    assert client.conversations.retrieve(conversation.id).id == conversation.id
    assert len(compat.conversations.items.list(conversation.id).data) == 1
    client.responses.delete(response.id)
    with pytest.raises(openai.NotFoundError):
        compat.responses.retrieve(response.id)


def test_models_lists_offline_the_endpoints_models_bedrock_ids_and_the_embedder(
    base, compat, client
):
    listed = {m.id: m for m in compat.models.list()}
    assert set(listed) == {
        "offline",
        "llama3.2:3b",
        "bedrock/anthropic.claude-3-haiku-20240307-v1:0",
        "offline-lexical",  # what /v1/embeddings serves
    }
    assert (listed["llama3.2:3b"].owned_by, listed["llama3.2:3b"].created) == ("ollama", 1700000000)
    assert not [m for m in listed if "*" in m]  # a prefix names no model
    assert all(m.object == "model" for m in listed.values())
    stack = httpx.get(f"{base}/v1/models").json()
    entry = next(m for m in stack["data"] if m["identifier"] == "offline")
    assert entry["provider_id"] == "offline" and entry["model_type"] == "llm"
    assert entry["provider_resource_id"] == "offline" and entry["metadata"] == {}
    bedrock = next(m for m in stack["data"] if m["provider_id"] == "bedrock")
    assert bedrock["provider_resource_id"] == "anthropic.claude-3-haiku-20240307-v1:0"
    embedder = next(m for m in stack["data"] if m["model_type"] == "embedding")
    assert embedder["identifier"] == "offline-lexical"
    assert embedder["metadata"] == {"embedding_dimension": 256}
    embedded = client.embeddings.create(model=embedder["identifier"], input=["a text"])
    assert len(embedded.data[0].embedding) == embedder["metadata"]["embedding_dimension"]
    assert [m.id for m in client.models.list()] == [m["identifier"] for m in stack["data"]]


def test_health(base):
    answer = httpx.get(f"{base}/v1/health")
    assert answer.status_code == 200 and answer.json() == {"status": "OK"}


def test_the_agents_routes_answer_under_v1alpha_as_newer_clients_call_them(base, model):
    """llama-stack-client 0.3+ calls `client.alpha.agents` at /v1alpha/agents/...: the same
    routes, the same data as under /v1."""
    alpha = f"{base}/v1alpha/agents"
    agent = httpx.post(alpha, json={"agent_config": {"model": "m", "instructions": "Be brief."}})
    agent_id = agent.json()["agent_id"]
    assert httpx.get(f"{base}/v1/agents/{agent_id}").json()["agent_id"] == agent_id
    session = httpx.post(f"{alpha}/{agent_id}/session", json={"session_name": "s"}).json()
    model.reply(text="Hello from alpha")
    turn = httpx.post(
        f"{alpha}/{agent_id}/session/{session['session_id']}/turn",
        json={"messages": [{"role": "user", "content": "hi"}], "stream": False},
        timeout=30,
    ).json()
    assert turn["output_message"]["content"] == "Hello from alpha"
    url = f"{alpha}/{agent_id}/session/{session['session_id']}/turn/{turn['turn_id']}"
    assert httpx.get(url).json()["turn_id"] == turn["turn_id"]
    assert httpx.delete(f"{alpha}/{agent_id}").status_code == 204
    assert httpx.get(f"{base}/v1/agents/{agent_id}").status_code == 404
