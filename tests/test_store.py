"""The single-table store against moto: keys, order, cascades, TTL, size limits."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from agents_core.api.agents import AgentConfig, InferenceStep, ToolExecutionStep, Turn
from agents_core.api.common import CompletionMessage, ToolCall, ToolResponse, UserMessage
from agents_core.domain import COMPLETED, TurnState
from agents_core.errors import NotFound, TooLarge
from agents_core.ids import new_id
from agents_core.store import keys
from agents_core.store.history_cache import History, HistoryCache

from .conftest import TABLE


def config(**kw) -> AgentConfig:
    return AgentConfig(**{"model": "m", "instructions": "i", **kw})


def make_turn(session_id: str, text: str = "hello") -> Turn:
    turn_id = new_id()
    call = ToolCall(call_id="c1", tool_name="lookup", arguments={"q": text})
    return Turn(
        turn_id=turn_id,
        session_id=session_id,
        input_messages=[UserMessage(content=text)],
        steps=[
            InferenceStep(
                turn_id=turn_id,
                step_id=new_id(),
                model_response=CompletionMessage(
                    content="", stop_reason="end_of_message", tool_calls=[call]
                ),
            ),
            ToolExecutionStep(
                turn_id=turn_id,
                step_id=new_id(),
                tool_calls=[call],
                tool_responses=[ToolResponse(call_id="c1", tool_name="lookup", content="found")],
            ),
        ],
        output_message=CompletionMessage(content=f"re: {text}", stop_reason="end_of_turn"),
        started_at=datetime.now(UTC),
    )


def record_turn(services, tenant: str, agent_id: str, turn: Turn) -> None:
    """Store a finished turn the way the engine does: lock, steps, then the turn with the release."""
    turns = services.turns
    lock = turns.lock_session(tenant, agent_id, turn)
    for step in turn.steps:
        turns.save_step(lock, step)
    turns.end_turn(lock, turn, TurnState(COMPLETED, iterations=1), history=[])


def all_items(dynamodb):
    return dynamodb.scan(TableName=TABLE)["Items"]


def test_ids_sort_in_creation_order():
    ids = [new_id() for _ in range(2000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


def test_agents_list_in_creation_order_with_offset_pages(store):
    created = [store.create_agent("t1", config(name=f"a{i}")).agent_id for i in range(7)]
    store.create_agent("t2", config())
    page, more = store.list_agents("t1", 0, 3)
    assert [a.agent_id for a in page] == created[:3] and more
    page, more = store.list_agents("t1", 3, 3)
    assert [a.agent_id for a in page] == created[3:6] and more
    page, more = store.list_agents("t1", 6, 3)
    assert [a.agent_id for a in page] == created[6:] and not more
    assert store.list_agents("t1", 50, 3) == ([], False)


def test_tenant_is_the_first_part_of_every_key(store, dynamodb, services):
    agent = store.create_agent("acme", config())
    session = store.create_session("acme", agent.agent_id, "s")
    record_turn(services, "acme", agent.agent_id, make_turn(session.session_id))
    for item in all_items(dynamodb):
        assert item["PK"]["S"].startswith("T#acme#")
        if "GSI1PK" in item:
            assert item["GSI1PK"]["S"].startswith("T#acme#")
    with pytest.raises(NotFound):
        store.get_agent("other", agent.agent_id)
    with pytest.raises(NotFound):
        store.get_session("other", agent.agent_id, session.session_id)


def test_tenant_separator_cannot_forge_another_tenants_key():
    assert keys.agent_pk("a#AGENT#x", "y") != keys.agent_pk("a", "x#AGENT#y")
    assert keys.agent_pk("a%23b", "x") != keys.agent_pk("a#b", "x")


def test_session_holds_turns_and_steps_in_order(store, services):
    agent = store.create_agent("t", config(enable_session_persistence=True))
    session = store.create_session("t", agent.agent_id, "chat")
    turns = [make_turn(session.session_id, f"msg {i}") for i in range(3)]
    for turn in turns:
        record_turn(services, "t", agent.agent_id, turn)
    loaded = store.get_session("t", agent.agent_id, session.session_id)
    assert [t.turn_id for t in loaded.turns] == [t.turn_id for t in turns]
    assert loaded.turns[1] == turns[1]
    only = store.get_session("t", agent.agent_id, session.session_id, [turns[2].turn_id])
    assert [t.turn_id for t in only.turns] == [turns[2].turn_id]
    assert (
        services.turns.get_turn("t", agent.agent_id, session.session_id, turns[0].turn_id)
        == turns[0]
    )
    step = turns[0].steps[1]
    assert (
        services.turns.get_step(
            "t", agent.agent_id, session.session_id, turns[0].turn_id, step.step_id
        )
        == step
    )


def test_a_turn_id_prefix_does_not_match_another_turn(store, services):
    agent = store.create_agent("t", config())
    session = store.create_session("t", agent.agent_id, "chat")
    turn = make_turn(session.session_id)
    record_turn(services, "t", agent.agent_id, turn)
    with pytest.raises(NotFound):
        services.turns.get_turn("t", agent.agent_id, session.session_id, turn.turn_id[:8])


def test_session_must_belong_to_the_agent_in_the_path(store):
    a1 = store.create_agent("t", config())
    a2 = store.create_agent("t", config())
    session = store.create_session("t", a1.agent_id, "s")
    with pytest.raises(NotFound):
        store.get_session("t", a2.agent_id, session.session_id)
    with pytest.raises(NotFound):
        store.delete_session("t", a2.agent_id, session.session_id)
    assert store.get_session("t", a1.agent_id, session.session_id).session_name == "s"


def test_delete_session_removes_its_turns_and_steps(store, dynamodb, services):
    agent = store.create_agent("t", config())
    keep = store.create_session("t", agent.agent_id, "keep")
    gone = store.create_session("t", agent.agent_id, "gone")
    for _ in range(15):  # more items than one BatchWriteItem takes
        record_turn(services, "t", agent.agent_id, make_turn(gone.session_id))
    record_turn(services, "t", agent.agent_id, make_turn(keep.session_id))
    store.delete_session("t", agent.agent_id, gone.session_id)
    remaining = {i["PK"]["S"] for i in all_items(dynamodb)}
    assert not any(gone.session_id in pk for pk in remaining)
    assert [s.session_id for s in store.list_sessions("t", agent.agent_id, 0, 10)[0]] == [
        keep.session_id
    ]
    assert len(store.get_session("t", agent.agent_id, keep.session_id).turns) == 1


def test_delete_agent_removes_sessions_turns_and_steps(store, dynamodb, services):
    agent = store.create_agent("t", config())
    other = store.create_agent("t", config())
    for name in ("a", "b"):
        session = store.create_session("t", agent.agent_id, name)
        record_turn(services, "t", agent.agent_id, make_turn(session.session_id))
    other_session = store.create_session("t", other.agent_id, "x")
    store.delete_agent("t", agent.agent_id)
    items = all_items(dynamodb)
    assert all(agent.agent_id not in i["PK"]["S"] for i in items)
    # Only the other agent and its session (item plus entry under the agent) remain.
    assert len(items) == 3
    assert store.get_session("t", other.agent_id, other_session.session_id).session_name == "x"
    with pytest.raises(NotFound):
        store.get_agent("t", agent.agent_id)
    with pytest.raises(NotFound):
        store.delete_agent("t", agent.agent_id)


def test_a_deleting_agent_takes_no_new_sessions_and_a_retry_finishes(store, dynamodb):
    agent = store.create_agent("t", config())
    session = store.create_session("t", agent.agent_id, "s")
    # A delete cut short after marking the agent: it is gone for readers and writers...
    dynamodb.update_item(
        TableName=TABLE,
        Key={"PK": {"S": keys.agent_pk("t", agent.agent_id)}, "SK": {"S": keys.AGENT}},
        UpdateExpression="SET deleting = :t",
        ExpressionAttributeValues={":t": {"BOOL": True}},
    )
    with pytest.raises(NotFound):
        store.create_session("t", agent.agent_id, "late")
    assert store.list_agents("t", 0, 10) == ([], False)
    # ...and deleting it again finishes the cascade.
    store.delete_agent("t", agent.agent_id)
    assert all(session.session_id not in i["PK"]["S"] for i in all_items(dynamodb))


def test_ephemeral_sessions_carry_ttl_and_vanish_when_expired(store, dynamodb, services):
    ephemeral = store.create_agent("t", config(enable_session_persistence=False))
    durable = store.create_agent("t", config(enable_session_persistence=True))
    s1 = store.create_session("t", ephemeral.agent_id, "e")
    s2 = store.create_session("t", durable.agent_id, "d")
    record_turn(services, "t", ephemeral.agent_id, make_turn(s1.session_id))
    items = all_items(dynamodb)
    eph = [i for i in items if s1.session_id in i["PK"]["S"] + i["SK"]["S"]]
    assert len(eph) == 5 and all("expires_at" in i for i in eph)  # session, entry, turn, 2 steps
    assert all(int(i["expires_at"]["N"]) > time.time() + 3000 for i in eph)
    assert not any("expires_at" in i for i in items if s2.session_id in i["PK"]["S"] + i["SK"]["S"])
    # Past its time, an item not yet removed by TTL is already gone for readers.
    for item in eph:
        dynamodb.update_item(
            TableName=TABLE,
            Key={"PK": item["PK"], "SK": item["SK"]},
            UpdateExpression="SET expires_at = :past",
            ExpressionAttributeValues={":past": {"N": str(int(time.time()) - 1)}},
        )
    with pytest.raises(NotFound):
        store.get_session("t", ephemeral.agent_id, s1.session_id)
    assert store.list_sessions("t", ephemeral.agent_id, 0, 10) == ([], False)


def test_oversized_agent_is_refused_and_nothing_is_written(store, dynamodb):
    with pytest.raises(TooLarge):
        store.create_agent("t", config(instructions="x" * 420_000))
    assert all_items(dynamodb) == []


def test_remembered_histories_are_bounded_in_sessions_and_bytes():
    cache = HistoryCache(max_sessions=2, max_bytes=100)
    cache.put("a", History("TURN#1", [{"role": "user", "content": "a"}], 40))
    cache.put("b", History("TURN#1", [], 40))
    assert cache.get("a") is not None  # now the most recently used
    cache.put("c", History("TURN#1", [], 40))  # three sessions, 120 bytes: b goes
    assert cache.get("b") is None and cache.get("a") and cache.get("c")
    cache.put("a", History("TURN#2", [], 70))  # replaces a; 110 bytes: c goes
    assert cache.get("c") is None and cache.get("a").after == "TURN#2"
    cache.put("huge", History("TURN#1", [], 101))  # larger than the whole budget: not kept
    assert cache.get("huge") is None and cache.get("a") is not None
