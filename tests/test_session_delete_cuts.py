"""A session delete cut short at any write (its Lambda timed out, crashed) leaves the session
either listed and readable, or gone: never listed but unreadable. A second delete finishes it."""

from __future__ import annotations

import pytest
from agents_core.api.agents import AgentConfig
from agents_core.errors import NotFound
from agents_core.store import keys
from agents_core.store.agents import AgentStore

from .conftest import TABLE

WRITES = {"update_item", "put_item", "delete_item", "batch_write_item", "transact_write_items"}


class Cut(BaseException):
    """The delete's process ends here: nothing after it runs."""


class CutAfter:
    """A DynamoDB client whose process ends before its write number `allowed` + 1."""

    def __init__(self, client, allowed: int) -> None:
        self.client, self.allowed, self.writes = client, allowed, 0

    def __getattr__(self, name: str):
        call = getattr(self.client, name)
        if name not in WRITES:
            return call

        def write(**kwargs):
            if self.writes == self.allowed:
                raise Cut
            self.writes += 1
            return call(**kwargs)

        return write


def _state(store: AgentStore, agent_id: str, session_id: str) -> str:
    listed = session_id in [s.session_id for s in store.list_sessions("t", agent_id, 0, 50)[0]]
    try:
        store.get_session("t", agent_id, session_id)
        readable = True
    except NotFound:
        readable = False
    return {(True, True): "there", (False, False): "gone"}.get((listed, readable), "torn")


@pytest.mark.parametrize("allowed", range(2))
def test_a_delete_cut_after_any_write_leaves_the_session_there_or_gone(dynamodb, allowed):
    store = AgentStore(dynamodb, TABLE)
    agent = store.create_agent("t", AgentConfig(model="m", instructions="x"))
    session = store.create_session("t", agent.agent_id, "s")
    with pytest.raises(Cut):
        AgentStore(CutAfter(dynamodb, allowed), TABLE).delete_session(
            "t", agent.agent_id, session.session_id
        )
    # Before its first write nothing changed; after it, the session is gone for every reader.
    assert _state(store, agent.agent_id, session.session_id) == (
        "there" if allowed == 0 else "gone"
    )
    store.delete_session("t", agent.agent_id, session.session_id)  # finishes what was cut
    assert _state(store, agent.agent_id, session.session_id) == "gone"
    left = [
        item["SK"]["S"]
        for pk in (keys.session_pk("t", session.session_id), keys.agent_pk("t", agent.agent_id))
        for item in dynamodb.query(
            TableName=TABLE,
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues={":pk": {"S": pk}},
        )["Items"]
    ]
    assert left == [keys.AGENT]  # the agent alone: no session item, no entry under the agent


def test_an_uncut_delete_takes_two_writes_and_leaves_nothing(dynamodb):
    """The cut points above are all there are: the mark, and the removal."""
    store = AgentStore(dynamodb, TABLE)
    agent = store.create_agent("t", AgentConfig(model="m", instructions="x"))
    session = store.create_session("t", agent.agent_id, "s")
    counting = CutAfter(dynamodb, 100)
    AgentStore(counting, TABLE).delete_session("t", agent.agent_id, session.session_id)
    assert counting.writes == 2
    assert _state(store, agent.agent_id, session.session_id) == "gone"
