"""The Responses API with the official openai SDK against `make run`'s server and a scripted model."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from agents_core.api.responses import MAX_MODEL_ID_LENGTH
from agents_core.store import keys

from .conftest import error_message
from .local_server import running_server

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


@pytest.fixture(scope="module")
def base(model):
    with running_server({"OPENAI_BASE_URL": model.url, "INFERENCE_TIMEOUT_SECONDS": "3"}) as (
        url,
        _,
    ):
        yield url


@pytest.fixture
def client(base, model):
    model.reset()
    return openai.OpenAI(base_url=f"{base}/v1/openai/v1", api_key="unused", max_retries=0)


def test_create_and_retrieve(client, model):
    model.reply(text="Hello from the model", chunks=3)
    response = client.responses.create(
        model="llama3.2:3b", input="Say hello", instructions="Be nice.", temperature=0.3
    )
    assert response.status == "completed" and response.output_text == "Hello from the model"
    assert response.usage.input_tokens == 11 and response.usage.output_tokens == 7
    assert response.id.startswith("resp_")
    sent = model.requests[-1]
    assert sent["messages"] == [
        {"role": "system", "content": "Be nice."},
        {"role": "user", "content": "Say hello"},
    ]
    assert sent["temperature"] == 0.3
    again = client.responses.retrieve(response.id)
    assert again.output_text == response.output_text and again.output[0].id == response.output[0].id


def test_raw_stream_events_in_order(client, model):
    model.reply(text="one two three", chunks=3)
    events = list(client.responses.create(model="m", input="count", stream=True))
    types = [e.type for e in events]
    assert types == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == events[-1].response.output_text == "one two three"
    # The response as each event showed it then: nothing of what came later.
    assert [e.response.output for e in events[:2]] == [[], []]
    assert [e.response.status for e in events[:2]] == ["in_progress", "in_progress"]
    assert events[-1].response.status == "completed" and events[-1].response.usage is not None


def test_stream_helper_returns_the_final_response(client, model):
    model.reply(text="streamed answer", chunks=4)
    with client.responses.stream(model="m", input="hi") as stream:
        texts = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(texts) == final.output_text == "streamed answer"
    assert client.responses.retrieve(final.id).status == "completed"


def test_function_tool_round_trip_with_the_stream_helper(client, model):
    model.reply(tool_calls=[("get_weather", '{"city": "Paris"}')])
    with client.responses.stream(model="m", input="Weather in Paris?", tools=[WEATHER]) as stream:
        argument_deltas = [
            e.delta for e in stream if e.type == "response.function_call_arguments.delta"
        ]
        first = stream.get_final_response()
    call = first.output[0]
    assert call.type == "function_call" and call.name == "get_weather"
    assert "".join(argument_deltas) == call.arguments == '{"city": "Paris"}'
    assert model.requests[-1]["tools"][0]["function"]["name"] == "get_weather"
    model.reply(text="It is sunny in Paris.")
    second = client.responses.create(
        model="m",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
        tools=[WEATHER],
    )
    assert second.output_text == "It is sunny in Paris." and second.previous_response_id == first.id
    sent = model.requests[-1]["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == call.call_id
    assert sent[-1] == {"role": "tool", "content": "sunny", "tool_call_id": call.call_id}


def test_chaining_three_deep_carries_the_whole_conversation(client, model):
    model.reply(text="A1")
    r1 = client.responses.create(model="m", input="Q1", instructions="only for the first")
    model.reply(text="A2")
    r2 = client.responses.create(model="m", input="Q2", previous_response_id=r1.id)
    model.reply(text="A3")
    r3 = client.responses.create(
        model="m", input=[{"role": "user", "content": "Q3"}], previous_response_id=r2.id
    )
    assert r3.output_text == "A3"
    assert [(m["role"], m["content"]) for m in model.requests[-1]["messages"]] == [
        ("user", "Q1"),
        ("assistant", "A1"),
        ("user", "Q2"),
        ("assistant", "A2"),
        ("user", "Q3"),
    ]


def test_store_false_keeps_nothing(client, base, model):
    response = client.responses.create(model="m", input="secret", store=False)
    assert response.output_text == "echo: secret"
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="m", input="more", previous_response_id=response.id)
    assert response.id not in [r["id"] for r in _list(base, limit=100)["data"]]


def _list(base: str, **params) -> dict:
    resp = httpx.get(f"{base}/v1/openai/v1/responses", params=params)
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_list_pages_in_both_orders_with_a_model_filter(client, base):
    model_a, model_b = "list-model-a", "list-model-b"
    made = [client.responses.create(model=model_a, input=f"a{n}").id for n in range(5)]
    client.responses.create(model=model_b, input="b")
    for order, expected in (("desc", made[::-1]), ("asc", made)):
        seen, after = [], None
        while True:
            page = _list(
                base, model=model_a, limit=2, order=order, **({"after": after} if after else {})
            )
            assert len(page["data"]) <= 2 and page["object"] == "list"
            if page["data"]:
                assert (
                    page["first_id"] == page["data"][0]["id"]
                    and page["last_id"] == page["data"][-1]["id"]
                )
            seen += [r["id"] for r in page["data"]]
            assert all(r["model"] == model_a for r in page["data"])
            if not page["has_more"]:
                break
            after = page["last_id"]
        assert seen == expected
    newest = _list(base, limit=1)["data"][0]
    assert newest["model"] == model_b and newest["input"][0]["content"][0]["text"] == "b"


def test_input_items_page_with_before_and_after(client, base):
    items = [{"role": "user", "content": f"m{n}"} for n in range(5)]
    response = client.responses.create(model="m", input=items)
    url = f"{base}/v1/openai/v1/responses/{response.id}/input_items"
    everything = httpx.get(url, params={"order": "asc"}).json()["data"]
    assert [i["content"] for i in everything] == [f"m{n}" for n in range(5)]
    ids = [i["id"] for i in everything]
    page = httpx.get(url, params={"order": "asc", "after": ids[0], "limit": 2}).json()
    assert [i["id"] for i in page["data"]] == ids[1:3] and page["has_more"] is True
    page = httpx.get(url, params={"order": "asc", "after": ids[0], "before": ids[4]}).json()
    assert [i["id"] for i in page["data"]] == ids[1:4] and page["has_more"] is False
    desc = httpx.get(url, params={"before": ids[1]}).json()  # desc by default
    assert [i["id"] for i in desc["data"]] == ids[4:1:-1]
    sdk = client.responses.input_items.list(response.id, order="asc", limit=3)
    assert [i.id for i in sdk.data] == ids[:3]


def test_delete_then_404(client, base):
    response = client.responses.create(model="m", input="to delete")
    resp = httpx.delete(f"{base}/v1/openai/v1/responses/{response.id}")
    assert resp.json() == {"id": response.id, "object": "response", "deleted": True}
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)
    assert httpx.get(f"{base}/v1/openai/v1/responses/{response.id}/input_items").status_code == 404
    assert httpx.delete(f"{base}/v1/openai/v1/responses/{response.id}").status_code == 404
    assert httpx.get(f"{base}/v1/openai/v1/responses/resp_unknown").status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        {"model": "m", "input": [{"type": "telepathy", "content": "x"}]},
        {"model": "m", "input": "x", "text": {"format": {"type": "yaml"}}},
        {"model": "m", "input": "x", "text": {"format": {"type": "json_schema", "name": "n"}}},
        {
            "model": "m",
            "input": "x",
            "tools": [{"type": "mcp", "server_label": "s", "server_url": "http://x"}],
        },
        {"model": "m"},
        {"input": "x"},
        {"model": "m", "input": "x", "temperature": 5},
    ],
)
def test_bad_requests_are_400(base, body):
    resp = httpx.post(f"{base}/v1/openai/v1/responses", json=body)
    assert resp.status_code == 400, resp.text
    assert isinstance(error_message(resp), str)


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 101}, {"order": "sideways"}])
def test_bad_list_parameters_are_400(client, base, params):
    response = client.responses.create(model="m", input="x")
    assert httpx.get(f"{base}/v1/openai/v1/responses", params=params).status_code == 400
    url = f"{base}/v1/openai/v1/responses/{response.id}/input_items"
    assert httpx.get(url, params=params).status_code == 400


def test_values_that_end_up_in_keys_are_bounded_before_any_work(base, model):
    """A model id and a response id become parts of DynamoDB keys (2,048 bytes at most): too
    long is a 400 before the model runs, and nothing is stored."""
    model.reset()
    url = f"{base}/v1/openai/v1/responses"
    long_model = {"model": "m" * (MAX_MODEL_ID_LENGTH + 1), "input": "x"}
    assert httpx.post(url, json=long_model).status_code == 400
    forged = {"model": "m", "input": "x", "previous_response_id": "resp#x" * 500}
    assert httpx.post(url, json=forged).status_code == 400
    assert model.requests == []
    assert httpx.get(url, params={"model": long_model["model"]}).status_code == 400
    assert httpx.get(url, params={"after": "r" * 3000}).status_code == 400
    assert not any(r["model"].startswith("mmmm") for r in httpx.get(url).json()["data"])


def test_the_longest_model_id_allowed_fits_a_key_for_a_long_tenant():
    """moto does not enforce DynamoDB's key size; the bound is checked here: the by-model index
    key of a 512-character tenant and a model id of the longest, in 4-byte characters."""
    key = keys.responses_by_model_gsi2pk("t" * 512, "\U0001f600" * MAX_MODEL_ID_LENGTH)
    assert len(key.encode()) <= 2048


def test_text_format_reaches_the_model(client, model):
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    model.reply(text='{"answer": "yes"}')
    response = client.responses.create(
        model="m",
        input="json please",
        text={"format": {"type": "json_schema", "name": "reply", "schema": schema}},
    )
    assert json.loads(response.output_text) == {"answer": "yes"}
    assert model.requests[-1]["response_format"]["json_schema"]["schema"] == schema
    # The response object says `schema`, as the SDK reads it, created and retrieved alike.
    for seen in (response, client.responses.retrieve(response.id)):
        assert seen.text.format.schema_ == schema  # the SDK's name for the `schema` field
    client.responses.create(model="m", input="any json", text={"format": {"type": "json_object"}})
    assert model.requests[-1]["response_format"] == {"type": "json_object"}


def test_a_failing_model_fails_the_response(client, base, model):
    model.reply(error="status", status=500)
    events = list(client.responses.create(model="m", input="x", stream=True))
    assert events[-1].type == "response.failed"
    failed = events[-1].response
    assert failed.status == "failed" and failed.error.code == "model_error"
    assert client.responses.retrieve(failed.id).status == "failed"
    model.reply(error="hang")
    resp = httpx.post(
        f"{base}/v1/openai/v1/responses", json={"model": "m", "input": "y"}, timeout=30
    )
    assert resp.status_code == 504 and resp.json()["response_id"].startswith("resp_")


def test_running_out_of_tokens_is_incomplete(client, model):
    model.reply(text="cut sho", finish_reason="length")
    response = client.responses.create(model="m", input="long story")
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"


def test_images_reach_the_model(client, model):
    pixel = "data:image/png;base64,iVBORw0KGgo="
    client.responses.create(
        model="m",
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What is in these?"},
                    {"type": "input_image", "image_url": "https://example.com/cat.png"},
                    {"type": "input_image", "image_url": pixel},
                ],
            }
        ],
    )
    content = model.requests[-1]["messages"][-1]["content"]
    assert content == [
        {"type": "text", "text": "What is in these?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        {"type": "image_url", "image_url": {"url": pixel}},
    ]


def test_openai_routes_answer_errors_in_openais_envelope_for_its_sdk(base):
    """`{"error": {"message", "type", "param", "code"}}` under both prefixes; a field no spec
    knows is `unknown_parameter` naming it, as the openai SDK reads it."""
    for prefix in ("/v1", "/v1/openai/v1"):
        client = openai.OpenAI(base_url=f"{base}{prefix}", api_key="unused", max_retries=0)
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(model="offline", input="hi", extra_body={"bogus": 1})
        assert refused.value.code == "unknown_parameter" and refused.value.param == "bogus"
        assert refused.value.type == "invalid_request_error"
        with pytest.raises(openai.NotFoundError) as missing:
            client.responses.retrieve("resp_missing")
        assert missing.value.type == "invalid_request_error" and missing.value.message
    agents = httpx.get(f"{base}/v1/agents/missing")  # Llama Stack's route: its shape
    assert agents.status_code == 404 and set(agents.json()) == {"detail"}


def test_a_response_shown_in_an_event_keeps_its_output_as_it_was_then():
    """`OutputWriter.public()` takes the response's fields without validating them again; the
    output list goes on growing in the running response, not in what an event showed."""
    import time

    from agents_core.api.responses import OpenAIResponseObject, OpenAIResponseObjectWithInput
    from agents_core.engine.responses.output import OutputWriter

    running = OpenAIResponseObjectWithInput(
        id="resp_1",
        created_at=int(time.time()),
        model="m",
        status="in_progress",
        output=[],
        input=[{"role": "user", "content": "hi", "type": "message"}],
        parallel_tool_calls=True,
    )
    writer = OutputWriter(running, [], {}, [], None)
    shown = writer.public()
    running.output.append(running.input[0])
    running.status = "completed"
    assert type(shown) is OpenAIResponseObject
    assert shown.output == [] and shown.status == "in_progress"
    expected = running.model_dump(exclude={"input"}) | {"output": [], "status": "in_progress"}
    assert shown.model_dump() == expected
