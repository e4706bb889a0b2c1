"""Every Responses object and stream event the server emits, checked against the Open Responses
specification and against the official openai SDK's types.

The required fields below are written from openresponses/openresponses (ResponseResource.json,
and the item, content and streaming-event schemas under src/generated/kubb/zod/), checked
2026-11 (the Open Responses compliance suite stops at the first missing one). MCP items and
events are not in the specification; their fields come from the openai SDK's types.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, get_args

import httpx
import openai
import pytest
from agents_core.inference import types as model
from openai.types.responses import Response, ResponseStreamEvent

from .conftest import error_message
from .local_server import running_server
from .test_engine import calls, says, types_and_numbers
from .test_engine_server_tools import (
    FakeRuntime,
    Tool,
    mcp_tool,
    responses_with,
    time_runtime,
)

RESPONSE_REQUIRED = [
    "id",
    "object",
    "created_at",
    "completed_at",
    "status",
    "incomplete_details",
    "model",
    "previous_response_id",
    "instructions",
    "output",
    "error",
    "tools",
    "tool_choice",
    "truncation",
    "parallel_tool_calls",
    "text",
    "top_p",
    "presence_penalty",
    "frequency_penalty",
    "top_logprobs",
    "temperature",
    "reasoning",
    "user",
    "usage",
    "max_output_tokens",
    "max_tool_calls",
    "store",
    "background",
    "service_tier",
    "metadata",
    "safety_identifier",
    "prompt_cache_key",
]
#: Required and never null in the specification.
RESPONSE_TYPES = {
    "tools": list,
    "truncation": str,
    "parallel_tool_calls": bool,
    "top_p": (int, float),
    "presence_penalty": (int, float),
    "frequency_penalty": (int, float),
    "top_logprobs": int,
    "temperature": (int, float),
    "store": bool,
    "background": bool,
    "service_tier": str,
    "metadata": dict,
    "output": list,
    "text": dict,
}
ITEM_REQUIRED = {
    "message": ["type", "id", "status", "role", "content"],
    "function_call": ["type", "id", "call_id", "name", "arguments", "status"],
    "web_search_call": ["type", "id", "status"],
    "mcp_call": ["type", "id", "name", "arguments", "server_label"],
    "mcp_list_tools": ["type", "id", "server_label", "tools"],
    "mcp_approval_request": ["type", "id", "name", "arguments", "server_label"],
    "reasoning": ["type", "id", "summary"],
}
CONTENT_REQUIRED = {
    "output_text": ["type", "text", "annotations", "logprobs"],
    "refusal": ["type", "refusal"],
    "reasoning_text": ["type", "text"],
}
_RESPONSE_EVENT = ["type", "sequence_number", "response"]
_ITEM_EVENT = ["type", "sequence_number", "output_index", "item"]
_PART_EVENT = ["type", "sequence_number", "item_id", "output_index", "content_index", "part"]
_TOOL_EVENT = ["type", "sequence_number", "item_id", "output_index"]
EVENT_REQUIRED = {
    "response.created": _RESPONSE_EVENT,
    "response.in_progress": _RESPONSE_EVENT,
    "response.completed": _RESPONSE_EVENT,
    "response.failed": _RESPONSE_EVENT,
    "response.incomplete": _RESPONSE_EVENT,
    "response.output_item.added": _ITEM_EVENT,
    "response.output_item.done": _ITEM_EVENT,
    "response.content_part.added": _PART_EVENT,
    "response.content_part.done": _PART_EVENT,
    "response.output_text.delta": [*_PART_EVENT[:-1], "delta", "logprobs"],
    "response.output_text.done": [*_PART_EVENT[:-1], "text", "logprobs"],
    "response.reasoning_text.delta": [*_PART_EVENT[:-1], "delta"],
    "response.reasoning_text.done": [*_PART_EVENT[:-1], "text"],
    "response.refusal.delta": [*_PART_EVENT[:-1], "delta"],
    "response.refusal.done": [*_PART_EVENT[:-1], "refusal"],
    "response.function_call_arguments.delta": [*_TOOL_EVENT, "delta"],
    "response.function_call_arguments.done": [*_TOOL_EVENT, "arguments"],
    "response.web_search_call.in_progress": _TOOL_EVENT,
    "response.web_search_call.searching": _TOOL_EVENT,
    "response.web_search_call.completed": _TOOL_EVENT,
    "response.mcp_list_tools.in_progress": _TOOL_EVENT,
    "response.mcp_list_tools.completed": _TOOL_EVENT,
    "response.mcp_list_tools.failed": _TOOL_EVENT,
    "response.mcp_call_arguments.delta": [*_TOOL_EVENT, "delta"],
    "response.mcp_call_arguments.done": [*_TOOL_EVENT, "arguments"],
    "response.mcp_call.in_progress": _TOOL_EVENT,
    "response.mcp_call.completed": _TOOL_EVENT,
    "response.mcp_call.failed": _TOOL_EVENT,
}
#: The SDK's event class for each event type (its union is discriminated by `type`).
SDK_EVENTS = {
    get_args(cls.model_fields["type"].annotation)[0]: cls
    for cls in get_args(get_args(ResponseStreamEvent)[0])
}


def missing(data: dict[str, Any], required: list[str]) -> list[str]:
    return [name for name in required if name not in data]


def check_item(item: dict[str, Any]) -> None:
    assert item["type"] in ITEM_REQUIRED, f"an item of unknown type {item['type']}"
    assert not missing(item, ITEM_REQUIRED[item["type"]]), (item["type"], item)
    for part in item.get("content") or []:
        if part["type"] in CONTENT_REQUIRED:
            assert not missing(part, CONTENT_REQUIRED[part["type"]]), part


def check_response(data: dict[str, Any]) -> None:
    """A response object as the specification requires it, and as the SDK reads it."""
    assert not missing(data, RESPONSE_REQUIRED), missing(data, RESPONSE_REQUIRED)
    for name, kind in RESPONSE_TYPES.items():
        assert isinstance(data[name], kind), (name, data[name])
    assert data["truncation"] in ("auto", "disabled")
    assert (data["completed_at"] is not None) == (data["status"] == "completed")
    for item in data["output"]:
        check_item(item)
    Response.model_validate(data)


def check_event(event: dict[str, Any]) -> None:
    kind = event["type"]
    assert kind in EVENT_REQUIRED, f"an event of unknown type {kind}"
    assert not missing(event, EVENT_REQUIRED[kind]), (kind, missing(event, EVENT_REQUIRED[kind]))
    if "response" in event:
        check_response(event["response"])
    if "item" in event:
        check_item(event["item"])
    SDK_EVENTS[kind].model_validate(event)


def check_stream(events: list[Any]) -> None:
    types_and_numbers(events)  # sequence numbers from 0, one by one
    for event in events:
        check_event(event.model_dump(mode="json"))


# --- every kind of item and event, from the engine ------------------------------------------


async def streamed(engine, **fields: Any) -> list[Any]:
    from .test_engine import request

    run = await engine.start("tenant-a", request(stream=True, **fields))
    return [event async for event in run.events()]


WEATHER = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}


@pytest.mark.parametrize(
    "replies, fields",
    [
        pytest.param([says("Hel", "lo")], {}, id="text"),
        pytest.param(
            [calls(("c1", "get_weather", '{"city": "Paris"}'), text="Checking.")],
            {"tools": [WEATHER]},
            id="function calls",
        ),
        pytest.param(
            [calls(("c1", "clock", "{}")), says("Noon.")],
            {"tools": [mcp_tool(require_approval="never")]},
            id="mcp call",
        ),
        pytest.param(
            [calls(("c1", "clock", "{}"))], {"tools": [mcp_tool()]}, id="approval request"
        ),
        pytest.param(
            [calls(("c1", "web_search", '{"query": "q"}')), says("Found.")],
            {"tools": [{"type": "web_search"}]},
            id="web search",
        ),
        pytest.param([says("Once upon", finish="length")], {}, id="incomplete"),
        pytest.param(
            [[model.ReasoningDelta("Think"), model.ReasoningDelta("ing."), *says("Done.")]],
            {},
            id="reasoning",
        ),
        pytest.param([[ConnectionError("down")]], {}, id="failed"),
    ],
)
def test_every_streamed_event_and_object_meets_the_specification(replies, fields):
    runtime = time_runtime(Tool("12:00"))
    engine, _, _ = responses_with(runtime, *replies)
    events = asyncio.run(streamed(engine, input="Hi", **fields))
    check_stream(events)


def test_a_failing_mcp_tool_and_an_unlisted_server_still_meet_the_specification():
    runtime = time_runtime(Tool(RuntimeError("boom")))
    runtime.servers["http://other.example/mcp"] = ConnectionError("refused")
    other = mcp_tool(server_label="other", server_url="http://other.example/mcp")
    engine, _, _ = responses_with(runtime, calls(("c1", "clock", "{}")), says("No."))
    events = asyncio.run(
        streamed(engine, input="Hi", tools=[mcp_tool(require_approval="never"), other])
    )
    kinds = [e.type for e in events]
    assert "response.mcp_call.failed" in kinds and "response.mcp_list_tools.failed" in kinds
    check_stream(events)


def test_the_response_echoes_the_request_settings_and_states_the_defaults():
    engine, _, scripted = responses_with(FakeRuntime(), says("Hi."), says("Hi."))

    async def scenario():
        plain = await streamed(engine, input="Hi")
        settings = await streamed(
            engine,
            input="Hi",
            temperature=0.2,
            top_p=0.9,
            presence_penalty=0.5,
            frequency_penalty=-0.5,
            top_logprobs=3,
            max_output_tokens=64,
            max_tool_calls=2,
            parallel_tool_calls=False,
            truncation="auto",
            reasoning={"effort": "low"},
            metadata={"topic": "greeting"},
            user="u-1",
            safety_identifier="s-1",
            prompt_cache_key="k-1",
            service_tier="flex",
            store=True,
            include=["message.output_text.logprobs"],
            stream_options={"include_obfuscation": False},
        )
        return plain[-1].response, settings[-1].response

    plain, set_ = asyncio.run(scenario())
    assert (plain.temperature, plain.top_p, plain.truncation, plain.tool_choice) == (
        1.0,
        1.0,
        "disabled",
        "auto",
    )
    assert (plain.service_tier, plain.metadata, plain.background, plain.store) == (
        "default",
        {},
        False,
        True,
    )
    assert (set_.temperature, set_.top_p, set_.presence_penalty, set_.frequency_penalty) == (
        0.2,
        0.9,
        0.5,
        -0.5,
    )
    assert (set_.top_logprobs, set_.max_output_tokens, set_.max_tool_calls) == (3, 64, 2)
    assert (set_.parallel_tool_calls, set_.truncation, set_.reasoning.effort) == (
        False,
        "auto",
        "low",
    )
    assert (set_.metadata, set_.user, set_.safety_identifier, set_.prompt_cache_key) == (
        {"topic": "greeting"},
        "u-1",
        "s-1",
        "k-1",
    )
    assert set_.service_tier == "flex"
    options = scripted.requests[1].options
    assert (options.temperature, options.top_p, options.max_tokens) == (0.2, 0.9, 64)
    assert (options.presence_penalty, options.frequency_penalty, options.top_logprobs) == (
        0.5,
        -0.5,
        3,
    )
    assert (options.parallel_tool_calls, options.reasoning_effort, options.user) == (
        False,
        "low",
        "s-1",
    )
    assert options.prompt_cache_key == "k-1"


# --- through HTTP: stored, retrieved, listed; the request fields the SDK sends -----------------


@pytest.fixture(scope="module")
def base(model):
    with running_server({"OPENAI_BASE_URL": model.url, "CONTEXT_WINDOW_TOKENS": "50"}) as (url, _):
        yield url


@pytest.fixture
def client(base, model):
    model.reset()
    return openai.OpenAI(base_url=f"{base}/v1/openai/v1", api_key="unused", max_retries=0)


def test_created_retrieved_and_listed_responses_meet_the_specification(client, base, model):
    model.reply(text="Hello")
    created = client.responses.create(
        model="m", input="Hi", metadata={"k": "v"}, tool_choice="none", tools=[WEATHER]
    )
    raw = httpx.get(f"{base}/v1/openai/v1/responses/{created.id}").json()
    check_response(raw)
    assert raw["metadata"] == {"k": "v"} and raw["tool_choice"] == "none"
    assert [t["name"] for t in raw["tools"]] == ["get_weather"]
    listed = httpx.get(f"{base}/v1/openai/v1/responses", params={"limit": 5}).json()
    for data in listed["data"]:
        check_response({k: v for k, v in data.items() if k != "input"})
    assert model.requests[-1]["tool_choice"] == "none"


def test_a_named_function_tool_choice_reaches_the_model_and_holds_for_one_reply(client, model):
    model.reply(tool_calls=[("get_weather", '{"city": "Oslo"}')])
    response = client.responses.create(
        model="m",
        input="Weather?",
        tools=[WEATHER],
        tool_choice={"type": "function", "name": "get_weather"},
    )
    assert response.output[0].type == "function_call"
    assert model.requests[-1]["tool_choice"] == {
        "type": "function",
        "function": {"name": "get_weather"},
    }


def test_max_output_tokens_reaches_the_model_and_a_cut_reply_is_incomplete(client, model):
    model.reply(text="Once upon a time", finish_reason="length")
    response = client.responses.create(model="m", input="A story", max_output_tokens=16)
    assert model.requests[-1]["max_tokens"] == 16
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"


def test_truncation_auto_drops_the_oldest_items_and_disabled_refuses_with_a_400(client, model):
    old = {"role": "user", "content": "old " * 100}
    new = {"role": "user", "content": "What now?"}
    model.reply(text="Fits.")
    kept = client.responses.create(model="m", input=[old, new], truncation="auto")
    assert kept.status == "completed"
    assert model.requests[-1]["messages"] == [{"role": "user", "content": "What now?"}]
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="m", input=[old, new])
    assert "context window of 50" in error_message(refused.value.response)


@pytest.mark.parametrize(
    "fields, names",
    [
        ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
        ({"metadata": {"k" * 65: "v"}}, "metadata"),
        ({"metadata": {"k": "v" * 513}}, "metadata"),
        ({"background": True, "tool_choice": {"type": "function", "name": "nope"}}, "nope"),
        ({"tool_choice": {"type": "function", "name": "nope"}}, "nope"),
        ({"top_p": 1.5}, "top_p"),
        ({"max_output_tokens": 3}, "max_output_tokens"),
        ({"frobnicate": 1}, "frobnicate"),
    ],
)
def test_bad_request_fields_are_a_400_naming_them(base, fields, names):
    body = {"model": "m", "input": "Hi", **fields}
    resp = httpx.post(f"{base}/v1/openai/v1/responses", json=body)
    assert resp.status_code == 400, resp.text
    assert names in json.dumps(resp.json())


# --- files as input ------------------------------------------------------------------------------


def file_input(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "input_text", "text": "Read this."}, *parts]}]


def test_a_text_file_is_read_as_text_and_a_pdf_goes_to_the_model_as_a_document():
    import base64

    runtime = FakeRuntime()
    runtime.documents["https://docs.example/notes.md"] = (b"# Notes\nShip it.", "text/markdown")
    engine, storage, scripted = responses_with(runtime, says("Done."))
    pdf = base64.b64encode(b"%PDF-1.7 fake").decode()
    final = asyncio.run(
        streamed(
            engine,
            input=file_input(
                {"type": "input_file", "file_url": "https://docs.example/notes.md"},
                {
                    "type": "input_file",
                    "filename": "report.pdf",
                    "file_data": f"data:application/pdf;base64,{pdf}",
                },
                {
                    "type": "input_file",
                    "filename": "data.csv",
                    "file_data": base64.b64encode(b"a,b\n1,2").decode(),
                },
            ),
        )
    )[-1].response
    assert final.status == "completed"
    sent = scripted.requests[0].messages[-1]
    assert (
        sent.content
        == "Read this.\n\n[file notes.md]\n# Notes\nShip it.\n\n[file data.csv]\na,b\n1,2"
    )
    assert [(d.name, d.media_type, d.data) for d in sent.documents] == [
        ("report.pdf", "application/pdf", pdf)
    ]
    # The stored input keeps the file as given.
    stored = storage.response("tenant-a", final.id)
    assert stored.input[0].content[1].file_url == "https://docs.example/notes.md"


@pytest.mark.parametrize(
    "part, status, words",
    [
        ({"type": "input_file", "file_id": "file-1"}, 400, "Files API"),
        ({"type": "input_file", "file_data": "not base64!", "filename": "a.txt"}, 400, "base64"),
        ({"type": "input_file", "file_data": "/w==", "filename": "a.txt"}, 400, "UTF-8"),
        ({"type": "input_file", "file_url": "http://169.254.169.254/x"}, 400, "not an address"),
        ({"type": "input_file"}, 400, "exactly one"),
    ],
)
def test_a_file_that_cannot_be_read_is_refused_before_the_model_runs(part, status, words):
    from agents_core.errors import status_of

    runtime = FakeRuntime()
    runtime.refused.add("http://169.254.169.254/x")
    engine, _, scripted = responses_with(runtime, says("never"))
    with pytest.raises(Exception) as refused:
        asyncio.run(streamed(engine, input=file_input(part)))
    error = refused.value
    assert words in str(error)
    if not isinstance(error, ValueError):  # the model's own validation is a 400 over HTTP
        assert status_of(error) == status
    assert scripted.requests == []


def test_a_pdf_reaches_an_openai_compatible_model_as_a_file_part(client, model):
    import base64

    model.reply(text="A fake PDF.")
    pdf = base64.b64encode(b"%PDF-1.7 fake").decode()
    client.responses.create(
        model="m",
        input=file_input(
            {
                "type": "input_file",
                "filename": "report.pdf",
                "file_data": f"data:application/pdf;base64,{pdf}",
            }
        ),
    )
    content = model.requests[-1]["messages"][-1]["content"]
    assert content == [
        {"type": "text", "text": "Read this."},
        {
            "type": "file",
            "file": {"filename": "report.pdf", "file_data": f"data:application/pdf;base64,{pdf}"},
        },
    ]


def test_reasoning_a_model_streams_is_a_reasoning_item_before_the_answer(client, model):
    model.reply(text="Paris.", reasoning="The capital of France is Paris.")
    with client.responses.stream(model="m", input="Capital of France?") as stream:
        kinds = [event.type for event in stream]
        response = stream.get_final_response()
    assert [o.type for o in response.output] == ["reasoning", "message"]
    assert response.output[0].content[0].text == "The capital of France is Paris."
    assert response.output_text == "Paris."
    assert kinds.index("response.reasoning_text.done") < kinds.index("response.output_text.delta")


def test_every_generation_setting_the_sdk_sends_reaches_an_openai_compatible_model(client, model):
    model.reply(text="Fine.")
    response = client.responses.create(
        model="m",
        input="Hi",
        tools=[WEATHER],
        temperature=0.4,
        top_p=0.8,
        top_logprobs=2,
        max_output_tokens=32,
        parallel_tool_calls=False,
        reasoning={"effort": "high"},
        safety_identifier="end-user-7",
        prompt_cache_key="cache-1",
        service_tier="priority",
        include=["reasoning.encrypted_content"],
        metadata={"run": "1"},
        store=True,
        # The Open Responses specification has these; this SDK's create() does not.
        extra_body={"presence_penalty": 0.1, "frequency_penalty": 0.2},
    )
    sent = model.requests[-1]
    assert {k: sent[k] for k in ("temperature", "top_p", "presence_penalty", "max_tokens")} == {
        "temperature": 0.4,
        "top_p": 0.8,
        "presence_penalty": 0.1,
        "max_tokens": 32,
    }
    assert (sent["frequency_penalty"], sent["logprobs"], sent["top_logprobs"]) == (0.2, True, 2)
    assert (sent["parallel_tool_calls"], sent["reasoning_effort"]) == (False, "high")
    assert (sent["user"], sent["prompt_cache_key"]) == ("end-user-7", "cache-1")
    assert (response.service_tier, response.metadata, response.reasoning.effort) == (
        "priority",
        {"run": "1"},
        "high",
    )
