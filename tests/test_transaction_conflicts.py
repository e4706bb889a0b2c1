"""DynamoDB cancels a transaction that meets another one in flight on its items with a
TransactionConflict reason: nothing written, no condition judged. (moto never does; a client that
says so stands in.) Racing resumes of one turn meet exactly this in AWS: a resume that keeps
meeting one is a 409, never a 404, and one that met it once is tried again and wins."""

from __future__ import annotations

import asyncio

import pytest
from agents_core.api.agents import AgentConfig, CreateAgentTurnRequest, ToolExecutionStep
from agents_core.api.common import ToolResponse
from agents_core.errors import Conflict
from agents_core.ids import new_id
from agents_core.services import build_services
from agents_core.settings import Settings
from agents_core.store.turns import TurnStore
from botocore.exceptions import ClientError

from .conftest import TABLE
from .turn_support import WEATHER_TOOL

TENANT = "acme"


class Conflicting:
    """A DynamoDB client whose first `times` transactions meet another one in flight."""

    def __init__(self, client, times: int) -> None:
        self.client, self.times, self.met = client, times, 0

    def __getattr__(self, name: str):
        return getattr(self.client, name)

    def transact_write_items(self, **kwargs):
        if self.met < self.times:
            self.met += 1
            reasons = [{"Code": "TransactionConflict", "Message": "in flight"}] + [
                {"Code": "None"} for _ in kwargs["TransactItems"][1:]
            ]
            error = {"Code": "TransactionCanceledException", "Message": "conflict"}
            raise ClientError(
                {"Error": error, "CancellationReasons": reasons}, "TransactWriteItems"
            )
        return self.client.transact_write_items(**kwargs)


@pytest.fixture
def paused(dynamodb, model):
    """(services, agent id, the paused turn as read for its resume, its tool step)."""
    model.reset()
    services = build_services(Settings(table_name=TABLE, openai_base_url=model.url), dynamodb)
    config = AgentConfig(model="m", instructions="Use tools.", client_tools=[WEATHER_TOOL])
    agent = services.agents.create_agent(TENANT, config)
    session = services.agents.create_session(TENANT, agent.agent_id, "s")
    model.reply(tool_calls=[("get_weather", '{"city": "Rome"}')])
    body = CreateAgentTurnRequest(messages=[{"role": "user", "content": "Weather?"}])

    async def pause():
        run = await services.engine.start_turn(TENANT, agent.agent_id, session.session_id, body)
        return await run.result()

    turn = asyncio.run(pause())
    read = services.turns.read_paused(TENANT, agent.agent_id, session.session_id, turn.turn_id)
    call = read.state.pending_calls[0]
    step = ToolExecutionStep(
        turn_id=turn.turn_id,
        step_id=new_id(),
        tool_calls=[call],
        tool_responses=[
            ToolResponse(call_id=call.call_id, tool_name=call.tool_name, content="25C")
        ],
    )
    return services, agent.agent_id, read, step


def tool_steps(services, agent_id: str, read) -> int:
    turn = services.turns.get_turn(TENANT, agent_id, read.turn.session_id, read.turn.turn_id)
    return [s.step_type for s in turn.steps].count("tool_execution")


def test_a_resume_that_meets_a_transaction_in_flight_is_tried_again_and_wins(paused, dynamodb):
    services, agent_id, read, step = paused
    client = Conflicting(dynamodb, times=1)
    TurnStore(client, TABLE).lock_for_resume(read, agent_id, step)
    assert client.met == 1
    assert tool_steps(services, agent_id, read) == 1


def test_a_resume_that_keeps_meeting_one_is_a_409_not_a_404_and_stores_nothing(paused, dynamodb):
    services, agent_id, read, step = paused
    with pytest.raises(Conflict):
        TurnStore(Conflicting(dynamodb, times=100), TABLE).lock_for_resume(read, agent_id, step)
    assert tool_steps(services, agent_id, read) == 0
