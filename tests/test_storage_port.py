"""The engine's turn storage port, held to one contract by both implementations: DynamoDB (on moto)
and the in-memory one the engine tests run on. What the engine relies on must hold on both."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from agents_core.api.agents import AgentConfig, InferenceStep, ToolExecutionStep, Turn
from agents_core.api.common import CompletionMessage, ToolCall, ToolResponse, UserMessage
from agents_core.domain import AWAITING_INPUT, COMPLETED, FAILED, RUNNING, TurnState
from agents_core.errors import Conflict, NotFound
from agents_core.ids import new_id
from agents_core.store import keys
from agents_core.store.engine_storage import DynamoTurnStorage

from .conftest import TABLE
from .memory_storage import MemoryTurnStorage

TENANT = "tenant-a"
CALL = ToolCall(call_id="call-1", tool_name="get_weather", arguments={"city": "Paris"})


@dataclass
class Port:
    storage: MemoryTurnStorage | DynamoTurnStorage
    new_session: Callable[[], tuple[str, str]]  # -> (agent id, session id)
    expire_lease: Callable[[str], None]  # the running turn of this session stops renewing


@pytest.fixture(params=["memory", "dynamodb"])
def port(request) -> Port:
    config = AgentConfig(model="m", instructions="i")
    if request.param == "memory":
        memory = MemoryTurnStorage()

        def new_memory_session() -> tuple[str, str]:
            agent = memory.add_agent(TENANT, config)
            return agent.agent_id, memory.add_session(TENANT, agent.agent_id)

        def expire_memory_lease(session_id: str) -> None:
            memory.sessions[(TENANT, session_id)].lease_until = memory.clock() - 1

        return Port(memory, new_memory_session, expire_memory_lease)

    services, dynamodb = request.getfixturevalue("services"), request.getfixturevalue("dynamodb")

    def new_dynamo_session() -> tuple[str, str]:
        agent = services.agents.create_agent(TENANT, config)
        session = services.agents.create_session(TENANT, agent.agent_id, "s")
        return agent.agent_id, session.session_id

    def expire_dynamo_lease(session_id: str) -> None:
        dynamodb.update_item(
            TableName=TABLE,
            Key={"PK": {"S": keys.session_pk(TENANT, session_id)}, "SK": {"S": keys.SESSION}},
            UpdateExpression="SET lease_until = :past",
            ExpressionAttributeValues={":past": {"N": "1"}},
        )

    storage = DynamoTurnStorage(services.agents, services.turns)
    return Port(storage, new_dynamo_session, expire_dynamo_lease)


def new_turn(session_id: str, text: str = "Weather in Paris?") -> Turn:
    return Turn(
        turn_id=new_id(),
        session_id=session_id,
        input_messages=[UserMessage(content=text)],
        steps=[],
        output_message=CompletionMessage(content="", stop_reason="end_of_message"),
        started_at=datetime.now(UTC),
    )


def reply(turn: Turn, text: str = "", calls: list[ToolCall] | None = None) -> InferenceStep:
    stop = "end_of_message" if calls else "end_of_turn"
    message = CompletionMessage(content=text, stop_reason=stop, tool_calls=calls or [])
    return InferenceStep(turn_id=turn.turn_id, step_id=new_id(), model_response=message)


def results(turn: Turn, content: str = "sunny") -> ToolExecutionStep:
    answer = ToolResponse(call_id=CALL.call_id, tool_name="get_weather", content=content)
    return ToolExecutionStep(
        turn_id=turn.turn_id, step_id=new_id(), tool_calls=[CALL], tool_responses=[answer]
    )


async def start(port: Port, agent_id: str, turn: Turn):
    lock = await port.storage.lock_session(TENANT, agent_id, turn)
    await port.storage.turn_started(lock, turn)
    return lock


async def pause(port: Port, agent_id: str, session_id: str):
    """A turn whose model called the client's tool, stored as the engine pauses it."""
    turn = new_turn(session_id)
    lock = await start(port, agent_id, turn)
    step = reply(turn, calls=[CALL])
    await port.storage.save_step(lock, step)
    turn.steps.append(step)
    turn.output_message = step.model_response
    state = TurnState(AWAITING_INPUT, iterations=1, pending_calls=[CALL])
    await port.storage.end_turn(lock, turn, state)
    return await port.storage.read_paused(TENANT, agent_id, session_id, turn.turn_id)


def step_ids(turn: Turn) -> list[str]:
    return [s.step_id for s in turn.steps]


def test_a_session_takes_one_turn_at_a_time_and_a_missing_or_foreign_one_is_not_found(port):
    agent_id, session_id = port.new_session()
    other_agent, _ = port.new_session()

    async def scenario():
        lock = await start(port, agent_id, new_turn(session_id))
        with pytest.raises(Conflict, match="busy"):
            await port.storage.lock_session(TENANT, agent_id, new_turn(session_id))
        with pytest.raises(NotFound):
            await port.storage.lock_session(TENANT, agent_id, new_turn("no-such-session"))
        with pytest.raises(NotFound):
            await port.storage.lock_session(TENANT, other_agent, new_turn(session_id))
        with pytest.raises(NotFound):
            await port.storage.agent(TENANT, "no-such-agent")
        return lock

    lock = asyncio.run(scenario())
    assert (lock.session_id, lock.previous_turn) == (session_id, None)


def test_a_completed_turn_frees_its_session_and_only_completed_turns_make_the_history(port):
    agent_id, session_id = port.new_session()
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]

    async def scenario():
        first = new_turn(session_id, "Hi")
        lock = await start(port, agent_id, first)
        assert await port.storage.extend_lease(lock)
        called, answer = reply(first, calls=[CALL]), reply(first, "Hello")
        await port.storage.save_step(lock, called)
        first.steps += [called, answer]
        first.output_message = answer.model_response
        await port.storage.end_turn(
            lock, first, TurnState(COMPLETED, iterations=2), history=messages, steps=(answer,)
        )
        assert not await port.storage.extend_lease(lock)  # it holds the session no more

        failing = new_turn(session_id, "Boom")
        second = await start(port, agent_id, failing)
        await port.storage.end_turn(second, failing, TurnState(FAILED, error="boom"))
        third = await port.storage.lock_session(TENANT, agent_id, new_turn(session_id))
        history = await port.storage.history(TENANT, session_id, third.previous_turn)
        stored = await port.storage.turn(TENANT, agent_id, session_id, first.turn_id)
        return first, second, third, history, stored, called, answer

    first, second, third, history, stored, called, answer = asyncio.run(scenario())
    assert second.previous_turn == first.turn_id and third.previous_turn == second.turn_id
    assert history == messages
    assert step_ids(stored) == [called.step_id, answer.step_id]
    assert stored.output_message.content == "Hello"


def test_a_dead_turns_lease_running_out_lets_the_next_turn_take_over_and_refuses_its_end(port):
    agent_id, session_id = port.new_session()

    async def scenario():
        dead = new_turn(session_id, "Slow")
        dead_lock = await start(port, agent_id, dead)
        port.expire_lease(session_id)
        taker = await start(port, agent_id, new_turn(session_id))
        answer = reply(dead, "Too late")
        dead.steps.append(answer)
        with pytest.raises(Conflict, match="lost its session"):
            await port.storage.end_turn(
                dead_lock, dead, TurnState(COMPLETED), history=[], steps=(answer,)
            )
        stored = await port.storage.read_paused(TENANT, agent_id, session_id, dead.turn_id)
        holds = await port.storage.extend_lease(taker), await port.storage.extend_lease(dead_lock)
        history = await port.storage.history(TENANT, session_id, taker.previous_turn)
        return stored, holds, history

    stored, holds, history = asyncio.run(scenario())
    assert stored.state.status == FAILED  # recorded so by the turn that took over
    assert stored.turn.steps == [] and stored.turn.output_message.content == ""
    assert holds == (True, False)
    assert history == []


def test_a_paused_turn_parks_its_session_until_one_resume_takes_it_back(port):
    agent_id, session_id = port.new_session()
    other_agent, _ = port.new_session()

    async def scenario():
        paused = await pause(port, agent_id, session_id)
        with pytest.raises(Conflict, match="awaiting tool responses"):
            await port.storage.lock_session(TENANT, agent_id, new_turn(session_id))
        step = results(paused.turn)
        with pytest.raises(NotFound):
            await port.storage.lock_for_resume(paused, other_agent, step)
        lock = await port.storage.lock_for_resume(paused, agent_id, step)
        with pytest.raises(Conflict, match="not awaiting input"):
            await port.storage.lock_for_resume(paused, agent_id, results(paused.turn))
        running = await port.storage.read_paused(TENANT, agent_id, session_id, paused.turn.turn_id)
        return paused, step, lock, running

    paused, step, lock, running = asyncio.run(scenario())
    assert paused.state == TurnState(AWAITING_INPUT, iterations=1, pending_calls=[CALL])
    assert paused.turn.output_message.tool_calls == [CALL] and paused.last_turn is None
    assert lock.turn_id == paused.turn.turn_id
    assert running.state.status == RUNNING
    assert step_ids(running.turn) == step_ids(paused.turn) + [step.step_id]


def test_a_revert_puts_a_resumed_turn_back_as_it_was_paused(port):
    agent_id, session_id = port.new_session()

    async def scenario():
        paused = await pause(port, agent_id, session_id)
        step = results(paused.turn)
        lock = await port.storage.lock_for_resume(paused, agent_id, step)
        later = reply(paused.turn, calls=[CALL])
        await port.storage.save_step(lock, later)
        await port.storage.revert(lock, paused.turn, paused.state, [step.step_id, later.step_id])
        again = await port.storage.read_paused(TENANT, agent_id, session_id, paused.turn.turn_id)
        retried = await port.storage.lock_for_resume(again, agent_id, results(again.turn))
        return paused, again, retried

    paused, again, retried = asyncio.run(scenario())
    assert again.turn == paused.turn and again.state == paused.state
    assert retried.turn_id == paused.turn.turn_id  # resumable again


def test_a_missing_turn_or_session_is_not_found_when_read(port):
    agent_id, session_id = port.new_session()

    async def scenario():
        with pytest.raises(NotFound):
            await port.storage.read_paused(TENANT, agent_id, session_id, "no-such-turn")
        with pytest.raises(NotFound):
            await port.storage.turn(TENANT, agent_id, "no-such-session", "no-such-turn")
        turn = new_turn(session_id)
        await start(port, agent_id, turn)
        return await port.storage.turn(TENANT, agent_id, session_id, turn.turn_id), turn

    running, turn = asyncio.run(scenario())
    assert running.turn_id == turn.turn_id and running.input_messages == turn.input_messages


def test_a_revert_refused_because_the_turn_lost_its_session_changes_nothing(port):
    """The port's promise (engine/storage.py): a method that raises changed nothing. A queued
    resume that ran past its lease, lost its session, then saw its model fail must not delete
    the steps the failed turn keeps (its tool results among them)."""
    agent_id, session_id = port.new_session()

    async def scenario():
        paused = await pause(port, agent_id, session_id)
        step = results(paused.turn)
        lock = await port.storage.lock_for_resume(paused, agent_id, step)
        later = reply(paused.turn, calls=[CALL])
        await port.storage.save_step(lock, later)
        port.expire_lease(session_id)
        await start(port, agent_id, new_turn(session_id))  # takes the session over
        with pytest.raises(Conflict):
            await port.storage.revert(
                lock, paused.turn, paused.state, [step.step_id, later.step_id]
            )
        turn_id = paused.turn.turn_id
        return paused, step, later, await port.storage.turn(TENANT, agent_id, session_id, turn_id)

    paused, step, later, kept = asyncio.run(scenario())
    assert step_ids(kept) == step_ids(paused.turn) + [step.step_id, later.step_id]
