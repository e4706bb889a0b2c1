"""The agents routes over HTTP (FastAPI TestClient): status codes, bodies, bad input."""

from __future__ import annotations

import pytest

from .conftest import TABLE, agent_config


def create_agent(api, **overrides) -> str:
    resp = api.post("/v1/agents", json={"agent_config": agent_config(**overrides)})
    assert resp.status_code == 200, resp.text
    return resp.json()["agent_id"]


def create_session(api, agent_id: str, name: str = "s") -> str:
    resp = api.post(f"/v1/agents/{agent_id}/session", json={"session_name": name})
    assert resp.status_code == 200, resp.text
    return resp.json()["session_id"]


def test_agent_lifecycle(api):
    agent_id = create_agent(api, name="helper", tool_choice="required")
    agent = api.get(f"/v1/agents/{agent_id}").json()
    assert agent["agent_id"] == agent_id
    assert agent["agent_config"]["name"] == "helper"
    assert agent["agent_config"]["tool_config"]["tool_choice"] == "required"
    assert agent["created_at"].endswith("Z")
    assert api.delete(f"/v1/agents/{agent_id}").status_code == 204
    missing = api.get(f"/v1/agents/{agent_id}")
    assert missing.status_code == 404
    assert agent_id in missing.json()["detail"]


def test_list_agents_pages_with_start_index_and_limit(api):
    ids = [create_agent(api) for _ in range(5)]
    body = api.get("/v1/agents", params={"start_index": 1, "limit": 2}).json()
    assert [a["agent_id"] for a in body["data"]] == ids[1:3]
    assert body["has_more"] is True
    body = api.get("/v1/agents", params={"start_index": 3}).json()
    assert [a["agent_id"] for a in body["data"]] == ids[3:]
    assert body["has_more"] is False


def test_sessions_lifecycle(api):
    agent_id = create_agent(api)
    first = create_session(api, agent_id, "first")
    second = create_session(api, agent_id, "second")
    listed = api.get(f"/v1/agents/{agent_id}/sessions").json()
    assert [s["session_id"] for s in listed["data"]] == [first, second]
    assert listed["data"][0]["session_name"] == "first"
    session = api.get(f"/v1/agents/{agent_id}/session/{first}").json()
    assert session == {**listed["data"][0], "turns": []}
    assert api.delete(f"/v1/agents/{agent_id}/session/{first}").status_code == 204
    assert api.get(f"/v1/agents/{agent_id}/session/{first}").status_code == 404
    assert [s["session_id"] for s in api.get(f"/v1/agents/{agent_id}/sessions").json()["data"]] == [
        second
    ]


def test_turn_ids_filter_accepts_repeated_and_comma_forms(api, services):
    from .test_store import make_turn, record_turn

    agent_id = create_agent(api)
    session_id = create_session(api, agent_id)
    turns = [make_turn(session_id, str(i)) for i in range(3)]
    for turn in turns:
        record_turn(services, "default", agent_id, turn)
    url = f"/v1/agents/{agent_id}/session/{session_id}"
    both = [turns[0].turn_id, turns[2].turn_id]
    for params in ({"turn_ids": both}, {"turn_ids": ",".join(both)}):
        got = api.get(url, params=params).json()["turns"]
        assert [t["turn_id"] for t in got] == both
    turn = api.get(f"{url}/turn/{turns[1].turn_id}").json()
    assert turn["output_message"]["content"] == "re: 1"
    step_id = turns[1].steps[0].step_id
    step = api.get(f"{url}/turn/{turns[1].turn_id}/step/{step_id}").json()
    assert step["step"]["step_type"] == "inference" and step["step"]["step_id"] == step_id


def test_turn_and_step_are_404_until_they_exist(api):
    agent_id = create_agent(api)
    session_id = create_session(api, agent_id)
    base = f"/v1/agents/{agent_id}/session/{session_id}/turn/t-1"
    assert api.get(base).status_code == 404
    assert api.get(f"{base}/step/p-1").status_code == 404


def test_validation_message_reaches_the_client(api):
    resp = api.post(
        "/v1/agents",
        json={
            "agent_config": agent_config(tool_choice="auto", tool_config={"tool_choice": "none"})
        },
    )
    assert resp.status_code == 400
    assert (
        "tool_choice is deprecated. Use tool_choice in tool_config instead."
        in resp.json()["detail"]
    )
    resp = api.post("/v1/agents", json={"agent_config": {"instructions": "x"}})
    assert resp.status_code == 400
    assert resp.json()["detail"] == "agent_config.model: Field required"


def test_bad_input_changes_nothing(api, dynamodb):
    from .conftest import TABLE

    agent_id = create_agent(api)
    before = dynamodb.scan(TableName=TABLE)["Items"]
    for body in ({}, {"agent_config": {"model": "m"}}, [], "x"):
        assert api.post("/v1/agents", json=body).status_code == 400
    assert (
        api.post(f"/v1/agents/{agent_id}/session", json={"name": "wrong field"}).status_code == 400
    )
    assert api.post("/v1/agents/missing/session", json={"session_name": "s"}).status_code == 404
    huge = agent_config(instructions="x" * 450_000)
    resp = api.post("/v1/agents", json={"agent_config": huge})
    assert resp.status_code == 413
    assert dynamodb.scan(TableName=TABLE)["Items"] == before


BAD_BODIES = [
    b"",
    b"{",
    b"null",
    b"[]",
    b'"text"',
    b"123",
    b'{"agent_config": null}',
    b'{"agent_config": {"model": 5, "instructions": []}}',
    b'{"session_name": {"nested": true}}',
    '{"session_name": "\udcff"}'.encode("utf-8", "surrogatepass"),
    b"\xff\xfe\x00",
    b'{"agent_config": {"model": "m", "instructions": "i", "sampling_params": {"max_tokens": -1}}}',
]
BAD_IDS = ["x" * 129, "a#b", "a%23b", "a.b", "a b", "ü", "%00", "a/b"]
BAD_QUERIES = [
    {"start_index": "-1"},
    {"start_index": "x"},
    {"limit": "0"},
    {"limit": "1001"},
    {"limit": "1.5"},
    {"start_index": "99999999999999999999999"},
]


@pytest.mark.parametrize("body", BAD_BODIES)
def test_no_body_makes_a_route_fail_with_500(api, body):
    agent_id = create_agent(api)
    for url in ("/v1/agents", f"/v1/agents/{agent_id}/session"):
        resp = api.post(url, content=body, headers={"content-type": "application/json"})
        assert resp.status_code in (400, 413), (url, body, resp.text)
        assert isinstance(resp.json()["detail"], str)


@pytest.mark.parametrize("bad", BAD_IDS)
def test_no_id_makes_a_route_fail_with_500(api, bad):
    agent_id = create_agent(api)
    session_id = create_session(api, agent_id)
    urls = [
        ("GET", f"/v1/agents/{bad}"),
        ("DELETE", f"/v1/agents/{bad}"),
        ("POST", f"/v1/agents/{bad}/session"),
        ("GET", f"/v1/agents/{bad}/sessions"),
        ("GET", f"/v1/agents/{agent_id}/session/{bad}"),
        ("DELETE", f"/v1/agents/{agent_id}/session/{bad}"),
        ("GET", f"/v1/agents/{agent_id}/session/{session_id}/turn/{bad}"),
        ("GET", f"/v1/agents/{agent_id}/session/{session_id}/turn/t/step/{bad}"),
    ]
    for method, url in urls:
        resp = api.request(method, url, json={"session_name": "s"})
        assert resp.status_code in (400, 404, 405), (method, url, resp.text)


@pytest.mark.parametrize("query", BAD_QUERIES)
def test_bad_query_values_are_400(api, query):
    agent_id = create_agent(api)
    for url in ("/v1/agents", f"/v1/agents/{agent_id}/sessions"):
        resp = api.get(url, params=query)
        assert resp.status_code == 400, (url, query, resp.text)
        assert "query." in resp.json()["detail"]


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "text/plain", None])
def test_a_body_sent_without_the_json_content_type_is_415_saying_which_is_expected(
    api, dynamodb, content_type
):
    """`curl -d` sends a form type; the answer says what to send, and nothing is created."""
    headers = {"content-type": content_type} if content_type else {}
    body = b'{"agent_config": {"model": "m", "instructions": "x"}}'
    resp = api.post("/v1/agents", content=body, headers=headers)
    assert resp.status_code == 415
    assert "Content-Type: application/json" in resp.json()["detail"]
    assert dynamodb.scan(TableName=TABLE)["Items"] == []
