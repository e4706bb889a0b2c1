"""The request fields of `responses.create`: every field the installed openai SDK can send is
accepted (and honoured, or ignored as docs/architecture.md says); namespace tools; a field no
spec knows is a 400 naming it."""

from __future__ import annotations

import json
import typing

import openai
import pytest
from agents_core.api.responses import (
    CreateOpenaiResponseRequest,
    OpenAIResponseInputToolFunction,
    OpenAIResponseInputToolNamespace,
    OpenAIResponseInputToolWebSearch,
)
from openai.types.responses import (
    function_tool_param,
    namespace_tool_param,
    response_create_params,
    web_search_tool_param,
)

from .local_server import running_server

LOOKUP = {
    "type": "function",
    "name": "lookup",
    "description": "Find a customer",
    "parameters": {"type": "object", "properties": {"email": {"type": "string"}}},
}
CRM = {"type": "namespace", "name": "crm", "description": "The CRM's tools.", "tools": [LOOKUP]}


def fields(typed_dict: type) -> set[str]:
    return set(typing.get_type_hints(typed_dict))


def names(model: type) -> set[str]:
    return {info.alias or name for name, info in model.model_fields.items()}


@pytest.mark.parametrize(
    "sdk, ours",
    [
        (response_create_params.ResponseCreateParamsStreaming, CreateOpenaiResponseRequest),
        (function_tool_param.FunctionToolParam, OpenAIResponseInputToolFunction),
        (namespace_tool_param.NamespaceToolParam, OpenAIResponseInputToolNamespace),
        (namespace_tool_param.ToolFunction, OpenAIResponseInputToolFunction),
        (web_search_tool_param.WebSearchToolParam, OpenAIResponseInputToolWebSearch),
    ],
)
def test_every_field_the_installed_openai_sdk_sends_is_a_field_here(sdk, ours):
    """A new field in the SDK fails this test until it is accepted here (and documented)."""
    assert fields(sdk) - names(ours) == set()


@pytest.fixture(scope="module")
def base(model):
    with running_server({"OPENAI_BASE_URL": model.url}) as (url, _):
        yield url


@pytest.fixture
def client(base, model):
    model.reset()
    return openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)


def test_a_namespace_functions_call_comes_back_with_its_namespace_and_goes_on(client, model):
    model.reply(tool_calls=[("crm__lookup", json.dumps({"email": "a@example.com"}))])
    first = client.responses.create(
        model="m", input="who is a@example.com?", tools=[CRM], store=False
    )
    offered = model.requests[-1]["tools"][0]["function"]
    assert offered["name"] == "crm__lookup" and offered["description"].startswith(
        "The CRM's tools."
    )
    call = first.output[0]
    assert call.type == "function_call" and (call.name, call.namespace) == ("lookup", "crm")
    model.reply(text="That is Ada.")
    replay = [
        {"role": "user", "content": "who is a@example.com?"},
        call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "Ada Lovelace"},
    ]
    second = client.responses.create(model="m", input=replay, tools=[CRM], store=False)
    assert second.output_text == "That is Ada."
    sent = model.requests[-1]["messages"]
    assert sent[1]["tool_calls"][0]["function"]["name"] == "crm__lookup"
    assert sent[2] == {"role": "tool", "tool_call_id": call.call_id, "content": "Ada Lovelace"}


def test_codex_cli_s_fields_are_accepted(client, model):
    """`client_metadata` is accepted and not stored; a web search without live access is not
    offered (there is no cache to search); the ignored fields change nothing."""
    model.reply(text="ok")
    response = client.responses.create(
        model="m",
        input="hi",
        tools=[{"type": "web_search", "external_web_access": False}, LOOKUP],
        reasoning={"summary": "auto"},
        include=["reasoning.encrypted_content"],
        prompt_cache_retention="24h",
        extra_body={"client_metadata": {"turn_id": "t1"}, "context_management": []},
    )
    assert response.status == "completed" and response.output_text == "ok"
    assert [t["function"]["name"] for t in model.requests[-1]["tools"]] == ["lookup"]
    stored = client.responses.retrieve(response.id).model_dump()
    assert "t1" not in json.dumps(stored)


@pytest.mark.parametrize(
    "extra, named",
    [
        ({"prompt": {"id": "pmpt_1"}}, "prompt"),
        ({"moderation": {"model": "omni-moderation-latest"}}, "guardrails"),
    ],
)
def test_fields_this_deployment_cannot_honour_are_a_400_saying_so(client, model, extra, named):
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="m", input="hi", extra_body=extra)
    assert named in refused.value.message
    assert model.requests == []  # nothing ran


def test_input_tokens_counts_a_would_be_request_with_its_context_and_tools(client, model):
    """The openai SDK's `responses.input_tokens.count`: the context window's estimate (4
    characters a token) of instructions, context, input and tools; nothing runs."""
    model.reply(text="x" * 400)
    first = client.responses.create(model="m", input="a" * 400)
    model.reset()
    alone = client.responses.input_tokens.count(model="m", input="b" * 400)
    assert alone.object == "response.input_tokens" and alone.input_tokens == 101
    chained = client.responses.input_tokens.count(
        model="m", input="b" * 400, previous_response_id=first.id, instructions="c" * 40
    )
    assert chained.input_tokens == (400 + 400 + 400 + 40) // 4 + 1
    with_tools = client.responses.input_tokens.count(model="m", input="b" * 400, tools=[CRM])
    assert with_tools.input_tokens > alone.input_tokens
    assert model.requests == []
    with pytest.raises(openai.NotFoundError):
        client.responses.input_tokens.count(model="m", input="hi", previous_response_id="resp_nope")


def test_reasoning_items_replayed_in_the_input_are_kept_and_not_sent_to_the_model(client, model):
    """As Codex replays them with `store: false`: with `include:
    ["reasoning.encrypted_content"]` each carries a blob this deployment signed for the caller,
    which reads back; a blob it did not make is a 400."""
    model.reply(reasoning="Think first.", text="Answer.")
    first = client.responses.create(
        model="m", input="why?", store=False, include=["reasoning.encrypted_content"]
    )
    reasoning = first.output[0]
    assert reasoning.type == "reasoning" and reasoning.content[0].text == "Think first."
    assert reasoning.encrypted_content and "Think first." not in reasoning.encrypted_content
    model.reply(text="Again.")
    replay = [
        {"role": "user", "content": "why?"},
        reasoning.model_dump(exclude_none=True),
        first.output[1].model_dump(exclude_none=True),
        {"role": "user", "content": "and then?"},
    ]
    second = client.responses.create(model="m", input=replay, store=False)
    assert second.output_text == "Again."
    assert [m["role"] for m in model.requests[-1]["messages"]] == ["user", "assistant", "user"]
    blob = reasoning.encrypted_content
    forged = blob[:-3] + ("AAA" if not blob.endswith("AAA") else "BBB")
    for bad in (forged, "gAAAA-not-ours"):
        item = {**reasoning.model_dump(exclude_none=True), "encrypted_content": bad}
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(model="m", input=[item, {"role": "user", "content": "hi"}])
        assert "encrypted_content" in refused.value.message


def test_a_conversation_compacts_to_its_user_messages_and_a_summary_that_goes_on(client, model):
    """`responses.compact`: the model summarizes (asked once, bounded); the output's
    compaction item, sent back as input, stands for what it compacted."""
    model.reply(text="Paris, chosen for the food.")
    history = [
        {"role": "user", "content": "Where should we meet?"},
        {"role": "assistant", "content": "Paris has the best food."},
        {"role": "user", "content": "Paris it is."},
    ]
    compacted = client.responses.compact(model="m", input=history)
    assert compacted.object == "response.compaction"
    kinds = [item.type for item in compacted.output]
    assert kinds == ["message", "message", "compaction"]
    assert [m.content[0].text for m in compacted.output[:2]] == [
        "Where should we meet?",
        "Paris it is.",
    ]
    asked = model.requests[-1]
    assert (
        asked["max_tokens"] == 2048 and "compact a conversation" in asked["messages"][0]["content"]
    )
    assert "[assistant] Paris has the best food." in asked["messages"][1]["content"]
    item = compacted.output[2]
    assert "Paris" not in item.encrypted_content  # opaque to the client
    model.reply(text="See you there.")
    going_on = [item.model_dump(exclude_none=True), {"role": "user", "content": "When?"}]
    response = client.responses.create(model="m", input=going_on)
    assert response.output_text == "See you there."
    sent = model.requests[-1]["messages"]
    assert sent[0]["role"] == "user" and sent[0]["content"].endswith("Paris, chosen for the food.")
    assert sent[1] == {"role": "user", "content": "When?"}
    forged = {**item.model_dump(exclude_none=True), "encrypted_content": "sa1.e30.bm90"}
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="m", input=[forged, {"role": "user", "content": "hi"}])
    assert "compaction" in refused.value.message
    with pytest.raises(openai.BadRequestError):
        client.responses.compact(model="m", input=[])


def test_context_management_compacts_the_context_past_its_threshold(client, model):
    """Past `compact_threshold`, the context before the input becomes one summary (asked of
    the model once), the response's first output item is its compaction item, and the
    context stored for the next response is the compacted one."""
    model.reply(text="x" * 400)
    first = client.responses.create(model="m", input="a" * 400)
    model.reply(text="Summary: a long exchange of letters.")
    model.reply(text="Short answer.")
    managed = [{"type": "compaction", "compact_threshold": 150}]
    second = client.responses.create(
        model="m", input="and now?", previous_response_id=first.id, context_management=managed
    )
    assert [item.type for item in second.output] == ["compaction", "message"]
    assert second.output_text == "Short answer."
    summary_call, answer_call = model.requests[-2:]
    assert "compact a conversation" in summary_call["messages"][0]["content"]
    sent = answer_call["messages"]
    assert len(sent) == 2 and sent[0]["content"].endswith("Summary: a long exchange of letters.")
    assert sent[1] == {"role": "user", "content": "and now?"}
    model.reply(text="Third.")
    client.responses.create(model="m", input="go on", previous_response_id=second.id)
    carried = [m["content"] for m in model.requests[-1]["messages"]]
    assert "a" * 400 not in carried and carried[-1] == "go on"  # the compacted context went on
    model.reply(text="Below the threshold.")
    below = client.responses.create(
        model="m",
        input="hi",
        previous_response_id=second.id,
        context_management=[{"type": "compaction", "compact_threshold": 100_000}],
    )
    assert [item.type for item in below.output] == ["message"]


def test_a_compacted_conversation_reads_back_from_its_compaction_on(client, model):
    conversation = client.conversations.create()
    model.reply(text="y" * 400)
    client.responses.create(model="m", input="b" * 400, conversation=conversation.id)
    model.reply(text="Summary: letters b and y.")
    model.reply(text="ok")
    managed = [{"type": "compaction", "compact_threshold": 150}]
    client.responses.create(
        model="m", input="next", conversation=conversation.id, context_management=managed
    )
    model.reply(text="later")
    client.responses.create(model="m", input="later?", conversation=conversation.id)
    contents = [m["content"] for m in model.requests[-1]["messages"]]
    assert "y" * 400 not in contents  # the assistant's long answer is behind the compaction
    assert any(c.endswith("Summary: letters b and y.") for c in contents)
    assert contents[-1] == "later?"
