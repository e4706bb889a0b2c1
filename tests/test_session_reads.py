"""Turn and session reads sized for a buffered Lambda (6 MB): a big turn read back whole, an
answer stored once, a long session read in bounded pages, and a warm container's memory of
finished turns never hiding a change."""

from __future__ import annotations

import base64
import json
import random
import zlib

import pytest
from agents_core.services import build_services
from agents_core.settings import Settings
from agents_core.store.items import (
    MAX_ITEM_BYTES,
    decode,
    deflate,
    encode,
    inline_attrs,
    item_size,
)
from agents_core.store.stream_events import _DICTIONARY as STREAM_DICTIONARY
from agents_core.web.agents import router as agents_router
from agents_core.web.app import create_app
from agents_core.web.reads import escaped_size
from agents_core.web.turns import resume_router, turns_router
from fastapi.testclient import TestClient

from .conftest import TABLE
from .turn_support import WEATHER_TOOL, new_session, turn_url, user

LAMBDA_LIMIT = 6 * 1024 * 1024


def client(dynamodb, model, **settings) -> TestClient:
    model.reset()
    config = Settings(
        table_name=TABLE, openai_base_url=model.url, inference_timeout_seconds=5, **settings
    )
    app = create_app(
        agents_router, turns_router, resume_router, services=build_services(config, dynamodb)
    )
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture
def api(dynamodb, model):
    with client(dynamodb, model) as api:
        yield api


def run_turn(api, model, agent_id: str, session_id: str, text: str, answer: str) -> dict:
    model.reply(text=answer, chunks=1)
    resp = api.post(turn_url(agent_id, session_id), json={"messages": [user(text)]})
    assert resp.status_code == 200, resp.text[:300]
    return resp.json()


def session_url(agent_id: str, session_id: str) -> str:
    return f"/v1/agents/{agent_id}/session/{session_id}"


def all_items(dynamodb) -> list[dict]:
    pages = dynamodb.get_paginator("scan").paginate(TableName=TABLE)
    return [item for page in pages for item in page["Items"]]


def lambda_payload_size(body: bytes) -> int:
    """What a buffered Lambda returns for this body: the proxy response, body escaped."""
    return len(json.dumps({"statusCode": 200, "headers": {}, "body": body.decode()}))


def test_a_5_mb_message_reads_back_whole_under_the_lambda_limit(api, model, dynamodb):
    agent_id, session_id = new_session(api)
    # Random text: stored compressed, words that repeat would fit one item.
    text = base64.b64encode(random.Random(5).randbytes(5 * 1024 * 1024 * 3 // 4)).decode()
    created = run_turn(api, model, agent_id, session_id, text, "Noted.")

    got = api.get(f"{turn_url(agent_id, session_id)}/{created['turn_id']}")
    assert got.status_code == 200
    assert got.json()["input_messages"][0]["content"] == text
    assert got.json()["output_message"]["content"] == "Noted."
    assert lambda_payload_size(got.content) < LAMBDA_LIMIT
    session = api.get(session_url(agent_id, session_id))
    assert session.status_code == 200
    assert [t["turn_id"] for t in session.json()["turns"]] == [created["turn_id"]]
    assert lambda_payload_size(session.content) < LAMBDA_LIMIT
    # Stored in parts, each item under DynamoDB's 400 KB.
    items = all_items(dynamodb)
    assert max(item_size(item) for item in items) <= MAX_ITEM_BYTES
    # The message is kept once, though the turn's body and its history both hold it.
    assert len(text) < sum(item_size(item) for item in items) < 1.1 * len(text)


def test_an_answer_is_stored_once_and_read_back_in_both_places(api, model, dynamodb):
    agent_id, session_id = new_session(api)
    answer = "The answer is a zebra-7f3 " * 40
    created = run_turn(api, model, agent_id, session_id, "hi", answer)

    turn_items = [item for item in all_items(dynamodb) if item["SK"]["S"].startswith("TURN#")]
    (item,) = turn_items
    assert (
        inline_attrs(item)["body"].count("zebra-7f3") == 40
    )  # once: in the step, not in the output
    got = api.get(f"{turn_url(agent_id, session_id)}/{created['turn_id']}").json()
    assert got["output_message"] == got["steps"][-1]["model_response"] == created["output_message"]
    assert got["output_message"]["content"] == answer
    session = api.get(session_url(agent_id, session_id)).json()
    assert session["turns"] == [got]


def test_a_turn_too_large_for_one_read_is_413_and_its_steps_stay_readable(dynamodb, model):
    with client(dynamodb, model, max_read_bytes=100_000, max_streamed_read_bytes=100_000) as api:
        agent_id, session_id = new_session(api)
        created = run_turn(api, model, agent_id, session_id, "q" * 40_000, "a" * 40_000)
        turn = api.get(f"{turn_url(agent_id, session_id)}/{created['turn_id']}")
        assert turn.status_code == 413
        step_id = created["steps"][0]["step_id"]
        assert created["turn_id"] in turn.json()["detail"] and step_id in turn.json()["detail"]
        session = api.get(session_url(agent_id, session_id))
        assert session.status_code == 413
        step = api.get(f"{turn_url(agent_id, session_id)}/{created['turn_id']}/step/{step_id}")
        assert step.status_code == 200
        assert step.json()["step"]["model_response"]["content"] == "a" * 40_000


def test_a_long_session_reads_in_pages_that_stay_under_the_read_size(dynamodb, model):
    max_bytes = 30_000
    with client(dynamodb, model, max_read_bytes=max_bytes) as api:
        agent_id, session_id = new_session(api, client_tools=[WEATHER_TOOL])
        ids = []
        for n in range(24):
            if n % 6 == 5:  # some turns pause on a client tool and resume: step items apart
                model.reply(tool_calls=[("get_weather", '{"city": "Paris"}')])
                paused = api.post(
                    turn_url(agent_id, session_id), json={"messages": [user("weather?")]}
                ).json()
                call = paused["output_message"]["tool_calls"][0]
                model.reply(text="Sunny " * 200)
                answer = {"call_id": call["call_id"], "tool_name": "get_weather", "content": "18C"}
                resumed = api.post(
                    f"{turn_url(agent_id, session_id)}/{paused['turn_id']}/resume",
                    json={"tool_responses": [answer]},
                )
                assert resumed.status_code == 200, resumed.text
                ids.append(paused["turn_id"])
            else:
                ids.append(
                    run_turn(api, model, agent_id, session_id, f"n{n}", "x" * 1200)["turn_id"]
                )

        pages, after = [], None
        while True:
            params = {"starting_after": after} if after else {}
            resp = api.get(session_url(agent_id, session_id), params=params)
            assert resp.status_code == 200
            assert escaped_size(resp.text) <= max_bytes
            page = resp.json()
            pages.append(page)
            if not page.get("has_more"):
                break
            assert page["has_more"] is True and page["turns"]
            after = page["turns"][-1]["turn_id"]
    assert len(pages) >= 3
    read = [t for page in pages for t in page["turns"]]
    assert [t["turn_id"] for t in read] == ids
    tool_turns = [t for t in read if len(t["steps"]) == 3]
    assert len(tool_turns) == 4  # their step items came with them
    assert all(t["steps"][1]["tool_responses"][0]["content"] == "18C" for t in tool_turns)
    assert "has_more" not in pages[-1]


def test_limit_and_starting_after_page_the_turns_and_a_whole_read_keeps_the_contract(api, model):
    agent_id, session_id = new_session(api)
    ids = [
        run_turn(api, model, agent_id, session_id, f"q{n}", f"a{n}")["turn_id"] for n in range(5)
    ]
    url = session_url(agent_id, session_id)
    whole = api.get(url).json()
    assert set(whole) == {"session_id", "session_name", "turns", "started_at"}
    assert [t["turn_id"] for t in whole["turns"]] == ids
    first = api.get(url, params={"limit": 2}).json()
    assert [t["turn_id"] for t in first["turns"]] == ids[:2] and first["has_more"] is True
    rest = api.get(url, params={"limit": 3, "starting_after": ids[1]}).json()
    assert [t["turn_id"] for t in rest["turns"]] == ids[2:] and "has_more" not in rest
    both = api.get(url, params={"turn_ids": f"{ids[4]},{ids[0]}", "limit": 1}).json()
    assert [t["turn_id"] for t in both["turns"]] == [ids[0]] and both["has_more"] is True
    for bad in ({"limit": 0}, {"limit": 1001}, {"starting_after": "a#b"}):
        assert api.get(url, params=bad).status_code == 400


def test_a_warm_read_sees_every_change_after_an_earlier_read(api, model):
    """The store remembers finished turns only: a new turn, a pause and its resume, and a
    deleted session all show on the next read of the same container."""
    agent_id, session_id = new_session(api, client_tools=[WEATHER_TOOL])
    url = session_url(agent_id, session_id)
    first = run_turn(api, model, agent_id, session_id, "one", "first answer")
    assert [t["turn_id"] for t in api.get(url).json()["turns"]] == [first["turn_id"]]

    model.reply(tool_calls=[("get_weather", '{"city": "Oslo"}')])
    paused = api.post(turn_url(agent_id, session_id), json={"messages": [user("two")]}).json()
    turns = api.get(url).json()["turns"]
    assert [t["turn_id"] for t in turns] == [first["turn_id"], paused["turn_id"]]
    assert turns[1]["output_message"]["tool_calls"] and turns[1]["completed_at"] is None

    call = paused["output_message"]["tool_calls"][0]
    model.reply(text="Cold in Oslo.")
    api.post(
        f"{turn_url(agent_id, session_id)}/{paused['turn_id']}/resume",
        json={
            "tool_responses": [
                {"call_id": call["call_id"], "tool_name": "get_weather", "content": "-3C"}
            ]
        },
    )
    turns = api.get(url).json()["turns"]
    assert turns[1]["output_message"]["content"] == "Cold in Oslo."
    assert [s["step_type"] for s in turns[1]["steps"]] == [
        "inference",
        "tool_execution",
        "inference",
    ]
    third = run_turn(api, model, agent_id, session_id, "three", "third answer")
    turns = api.get(url).json()["turns"]
    assert [t["turn_id"] for t in turns] == [first["turn_id"], paused["turn_id"], third["turn_id"]]
    assert turns[0] == api.get(url, params={"limit": 1}).json()["turns"][0]

    assert api.delete(url).status_code == 204
    assert api.get(url).status_code == 404


def test_a_warm_page_of_one_oversized_remembered_turn_is_413_not_an_empty_page(dynamodb, model):
    with client(dynamodb, model, max_read_bytes=60_000) as api:
        agent_id, session_id = new_session(api)
        small = run_turn(api, model, agent_id, session_id, "small", "ok")
        big = run_turn(api, model, agent_id, session_id, "b" * 70_000, "ok")
        url = session_url(agent_id, session_id)
        store = api.app.state.services.agents
        whole = store.session_page("default", agent_id, session_id)  # now remembers both
        assert [t.turn_id for t in whole.session.turns] == [small["turn_id"], big["turn_id"]]
        first = api.get(url).json()
        assert [t["turn_id"] for t in first["turns"]] == [small["turn_id"]]
        assert first["has_more"] is True
        again = api.get(url, params={"starting_after": small["turn_id"]})
        assert again.status_code == 413 and big["turn_id"] in again.json()["detail"]


def test_a_record_in_parts_keeps_long_texts_once_and_content_that_looks_like_a_marker_intact():
    long = "a long text " * 40_000
    body = {
        "input": long,
        "arguments": {"$shared": 0},
        "nested": [{"$literal": {"$shared": 1}}, long],
    }
    attrs = {"body": json.dumps(body), "history": json.dumps([{"content": long}])}
    items = encode({"PK": {"S": "p"}, "SK": {"S": "TURN#t"}}, attrs)
    assert sum(item_size(item) for item in items) < 1.05 * len(long)
    ((head, back),) = list(decode(items))
    assert head["SK"]["S"] == "TURN#t"
    assert json.loads(back["body"]) == body
    assert json.loads(back["history"]) == [{"content": long}]


def test_a_turn_past_a_buffered_lambdas_6_mb_reads_whole_from_the_streaming_turns_function(
    dynamodb, model
):
    """GET turn and GET step are served by the turns function, whose answers stream (no 6 MB
    bound): a turn of 1 MB asked and 7 MB answered reads back whole there, and so does its
    answer's step alone; a session read, buffered on the agents function, answers 413 naming
    the turn to read alone."""
    with client(dynamodb, model) as api:
        agent_id, session_id = new_session(api)
        question, answer = "q" * (1024 * 1024), "a" * (7 * 1024 * 1024)
        created = run_turn(api, model, agent_id, session_id, question, answer)
        session = api.get(session_url(agent_id, session_id))
    assert session.status_code == 413
    assert f"GET .../turn/{created['turn_id']}" in session.json()["detail"]
    config = Settings(table_name=TABLE, openai_base_url=model.url)
    turns_only = create_app(turns_router, services=build_services(config, dynamodb))
    url = f"{turn_url(agent_id, session_id)}/{created['turn_id']}"
    with TestClient(turns_only) as streamed:
        read = streamed.get(url)
        step = streamed.get(f"{url}/step/{created['steps'][-1]['step_id']}")
    assert read.status_code == 200 and len(read.content) > 8 * 1024 * 1024
    turn = read.json()
    assert turn["input_messages"][0]["content"] == question
    assert turn["output_message"]["content"] == answer
    assert step.status_code == 200 and len(step.content) > LAMBDA_LIMIT
    assert step.json()["step"]["model_response"]["content"] == answer


def test_a_long_json_attribute_is_stored_compressed_and_read_back_as_text():
    key = {"PK": {"S": "p"}, "SK": {"S": "STEP#1"}}
    body = json.dumps({"text": "a turn's words, said again and again " * 40})
    (item,) = encode(key, {"body": body})
    assert "B" in item["body"] and len(item["body"]["B"]) < len(body) / 4
    ((_, attrs),) = decode([item])
    assert attrs["body"] == body
    assert inline_attrs(item)["body"] == body
    (short,) = encode(key, {"body": '{"iterations": 1}'})
    assert short["body"] == {"S": '{"iterations": 1}'}  # short: as it is


def test_a_records_json_attributes_are_compressed_together_so_what_they_share_is_stored_once():
    """A turn's body and history hold the same answer: one stream stores it once."""
    key = {"PK": {"S": "p"}, "SK": {"S": "TURN#1"}}
    answer = " ".join(f"word{n * 7919 % 10007}" for n in range(400))  # compresses about 3x
    body = json.dumps({"output_message": {"role": "assistant", "content": answer}})
    history = json.dumps([{"role": "assistant", "content": answer}])
    attrs = {"body": body, "state": '{"iterations": 1}', "history": history, "trace": "[]"}
    (item,) = encode(key, attrs, {"turn_status": {"S": "completed"}})
    assert set(item) == {"PK", "SK", "turn_status", "packed"}
    alone = [encode(key, {name: text})[0][name] for name, text in (("b", body), ("h", history))]
    apart = sum(len(value.get("B", b"")) for value in alone)
    assert len(item["packed"]["B"]) < apart * 0.6  # the answer once, not twice
    ((head, read),) = decode([item])
    assert read == {**attrs, "turn_status": "completed"} and head["SK"] == key["SK"]
    earlier = {**key, "body": {"B": zlib.compress(body.encode())}, "history": {"S": history}}
    assert inline_attrs(earlier) == {"body": body, "history": history}  # as stored before
    (short,) = encode(key, {"body": "{}", "state": "{}"})  # nothing to gain: as they are
    assert short["body"] == {"S": "{}"} and short["state"] == {"S": "{}"}


@pytest.mark.parametrize("size", [0, 300, 1_700, 1_800, 5_000, 40_000, 300_000])
@pytest.mark.parametrize("zdict", [b"", STREAM_DICTIONARY], ids=["plain", "with_dictionary"])
def test_a_small_windowed_stream_is_as_small_as_zlibs_default_and_reads_back_with_it(size, zdict):
    """`deflate` sizes zlib's window to the data: the stream is the default one's size, and
    readers that know nothing of it (zlib's default window) read it back."""
    data = " ".join(f"word{n * 7919 % 10007}" for n in range(size // 9 + 1)).encode()[:size]
    ours = deflate(data, zdict)
    default = zlib.compressobj(6, zdict=zdict) if zdict else zlib.compressobj(6)
    assert len(ours) == len(default.compress(data) + default.flush())
    reader = zlib.decompressobj(zdict=zdict) if zdict else zlib.decompressobj()
    assert reader.decompress(ours) + reader.flush() == data


@pytest.mark.parametrize(("chars", "compressed"), [(300, False), (900, False), (1_000, True)])
def test_a_record_is_compressed_only_when_its_text_would_take_more_than_one_write_unit(
    chars, compressed
):
    """One write unit either way costs a zlib pass for nothing; past it, compression pays."""
    key = {"PK": {"S": "T#t#RESPONSE#r"}, "SK": {"S": "RESPONSE"}}
    body = json.dumps({"text": "lorem ipsum " * 200})[: chars - 2] + '"}'
    (item,) = encode(key, {"body": body}, {"status": {"S": "in_progress"}})
    assert ("B" in item["body"]) is compressed
    assert (item_size({**key, "status": {"S": "in_progress"}, "body": {"S": body}}) > 1024) is (
        compressed
    )
    assert inline_attrs(item) == {"body": body, "status": "in_progress"}


def test_a_turn_of_the_cost_benchs_shape_ends_in_an_item_of_one_kilobyte(api, model, dynamodb):
    """bench/cost.py's turn (a 1,000-character answer in 250 deltas, its trace kept) writes its
    end item in a transaction, which bills each kilobyte twice: past 1 KB the turn costs 7.8
    write units, not its goal's 6."""
    text = "lorem ipsum dolor sit amet, " * 42
    agent_id, session_id = new_session(api, enable_session_persistence=True)
    for n in range(3):
        model.reply(text=text[:1000], chunks=250)
        question = {"messages": [user(f"question {n}: {text[:80]}")], "stream": True}
        with api.stream("POST", turn_url(agent_id, session_id), json=question) as resp:
            assert resp.status_code == 200 and "turn_complete" in resp.read().decode()
    turns = [i for i in all_items(dynamodb) if i["SK"]["S"].startswith("TURN#")]
    assert len(turns) == 3
    for turn in turns:
        attrs = inline_attrs(turn)
        assert json.loads(attrs["trace"]) and text[:1000] in attrs["history"]
        assert item_size(turn) <= 1024
