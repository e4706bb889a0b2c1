"""Turns through the real app (in-process) against a scripted OpenAI-compatible model over HTTP."""

from __future__ import annotations

import base64
import json
import random
import string
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import boto3
import pytest
from agents_core.api.agents import AgentConfig, ToolExecutionStep, Turn
from agents_core.api.common import CompletionMessage, ToolCall, ToolResponse, UserMessage
from agents_core.domain import COMPLETED, FAILED, RUNNING, TurnState
from agents_core.errors import Conflict
from agents_core.ids import new_id
from agents_core.services import build_services
from agents_core.settings import Settings
from agents_core.store import keys
from agents_core.store.items import item_size
from agents_core.store.turns import TurnStore
from agents_core.web.agents import router as agents_router
from agents_core.web.app import create_app
from agents_core.web.turns import resume_router, turns_router
from botocore.exceptions import ClientError
from fastapi.testclient import TestClient

from .conftest import TABLE
from .turn_support import WEATHER_TOOL, event_types, new_session, sse_events, turn_url, user


@pytest.fixture
def api(dynamodb, model):
    model.reset()
    settings = Settings(table_name=TABLE, openai_base_url=model.url, inference_timeout_seconds=2)
    services = build_services(settings, dynamodb)
    app = create_app(agents_router, turns_router, resume_router, services=services)
    with TestClient(app, raise_server_exceptions=False) as client:  # one event loop throughout
        yield client


def test_streaming_turn_events_arrive_in_order_and_match_the_stored_turn(api, model):
    agent_id, session_id = new_session(api)
    model.reply(text="Hello there, friend", chunks=3)
    resp = api.post(turn_url(agent_id, session_id), json={"messages": [user("hi")], "stream": True})
    assert resp.headers["content-type"].startswith("text/event-stream")
    events = sse_events(resp.text)
    assert event_types(events) == [
        "turn_start",
        "step_start",
        "step_progress",
        "step_progress",
        "step_progress",
        "step_complete",
        "turn_complete",
    ]
    turn_id = events[0]["event"]["payload"]["turn_id"]
    deltas = "".join(e["event"]["payload"]["delta"]["text"] for e in events[2:5])
    final = events[-1]["event"]["payload"]["turn"]
    assert deltas == final["output_message"]["content"] == "Hello there, friend"
    assert final["turn_id"] == turn_id
    assert final["output_message"]["stop_reason"] == "end_of_turn"
    assert api.get(f"{turn_url(agent_id, session_id)}/{turn_id}").json() == final
    step = final["steps"][0]
    got = api.get(f"{turn_url(agent_id, session_id)}/{turn_id}/step/{step['step_id']}").json()
    assert got["step"] == step


def test_history_of_earlier_turns_reaches_the_model(api, model):
    agent_id, session_id = new_session(api)
    model.reply(text="first answer")
    api.post(turn_url(agent_id, session_id), json={"messages": [user("first question")]})
    model.reply(text="second answer")
    turn = api.post(turn_url(agent_id, session_id), json={"messages": [user("second question")]})
    assert turn.status_code == 200 and turn.json()["output_message"]["content"] == "second answer"
    assert [(m["role"], m["content"]) for m in model.requests[-1]["messages"]] == [
        ("system", "You are terse."),
        ("user", "first question"),
        ("assistant", "first answer"),
        ("user", "second question"),
    ]
    session = api.get(f"/v1/agents/{agent_id}/session/{session_id}").json()
    assert [t["output_message"]["content"] for t in session["turns"]] == [
        "first answer",
        "second answer",
    ]


def test_sampling_tools_and_response_format_reach_the_provider(api, model):
    agent_id, session_id = new_session(
        api,
        client_tools=[WEATHER_TOOL],
        sampling_params={
            "strategy": {"type": "top_p", "temperature": 0.7, "top_p": 0.9},
            "max_tokens": 50,
            "repetition_penalty": 1.2,
            "stop": ["END"],
        },
        response_format={"type": "json_schema", "json_schema": {"type": "object"}},
        tool_config={"tool_choice": "required"},
    )
    api.post(turn_url(agent_id, session_id), json={"messages": [user("x")]})
    sent = model.requests[-1]
    assert (sent["temperature"], sent["top_p"], sent["max_tokens"]) == (0.7, 0.9, 50)
    assert sent["repetition_penalty"] == 1.2 and sent["stop"] == ["END"]
    assert sent["response_format"]["json_schema"]["schema"] == {"type": "object"}
    assert sent["tool_choice"] == "required"
    function = sent["tools"][0]["function"]
    assert function["name"] == "get_weather"
    assert function["parameters"]["required"] == ["city"]


def test_greedy_and_top_k_and_per_turn_tool_config(api, model):
    agent_id, session_id = new_session(
        api,
        client_tools=[WEATHER_TOOL],
        sampling_params={"strategy": {"type": "top_k", "top_k": 5}},
    )
    body = {"messages": [user("x")], "tool_config": {"tool_choice": "none"}}
    api.post(turn_url(agent_id, session_id), json=body)
    assert model.requests[-1]["top_k"] == 5 and model.requests[-1]["tool_choice"] == "none"
    agent_id, session_id = new_session(api)
    api.post(turn_url(agent_id, session_id), json={"messages": [user("x")]})
    assert model.requests[-1]["temperature"] == 0.0


def test_system_message_replace_places_the_tool_definitions(api, model):
    agent_id, session_id = new_session(
        api,
        instructions="Tools: {{function_definitions}}",
        client_tools=[WEATHER_TOOL],
        tool_config={"system_message_behavior": "replace"},
    )
    api.post(turn_url(agent_id, session_id), json={"messages": [user("x")]})
    system = model.requests[-1]["messages"][0]["content"]
    assert system.startswith("Tools: [") and '"get_weather"' in system


def test_client_tool_pauses_and_resume_continues_the_same_turn(api, model):
    agent_id, session_id = new_session(api, client_tools=[WEATHER_TOOL])
    url = turn_url(agent_id, session_id)
    model.reply(tool_calls=[("get_weather", '{"city": "Paris"}')])
    paused = api.post(url, json={"messages": [user("weather in Paris?")]}).json()
    call = paused["output_message"]["tool_calls"][0]
    assert paused["output_message"]["stop_reason"] == "end_of_message"
    assert call["tool_name"] == "get_weather" and call["arguments"] == {"city": "Paris"}
    turn_id = paused["turn_id"]

    # Another turn must wait; a resume for other calls is refused; neither changes anything.
    assert api.post(url, json={"messages": [user("hello?")]}).status_code == 409
    wrong = {"tool_responses": [{"call_id": "nope", "tool_name": "get_weather", "content": "x"}]}
    resp = api.post(f"{url}/{turn_id}/resume", json=wrong)
    assert resp.status_code == 400 and call["call_id"] in resp.json()["detail"]
    assert api.get(f"{url}/{turn_id}").json() == paused

    model.reply(text="It is sunny in Paris.")
    answer = {
        "tool_responses": [
            {"call_id": call["call_id"], "tool_name": "get_weather", "content": "sunny"}
        ]
    }
    done = api.post(f"{url}/{turn_id}/resume", json=answer).json()
    assert done["turn_id"] == turn_id
    assert [s["step_type"] for s in done["steps"]] == ["inference", "tool_execution", "inference"]
    assert done["output_message"]["content"] == "It is sunny in Paris."
    # Stored: two steps as items of their own (written while the turn ran), the last inside it.
    assert api.get(f"{url}/{turn_id}").json() == done
    session = api.get(f"/v1/agents/{agent_id}/session/{session_id}").json()
    assert session["turns"] == [done]
    sent = model.requests[-1]["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == call["call_id"]
    assert sent[-1] == {"role": "tool", "content": "sunny", "tool_call_id": call["call_id"]}
    assert api.post(f"{url}/{turn_id}/resume", json=answer).status_code == 409
    # The session is free again, and the paused-then-resumed turn is history.
    model.reply(text="ok")
    assert api.post(url, json={"messages": [user("thanks")]}).status_code == 200
    roles = [m["role"] for m in model.requests[-1]["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]


def _requests(client) -> list[str]:
    """The DynamoDB operations `client` sends from now on, in order."""
    sent: list[str] = []
    client.meta.events.register(
        "before-call.dynamodb", lambda model, **_: sent.append(model.name), unique_id="requests"
    )
    return sent


def _step_items(client, session_id: str) -> list[str]:
    """The sort keys of a session's step items (and their parts)."""
    items = client.query(
        TableName=TABLE,
        KeyConditionExpression="PK = :pk AND begins_with(SK, :s)",
        ExpressionAttributeValues={
            ":pk": {"S": keys.session_pk("default", session_id)},
            ":s": {"S": keys.STEP_PREFIX},
        },
    )["Items"]
    return [item["SK"]["S"] for item in items]


def test_a_turn_paused_on_its_first_reply_is_one_item_and_its_resume_reads_it_in_one_request(
    api, model, dynamodb
):
    """The reply that called the client's tool is stored with the pause, not apart: the
    resume reads the session and the turn in one request and queries no steps. It stores the
    reply as an item of its own with the tool results, so the turn reads the same throughout."""
    agent_id, session_id = new_session(api, client_tools=[WEATHER_TOOL])
    url = turn_url(agent_id, session_id)
    model.reply(tool_calls=[("get_weather", '{"city": "Rome"}')])
    sent = _requests(dynamodb)
    events = sse_events(api.post(url, json={"messages": [user("Rome?")], "stream": True}).text)
    assert event_types(events)[-3:] == ["step_progress", "step_complete", "turn_awaiting_input"]
    paused = events[-1]["event"]["payload"]["turn"]
    assert [s["step_type"] for s in paused["steps"]] == ["inference"]
    before_end = sent[: sent.index("TransactWriteItems")]  # then the stream log's PutItem
    assert not {"PutItem", "BatchWriteItem"} & set(before_end), sent  # no step written apart
    assert _step_items(dynamodb, session_id) == []
    assert api.get(f"{url}/{paused['turn_id']}").json() == paused

    call = paused["output_message"]["tool_calls"][0]
    model.reply(text="Warm.")
    answer = {
        "tool_responses": [
            {"call_id": call["call_id"], "tool_name": "get_weather", "content": "25C"}
        ]
    }
    sent.clear()
    done = api.post(f"{url}/{paused['turn_id']}/resume", json=answer).json()
    assert sent[:2] == ["BatchGetItem", "TransactWriteItems"], sent
    assert "Query" not in sent
    assert [s["step_type"] for s in done["steps"]] == ["inference", "tool_execution", "inference"]
    assert done["steps"][0] == paused["steps"][0]
    assert len(_step_items(dynamodb, session_id)) == 2  # the reply and the tool results
    assert api.get(f"{url}/{paused['turn_id']}").json() == done
    assert api.get(f"/v1/agents/{agent_id}/session/{session_id}").json()["turns"] == [done]


def test_a_turn_paused_twice_reads_each_step_once_in_order(api, model, dynamodb):
    """A resumed turn that pauses again keeps its new reply with the pause, and its earlier
    steps apart: the second resume reads both, and no step is read twice."""
    agent_id, session_id = new_session(api, client_tools=[WEATHER_TOOL])
    url = turn_url(agent_id, session_id)
    model.reply(tool_calls=[("get_weather", '{"city": "Oslo"}')])
    turn = api.post(url, json={"messages": [user("Oslo, then Bergen?")]}).json()
    for city, reply in (("Oslo", {"tool_calls": [("get_weather", '{"city": "Bergen"}')]}),):
        model.reply(**reply)
        call = turn["output_message"]["tool_calls"][0]
        body = {
            "tool_responses": [
                {"call_id": call["call_id"], "tool_name": "get_weather", "content": city}
            ]
        }
        turn = api.post(f"{url}/{turn['turn_id']}/resume", json=body).json()
    assert [s["step_type"] for s in turn["steps"]] == ["inference", "tool_execution", "inference"]
    assert api.get(f"{url}/{turn['turn_id']}").json() == turn
    model.reply(text="Both cold.")
    call = turn["output_message"]["tool_calls"][0]
    body = {
        "tool_responses": [
            {"call_id": call["call_id"], "tool_name": "get_weather", "content": "Bergen"}
        ]
    }
    done = api.post(f"{url}/{turn['turn_id']}/resume", json=body).json()
    kinds = [s["step_type"] for s in done["steps"]]
    assert kinds == ["inference", "tool_execution"] * 2 + ["inference"]
    assert done["steps"][:3] == turn["steps"]
    assert len({s["step_id"] for s in done["steps"]}) == 5
    assert api.get(f"{url}/{turn['turn_id']}").json() == done
    assert api.get(f"/v1/agents/{agent_id}/session/{session_id}").json()["turns"] == [done]


def test_streamed_resume_starts_with_the_tool_execution_step(api, model):
    agent_id, session_id = new_session(api, client_tools=[WEATHER_TOOL])
    url = turn_url(agent_id, session_id)
    model.reply(tool_calls=[("get_weather", '{"city": "Oslo"}')])
    events = sse_events(api.post(url, json={"messages": [user("Oslo?")], "stream": True}).text)
    assert event_types(events)[-1] == "turn_awaiting_input"
    progress = [
        e["event"]["payload"]["delta"] for e in events if event_types([e]) == ["step_progress"]
    ]
    assert progress[-1]["parse_status"] == "succeeded"
    turn = events[-1]["event"]["payload"]["turn"]
    call = turn["output_message"]["tool_calls"][0]
    model.reply(text="Cold.")
    body = {
        "tool_responses": [
            {"call_id": call["call_id"], "tool_name": "get_weather", "content": "-3C"}
        ],
        "stream": True,
    }
    events = sse_events(api.post(f"{url}/{turn['turn_id']}/resume", json=body).text)
    assert event_types(events)[:3] == ["turn_start", "step_start", "step_complete"]
    assert events[2]["event"]["payload"]["step_details"]["step_type"] == "tool_execution"
    assert event_types(events)[-1] == "turn_complete"


def test_a_call_to_an_unknown_tool_is_answered_with_an_error_result(api, model):
    agent_id, session_id = new_session(api)
    model.reply(tool_calls=[("launch_rockets", "{}")])
    model.reply(text="I cannot do that.")
    turn = api.post(turn_url(agent_id, session_id), json={"messages": [user("go")]}).json()
    assert [s["step_type"] for s in turn["steps"]] == ["inference", "tool_execution", "inference"]
    assert "Unknown tool" in turn["steps"][1]["tool_responses"][0]["content"]
    assert turn["output_message"]["content"] == "I cannot do that."


def test_max_infer_iters_bounds_the_loop(api, model):
    agent_id, session_id = new_session(api, max_infer_iters=2)
    for _ in range(3):
        model.reply(tool_calls=[("launch_rockets", "{}")])
    turn = api.post(turn_url(agent_id, session_id), json={"messages": [user("go")]}).json()
    assert [s["step_type"] for s in turn["steps"]].count("inference") == 2
    assert turn["output_message"]["stop_reason"] == "out_of_tokens"


@pytest.mark.parametrize(
    ("error", "status", "words"),
    [
        ("status", 502, "500"),
        ("malformed", 502, "malformed"),
        ("truncated", 502, "without finishing"),
        ("hang", 504, "timed out"),
    ],
)
def test_a_failing_model_fails_the_turn_cleanly(api, model, error, status, words):
    agent_id, session_id = new_session(api)
    url = turn_url(agent_id, session_id)
    model.reply(error=error, text="partial")
    resp = api.post(url, json={"messages": [user("boom")]})
    assert resp.status_code == status and words in resp.json()["detail"]
    failed = api.get(f"{url}/{resp.json()['turn_id']}").json()
    assert failed["completed_at"] is not None and failed["steps"] == []
    # Streamed, the failure is the last event; either way the session stays usable.
    model.reply(error=error, text="partial")
    events = sse_events(api.post(url, json={"messages": [user("boom")], "stream": True}).text)
    assert event_types(events)[0] == "turn_start" and event_types(events)[-1] == "error"
    assert events[-1]["error"]["status"] == status
    model.reply(text="recovered")
    ok = api.post(url, json={"messages": [user("again")]})
    assert ok.status_code == 200 and ok.json()["output_message"]["content"] == "recovered"
    # Failed turns are kept for inspection but not replayed to the model.
    assert [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "user"] == [
        "again"
    ]


def test_a_tool_group_that_is_not_registered_is_refused_and_changes_nothing(api, model, dynamodb):
    agent_id, session_id = new_session(api, toolgroups=["mcp::nowhere"])
    before = dynamodb.scan(TableName=TABLE)["Items"]
    resp = api.post(turn_url(agent_id, session_id), json={"messages": [user("x")]})
    assert resp.status_code == 400 and "mcp::nowhere" in resp.json()["detail"]
    assert dynamodb.scan(TableName=TABLE)["Items"] == before
    assert model.requests == []


def test_bad_turn_requests_are_400_or_404_and_change_nothing(api, model, dynamodb):
    agent_id, session_id = new_session(api)
    url = turn_url(agent_id, session_id)
    before = dynamodb.scan(TableName=TABLE)["Items"]
    for body in (
        {},
        {"messages": []},
        {"messages": [{"role": "system", "content": "x"}]},
        {"messages": "x"},
    ):
        assert api.post(url, json=body).status_code == 400
    unstorable = r'{"messages": [{"role": "user", "content": "\udcff"}]}'
    resp = api.post(url, content=unstorable, headers={"content-type": "application/json"})
    assert resp.status_code == 400
    assert dynamodb.scan(TableName=TABLE)["Items"] == before
    assert api.post(url, json={"messages": [user("fine")]}).status_code == 200  # still free
    assert (
        api.post(turn_url(agent_id, "missing"), json={"messages": [user("x")]}).status_code == 404
    )
    assert (
        api.post(turn_url("missing", session_id), json={"messages": [user("x")]}).status_code == 404
    )
    resume = {"tool_responses": []}
    assert api.post(f"{url}/missing/resume", json=resume).status_code == 404


def test_a_large_tool_result_is_stored_in_parts(api, model, dynamodb):
    agent_id, session_id = new_session(api, client_tools=[WEATHER_TOOL])
    url = turn_url(agent_id, session_id)
    model.reply(tool_calls=[("get_weather", '{"city": "Lima"}')])
    paused = api.post(url, json={"messages": [user("Lima?")]}).json()
    call = paused["output_message"]["tool_calls"][0]
    big = base64.b64encode(random.Random(9).randbytes(675_000)).decode()  # 900 KB, random
    model.reply(text="That was a lot.")
    answer = {
        "tool_responses": [{"call_id": call["call_id"], "tool_name": "get_weather", "content": big}]
    }
    done = api.post(f"{url}/{paused['turn_id']}/resume", json=answer)
    assert done.status_code == 200
    stored = api.get(f"{url}/{paused['turn_id']}").json()
    assert stored["steps"][1]["tool_responses"][0]["content"] == big
    pages = dynamodb.get_paginator("scan").paginate(TableName=TABLE)
    items = [item for page in pages for item in page["Items"]]
    assert max(item_size(i) for i in items) < 400 * 1024
    assert sum(1 for i in items if "#PART#" in i["SK"]["S"]) >= 6  # the step and the turn, in parts
    model.reply(text="next")
    assert api.post(url, json={"messages": [user("more")]}).status_code == 200
    assert model.requests[-1]["messages"][3]["content"] == big


def test_one_turn_at_a_time(services, store):
    agent = store.create_agent("t", AgentConfig(model="m", instructions="i"))
    busy = store.create_session("t", agent.agent_id, "busy")
    services.turns.lock_session("t", agent.agent_id, _running_turn("turn-a", busy.session_id))
    with pytest.raises(Conflict):
        services.turns.lock_session("t", agent.agent_id, _running_turn("turn-b", busy.session_id))


@pytest.mark.parametrize("size", [10, 5000], ids=["on the session item", "an item of its own"])
def test_a_running_turn_can_be_read_and_a_dead_one_ends_failed_when_its_lease_expires(
    services, store, size
):
    agent = store.create_agent("t", AgentConfig(model="m", instructions="i"))
    session_id = store.create_session("t", agent.agent_id, "s").session_id
    text = "x" * size
    dead = TurnStore(services.turns._t.client, TABLE, lease_seconds=-1)
    running = _running_turn("turn-a", session_id, text)
    lock = dead.lock_session("t", agent.agent_id, running)
    assert lock.recorded == (size == 10)
    if not lock.recorded:
        dead.put_running(dead.running_record(lock, running, TurnState(RUNNING)))
    turn, state = services.turns.get_turn_state("t", agent.agent_id, session_id, "turn-a")
    assert state.status == RUNNING and turn.input_messages[0].content == text
    assert [t.turn_id for t in store.get_session("t", agent.agent_id, session_id).turns] == [
        "turn-a"
    ]

    # Its Lambda died: the session is held only until the lease runs out, and the next turn
    # records the dead one as failed, input and all.
    next_turn = _running_turn("turn-b", session_id, "next")
    services.turns.lock_session("t", agent.agent_id, next_turn)
    turn, state = services.turns.get_turn_state("t", agent.agent_id, session_id, "turn-a")
    assert state.status == FAILED and turn.input_messages[0].content == text
    turns = store.get_session("t", agent.agent_id, session_id).turns
    assert [(t.turn_id, t.input_messages[0].content) for t in turns] == [
        ("turn-a", text),
        ("turn-b", "next"),
    ]
    # A client that lost its stream learns the outcome: the dead turn reads as ended.
    for dead_turn in (turn, turns[0]):
        assert dead_turn.completed_at is not None and dead_turn.output_message.content == ""


def _running_turn(turn_id: str, session_id: str, text: str = "hi") -> Turn:
    return Turn(
        turn_id=turn_id,
        session_id=session_id,
        input_messages=[UserMessage(content=text)],
        steps=[],
        output_message=CompletionMessage(content="", stop_reason="end_of_message"),
        started_at=datetime.now(UTC),
    )


def test_a_deleted_agent_takes_no_more_turns_even_from_a_warm_container(api, model):
    agent_id, session_id = new_session(api)
    assert (
        api.post(turn_url(agent_id, session_id), json={"messages": [user("hi")]}).status_code == 200
    )
    assert api.delete(f"/v1/agents/{agent_id}").status_code == 204
    resp = api.post(turn_url(agent_id, session_id), json={"messages": [user("again")]})
    assert resp.status_code == 404


def test_image_content_reaches_the_model(api, model):
    agent_id, session_id = new_session(api)
    content = [
        {"type": "text", "text": "Describe:"},
        {"type": "image", "image": {"url": {"uri": "https://example.com/dog.jpg"}}},
        {"type": "image", "image": {"data": "iVBORw0KGgo="}},
    ]
    api.post(
        turn_url(agent_id, session_id), json={"messages": [{"role": "user", "content": content}]}
    )
    assert model.requests[-1]["messages"][-1]["content"] == [
        {"type": "text", "text": "Describe:"},
        {"type": "image_url", "image_url": {"url": "https://example.com/dog.jpg"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    ]


def test_a_session_with_a_running_turn_is_not_deleted_under_it(api, services, model, dynamodb):
    agent_id, session_id = new_session(api)
    services.turns.lock_session("default", agent_id, _running_turn("turn-running", session_id))
    before = dynamodb.scan(TableName=TABLE)["Items"]
    resp = api.delete(f"/v1/agents/{agent_id}/session/{session_id}")
    assert resp.status_code == 409 and "running" in resp.json()["detail"]
    assert resp.status_code == 409 and api.delete(f"/v1/agents/{agent_id}").status_code == 409
    assert api.get(f"/v1/agents/{agent_id}/session/{session_id}").status_code == 200
    assert len(dynamodb.scan(TableName=TABLE)["Items"]) == len(before)


def test_deleting_a_session_with_a_paused_turn_ends_it(api, model):
    agent_id, session_id = new_session(api, client_tools=[WEATHER_TOOL])
    url = turn_url(agent_id, session_id)
    model.reply(tool_calls=[("get_weather", '{"city": "Bern"}')])
    paused = api.post(url, json={"messages": [user("Bern?")]}).json()
    call = paused["output_message"]["tool_calls"][0]
    assert api.delete(f"/v1/agents/{agent_id}/session/{session_id}").status_code == 204
    body = {
        "tool_responses": [{"call_id": call["call_id"], "tool_name": "get_weather", "content": "x"}]
    }
    assert api.post(f"{url}/{paused['turn_id']}/resume", json=body).status_code == 404


def test_a_session_delete_cut_short_hides_the_session_and_a_retry_finishes(api, services, dynamodb):
    from agents_core.store import keys

    agent_id, session_id = new_session(api)
    dynamodb.update_item(
        TableName=TABLE,
        Key={"PK": {"S": keys.session_pk("default", session_id)}, "SK": {"S": keys.SESSION}},
        UpdateExpression="SET deleting = :t",
        ExpressionAttributeValues={":t": {"BOOL": True}},
    )
    assert api.get(f"/v1/agents/{agent_id}/session/{session_id}").status_code == 404
    assert (
        api.post(turn_url(agent_id, session_id), json={"messages": [user("x")]}).status_code == 404
    )
    assert api.delete(f"/v1/agents/{agent_id}/session/{session_id}").status_code == 204
    assert all(
        session_id not in i["PK"]["S"] + i["SK"]["S"]
        for i in dynamodb.scan(TableName=TABLE)["Items"]
    )
    assert api.delete(f"/v1/agents/{agent_id}/session/{session_id}").status_code == 404


def test_containers_taking_turns_on_one_session_each_send_the_whole_history(dynamodb, model):
    """Two warm containers alternate on a session: each remembers what it read or wrote, asks
    only for what it missed, and nothing when it ran the session's last turn itself."""
    model.reset()
    containers = []
    for _ in range(2):
        client = boto3.client("dynamodb", region_name="us-east-1")
        settings = Settings(table_name=TABLE, openai_base_url=model.url)
        services = build_services(settings, client)
        app = create_app(agents_router, turns_router, services=services)
        queries: list[str] = []
        client.meta.events.register(
            "before-call.dynamodb.Query", lambda params, q=queries, **_: q.append("Query")
        )
        containers.append((TestClient(app), queries))
    (a, a_queries), (b, _) = containers
    agent_id, session_id = new_session(a)
    for n, api in enumerate([a, b, a, a, b, a], 1):
        a_queries.clear()
        resp = api.post(turn_url(agent_id, session_id), json={"messages": [user(f"q{n}")]})
        assert resp.status_code == 200
        users = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "user"]
        assert users == [f"q{i}" for i in range(1, n + 1)]
        if api is a:
            # Turn 1: a new session has no history to read; turns 3 and 6: catching up with b
            # (one query); turn 4: a ran turn 3, so it reads no history at all.
            assert len(a_queries) == (1 if n in (3, 6) else 0), n


def test_a_running_record_that_lands_after_the_turns_end_changes_nothing(services, store):
    agent = store.create_agent("t", AgentConfig(model="m", instructions="i"))
    session = store.create_session("t", agent.agent_id, "s")
    turns = services.turns
    lock = turns.lock_session("t", agent.agent_id, _running_turn("turn-a", session.session_id))
    turn = _running_turn("turn-a", session.session_id)
    late = turns.running_record(lock, turn, TurnState(RUNNING))
    turn.output_message = CompletionMessage(content="done", stop_reason="end_of_turn")
    turns.end_turn(lock, turn, TurnState(COMPLETED, iterations=1), history=[])
    turns.put_running(late)
    stored, state = turns.get_turn_state("t", agent.agent_id, session.session_id, "turn-a")
    assert state.status == COMPLETED
    assert stored.output_message.content == "done"


def test_a_turn_with_an_input_over_the_item_limit_is_stored_whole(api, model, dynamodb):
    agent_id, session_id = new_session(api)
    big = "word " * 120_000  # 600 KB: the running record and the finished turn both go in parts
    model.reply(text="short answer")
    done = api.post(turn_url(agent_id, session_id), json={"messages": [user(big)]})
    assert done.status_code == 200
    stored = api.get(f"{turn_url(agent_id, session_id)}/{done.json()['turn_id']}").json()
    assert stored["input_messages"][0]["content"] == big
    assert stored["output_message"]["content"] == "short answer"
    items = dynamodb.scan(TableName=TABLE)["Items"]
    assert max(item_size(i) for i in items) < 400 * 1024


def test_refused_resumes_change_nothing(api, model, dynamodb):
    """Not awaiting (running, finished), unstorable results, a race lost: 409 or 400, and
    nothing written."""
    agent_id, session_id = new_session(api, client_tools=[WEATHER_TOOL])
    url = turn_url(agent_id, session_id)
    model.reply(tool_calls=[("get_weather", '{"city": "Paris"}')])
    paused = api.post(url, json={"messages": [user("weather?")]}).json()
    call_id = paused["output_message"]["tool_calls"][0]["call_id"]
    before = dynamodb.scan(TableName=TABLE)["Items"]

    result = {"call_id": call_id, "tool_name": "get_weather", "content": "?"}
    unstorable = json.dumps({"tool_responses": [result]}).replace('"?"', r'"\udcff"')
    resp = api.post(
        f"{url}/{paused['turn_id']}/resume",
        content=unstorable,
        headers={"content-type": "application/json"},
    )
    assert resp.status_code == 400

    # Two resumes read the paused turn; the first takes it, the second (with a result stored in
    # parts) loses the race and leaves no part behind.
    turns = TurnStore(dynamodb, TABLE)
    first = turns.read_paused("default", agent_id, session_id, paused["turn_id"])
    second = turns.read_paused("default", agent_id, session_id, paused["turn_id"])
    assert dynamodb.scan(TableName=TABLE)["Items"] == before
    turns.lock_for_resume(first, agent_id, _tool_step(paused["turn_id"], call_id, "sunny"))
    taken = dynamodb.scan(TableName=TABLE)["Items"]
    with pytest.raises(Conflict):
        turns.lock_for_resume(
            second, agent_id, _tool_step(paused["turn_id"], call_id, "x" * 500_000)
        )
    assert dynamodb.scan(TableName=TABLE)["Items"] == taken

    # The turn now runs (its Lambda is gone): resuming it again is 409.
    answer = {"tool_responses": [{"call_id": call_id, "tool_name": "get_weather", "content": "s"}]}
    assert api.post(f"{url}/{paused['turn_id']}/resume", json=answer).status_code == 409

    # A new turn running on the session item cannot be resumed either.
    other_agent, other_session = new_session(api, client_tools=[WEATHER_TOOL])
    running = _running_turn("turn-r", other_session)
    turns.lock_session("default", other_agent, running)
    resp = api.post(f"{turn_url(other_agent, other_session)}/turn-r/resume", json=answer)
    assert resp.status_code == 409 and "running" in resp.json()["detail"]


def _tool_step(turn_id: str, call_id: str, content: str) -> ToolExecutionStep:
    now = datetime.now(UTC)
    return ToolExecutionStep(
        turn_id=turn_id,
        step_id=new_id(),
        started_at=now,
        completed_at=now,
        tool_calls=[ToolCall(call_id=call_id, tool_name="get_weather", arguments={})],
        tool_responses=[ToolResponse(call_id=call_id, tool_name="get_weather", content=content)],
    )


def _reverted_copy(paused):
    """The turn and state a resume keeps to put its paused turn back with (TurnEngine's)."""
    return paused.turn.model_copy(update={"steps": list(paused.turn.steps)}), TurnState(
        **vars(paused.state)
    )


def test_a_resume_put_back_while_a_racer_writes_the_kept_reply_in_parts_leaves_it_whole(
    api, model, dynamodb
):
    """Resume B writes the parts of the reply the paused item keeps (700 KB: in parts), then
    resume A, which had taken the turn, is put back, then B takes the turn. The reply's item
    stays whole: the put-back leaves the kept reply's items for B, whose parts they are too."""
    agent_id, session_id = new_session(api, client_tools=[WEATHER_TOOL])
    url = turn_url(agent_id, session_id)
    big = "".join(random.Random(1).choices(string.ascii_letters + string.digits, k=700_000))
    model.reply(text=big, tool_calls=[("get_weather", '{"city": "Paris"}')])
    paused = api.post(url, json={"messages": [user("weather?")]}).json()
    turn_id, call_id = paused["turn_id"], paused["output_message"]["tool_calls"][0]["call_id"]
    turns = TurnStore(dynamodb, TABLE)
    a = turns.read_paused("default", agent_id, session_id, turn_id)
    b = turns.read_paused("default", agent_id, session_id, turn_id)
    assert a.steps_in_item == 1
    put_back = _reverted_copy(a)
    step_a = _tool_step(turn_id, call_id, "sunny")
    lock_a = turns.lock_for_resume(a, agent_id, step_a)
    transact = turns._t.transact

    def a_put_back_first(actions):  # B's parts are written; its transaction comes next
        turns._t.transact = transact
        turns.revert(lock_a, *put_back, [step_a.step_id])
        return transact(actions)

    turns._t.transact = a_put_back_first
    turns.lock_for_resume(b, agent_id, _tool_step(turn_id, call_id, "rain"))
    read = api.get(f"{url}/{turn_id}")
    assert read.status_code == 200
    steps = read.json()["steps"]
    assert [s["step_type"] for s in steps] == ["inference", "tool_execution"]
    assert steps[0]["model_response"]["content"] == big
    assert steps[1]["tool_responses"][0]["content"] == "rain"


def test_a_resume_that_read_a_racers_tool_results_takes_the_turn_with_its_own_only(
    api, model, dynamodb
):
    """A turn paused twice: resume B reads the turn, then resume A takes it (writing its tool
    results) before B reads the step items, and A is put back before B takes the turn. B's
    turn has the paused steps and its own results, not A's: a paused turn reads only its
    first `steps_apart` step items."""
    agent_id, session_id = new_session(api, client_tools=[WEATHER_TOOL])
    url = turn_url(agent_id, session_id)
    model.reply(tool_calls=[("get_weather", '{"city": "Paris"}')])
    paused = api.post(url, json={"messages": [user("weather?")]}).json()
    turn_id, call_id = paused["turn_id"], paused["output_message"]["tool_calls"][0]["call_id"]
    model.reply(tool_calls=[("get_weather", '{"city": "Rome"}')])
    body = {"tool_responses": [{"call_id": call_id, "tool_name": "get_weather", "content": "s"}]}
    again = api.post(f"{url}/{turn_id}/resume", json=body).json()
    second_call = again["output_message"]["tool_calls"][0]["call_id"]
    turns = TurnStore(dynamodb, TABLE)
    a = turns.read_paused("default", agent_id, session_id, turn_id)
    put_back = _reverted_copy(a)
    step_a = _tool_step(turn_id, second_call, "A")
    read_steps, held = turns._steps, []

    def a_takes_the_turn_first(pk, of_turn):
        turns._steps = read_steps
        held.append(turns.lock_for_resume(a, agent_id, step_a))
        return read_steps(pk, of_turn)

    turns._steps = a_takes_the_turn_first
    b = turns.read_paused("default", agent_id, session_id, turn_id)
    assert held and [s.step_id for s in b.turn.steps] == [s.step_id for s in a.turn.steps]
    turns.revert(held[0], *put_back, [step_a.step_id])
    turns.lock_for_resume(b, agent_id, _tool_step(turn_id, second_call, "B"))
    steps = api.get(f"{url}/{turn_id}").json()["steps"]
    assert [s["step_type"] for s in steps] == ["inference", "tool_execution"] * 2
    assert [s["tool_responses"][0]["content"] for s in steps[1::2]] == ["s", "B"]


def _unavailable_once(client, operation: str) -> list[str]:
    """Make the next `operation` on `client` fail as a throttled DynamoDB would, after the
    client's own retries; returns a list that records the failure."""
    failed: list[str] = []

    def fail(**_):
        if not failed:
            failed.append(operation)
            error = {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}
            raise ClientError(
                {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}, operation
            )

    client.meta.events.register(f"before-call.dynamodb.{operation}", fail)
    return failed


def test_dynamodb_unavailable_as_a_turn_starts_is_503_and_changes_nothing(api, model, dynamodb):
    agent_id, session_id = new_session(api)
    before = dynamodb.scan(TableName=TABLE)["Items"]
    failed = _unavailable_once(dynamodb, "UpdateItem")
    resp = api.post(turn_url(agent_id, session_id), json={"messages": [user("hi")]})
    assert failed and resp.status_code == 503 and "retry" in resp.json()["detail"]
    assert dynamodb.scan(TableName=TABLE)["Items"] == before
    assert (
        api.post(turn_url(agent_id, session_id), json={"messages": [user("hi")]}).status_code == 200
    )


def test_dynamodb_unavailable_as_a_turn_ends_fails_it_cleanly(api, model, dynamodb):
    """The answer cannot be stored: the stream ends with a 503 error naming the turn, which is
    stored as failed; the session is free, and the next turn's model never sees the lost one."""
    agent_id, session_id = new_session(api)
    url = turn_url(agent_id, session_id)
    failed = _unavailable_once(dynamodb, "TransactWriteItems")
    model.reply(text="lost answer")
    resp = api.post(url, json={"messages": [user("first")], "stream": True})
    events = sse_events(resp.text)
    assert failed and event_types(events)[-1] == "error"
    error = events[-1]["error"]
    assert error["status"] == 503 and error["turn_id"] == events[0]["event"]["payload"]["turn_id"]
    turn = api.get(f"{url}/{error['turn_id']}").json()
    assert turn["output_message"]["content"] == "lost answer"  # what the model said, kept
    assert [s["step_type"] for s in turn["steps"]] == ["inference"]  # with its step
    model.reply(text="second answer")
    assert api.post(url, json={"messages": [user("second")]}).status_code == 200
    users = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "user"]
    assert users == ["second"]


def test_dynamodb_unavailable_as_a_turn_pauses_fails_it_with_the_reply_that_called_the_tool(
    api, model, dynamodb
):
    """The pause (which stores the reply that called the client's tool) cannot be written: the
    turn is stored as failed with that reply as its step, and the session is free."""
    agent_id, session_id = new_session(api, client_tools=[WEATHER_TOOL])
    url = turn_url(agent_id, session_id)
    failed = _unavailable_once(dynamodb, "TransactWriteItems")
    model.reply(tool_calls=[("get_weather", '{"city": "Lima"}')])
    events = sse_events(api.post(url, json={"messages": [user("Lima?")], "stream": True}).text)
    assert failed and event_types(events)[-1] == "error"
    assert "step_complete" not in event_types(events)  # never stored as a pause's step
    turn = api.get(f"{url}/{events[-1]['error']['turn_id']}").json()
    assert [s["step_type"] for s in turn["steps"]] == ["inference"]
    assert turn["steps"][0]["model_response"]["tool_calls"][0]["tool_name"] == "get_weather"
    model.reply(text="ok")
    assert api.post(url, json={"messages": [user("again")]}).status_code == 200


def test_a_long_turn_keeps_its_session_past_its_lease(dynamodb, model):
    """A running turn renews its lease: a turn longer than the lease still holds its session
    (a second turn gets 409), while a dead one's lease would have run out."""
    model.reset()
    settings = Settings(
        table_name=TABLE,
        openai_base_url=model.url,
        turn_lease_seconds=2,
        inference_timeout_seconds=10,
    )
    app = create_app(agents_router, turns_router, services=build_services(settings, dynamodb))
    with TestClient(app) as api, ThreadPoolExecutor(1) as pool:
        agent_id, session_id = new_session(api)
        url = turn_url(agent_id, session_id)
        model.reply(text="slow answer", delay=6)  # three leases
        slow = pool.submit(api.post, url, json={"messages": [user("slow")]})
        key = {"PK": {"S": keys.session_pk("default", session_id)}, "SK": {"S": keys.SESSION}}
        while "active_turn" not in dynamodb.get_item(TableName=TABLE, Key=key)["Item"]:
            time.sleep(0.05)
        for _ in range(2):  # past the lease it took, then past a first renewal's
            time.sleep(2)
            assert api.post(url, json={"messages": [user("meanwhile")]}).status_code == 409
        done = slow.result()
        assert done.status_code == 200 and done.json()["output_message"]["content"] == "slow answer"


def test_a_turn_that_lost_its_session_says_so_and_stores_nothing(api, model, dynamodb):
    """Its lease ran out (say its Lambda was frozen) and another turn took the session: when it
    finishes, its end is refused whole and the client is told (409); the other turn holds on."""
    agent_id, session_id = new_session(api)
    url = turn_url(agent_id, session_id)
    model.reply(text="too late", delay=1.0)
    key = {"PK": {"S": keys.session_pk("default", session_id)}, "SK": {"S": keys.SESSION}}
    with ThreadPoolExecutor(1) as pool:
        late = pool.submit(api.post, url, json={"messages": [user("slow")], "stream": True})
        while "active_turn" not in dynamodb.get_item(TableName=TABLE, Key=key)["Item"]:
            time.sleep(0.05)
        # The turn waits on the model; its lease runs out, and another turn comes.
        dynamodb.update_item(
            TableName=TABLE,
            Key=key,
            UpdateExpression="SET lease_until = :past",
            ExpressionAttributeValues={":past": {"N": "0"}},
        )
        TurnStore(dynamodb, TABLE).lock_session(
            "default", agent_id, _running_turn("turn-b", session_id)
        )
        events = sse_events(late.result().text)
    error = events[-1]["error"]
    assert error["status"] == 409 and "lost its session" in error["message"]
    session = dynamodb.get_item(TableName=TABLE, Key=key)["Item"]
    assert session["active_turn"]["S"] == "turn-b"
    stored = api.get(f"{url}/{error['turn_id']}").json()  # as the taker recorded it: failed
    assert stored["input_messages"][0]["content"] == "slow"
    assert stored["output_message"]["content"] != "too late"


def test_an_agent_delete_refused_because_a_turn_runs_changes_nothing(api, services, dynamodb):
    """409, and the agent, its idle session (deleted first before) and the busy one all stay as
    they were: readable, listed, and taking turns."""
    agent_id, idle = new_session(api)
    busy = api.post(f"/v1/agents/{agent_id}/session", json={"session_name": "busy"}).json()
    busy_id = busy["session_id"]
    services.turns.lock_session("default", agent_id, _running_turn("turn-running", busy_id))

    def table():
        items = dynamodb.scan(TableName=TABLE)["Items"]
        return sorted(json.dumps(i, sort_keys=True) for i in items)

    before = table()
    resp = api.delete(f"/v1/agents/{agent_id}")
    assert resp.status_code == 409 and "running" in resp.json()["detail"]
    assert table() == before
    assert api.get(f"/v1/agents/{agent_id}").status_code == 200
    assert agent_id in [a["agent_id"] for a in api.get("/v1/agents").json()["data"]]
    listed = api.get(f"/v1/agents/{agent_id}/sessions").json()["data"]
    assert {s["session_id"] for s in listed} == {idle, busy_id}
    turn = api.post(turn_url(agent_id, idle), json={"messages": [user("still here?")]})
    assert turn.status_code == 200


def test_a_resumed_turn_whose_lambda_died_reads_as_ended_without_its_old_calls(
    api, services, dynamodb, model
):
    """Paused, resumed, then killed (its lease runs out) and taken over: the turn reads as
    ended, not as awaiting the calls it already had answered."""
    agent_id, session_id = new_session(api, client_tools=[WEATHER_TOOL])
    url = turn_url(agent_id, session_id)
    model.reply(tool_calls=[("get_weather", '{"city": "Bern"}')])
    paused = api.post(url, json={"messages": [user("Bern?")]}).json()
    call = paused["output_message"]["tool_calls"][0]
    step = ToolExecutionStep(
        turn_id=paused["turn_id"],
        step_id=new_id(),
        tool_calls=[ToolCall(**call)],
        tool_responses=[
            ToolResponse(call_id=call["call_id"], tool_name="get_weather", content="s")
        ],
    )
    read = services.turns.read_paused("default", agent_id, session_id, paused["turn_id"])
    services.turns.lock_for_resume(read, agent_id, step)  # its Lambda dies right after
    # The reply kept with the pause is an item of its own now, and is read once.
    running = api.get(f"{url}/{paused['turn_id']}").json()
    assert [s["step_type"] for s in running["steps"]] == ["inference", "tool_execution"]
    dynamodb.update_item(
        TableName=TABLE,
        Key={"PK": {"S": keys.session_pk("default", session_id)}, "SK": {"S": keys.SESSION}},
        UpdateExpression="SET lease_until = :past",
        ExpressionAttributeValues={":past": {"N": "0"}},
    )
    model.reply(text="Next.")
    assert api.post(url, json={"messages": [user("Anyone?")]}).status_code == 200
    dead = api.get(f"{url}/{paused['turn_id']}").json()
    assert dead["completed_at"] is not None
    assert dead["steps"] == running["steps"]
    assert dead["output_message"]["content"] == "" and not dead["output_message"].get("tool_calls")
    listed = api.get(f"/v1/agents/{agent_id}/session/{session_id}").json()["turns"][0]
    assert listed["completed_at"] == dead["completed_at"]
