"""The agent loop and its two faces (Agents API turns, Responses API responses) over the in-memory
storage port and a scripted in-process model: no moto, no HTTP, no sleeps. The end-to-end tests on
moto (test_turns.py, test_responses.py, ...) check the same paths through the real store."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import pytest
from agents_core.api.agents import AgentConfig, CreateAgentTurnRequest, Step, Turn
from agents_core.api.common import ToolResponse, UserMessage
from agents_core.api.responses import CreateOpenaiResponseRequest
from agents_core.domain import AWAITING_INPUT, COMPLETED, FAILED, RUNNING
from agents_core.engine import loop as L
from agents_core.engine.responses import ResponsesEngine
from agents_core.engine.turns import TurnEngine
from agents_core.errors import (
    Conflict,
    InvalidRequest,
    NotFound,
    RunFailed,
    Unauthenticated,
    UpstreamFailed,
    UpstreamTimeout,
)
from agents_core.inference import types as model
from agents_core.inference.types import ChatMessage, ChatRequest, ChatToolCall, Usage
from pydantic import TypeAdapter

from .memory_storage import MemoryResponseStorage, MemoryTurnStorage
from .turn_support import WEATHER_TOOL

TENANT = "tenant-a"
PARIS = '{"city": "Paris"}'

# --- a scripted model -----------------------------------------------------------------------


class ScriptedModel:
    """A provider replaying one scripted reply per model call: its events in order, an exception
    raised where it stands, an async function awaited where it stands (something that happens
    while the model is busy). Keeps each request as it was sent, and how it was sent."""

    name = "scripted"

    def __init__(self, *replies: list[Any]) -> None:
        self.replies = list(replies)
        self.requests: list[ChatRequest] = []
        self.calls: list[str] = []  # "stream" or "complete", per model call
        self.refusal: str | None = None  # what `check` refuses, if anything

    def check(self, request: ChatRequest) -> None:
        if self.refusal:
            raise InvalidRequest(self.refusal)

    async def stream(self, request: ChatRequest):
        for event in self._next(request, "stream"):
            if await _happens(event):
                yield event

    async def complete(self, request: ChatRequest) -> list[model.ChatEvent]:
        return [event for event in self._next(request, "complete") if await _happens(event)]

    def _next(self, request: ChatRequest, how: str) -> list[Any]:
        self.requests.append(copy.deepcopy(request))
        self.calls.append(how)
        assert self.replies, "the model was called more often than scripted"
        return self.replies.pop(0)


async def _happens(event: Any) -> bool:
    """Raise or run a scripted happening; True for a model event to pass on."""
    if isinstance(event, Exception):
        raise event
    if callable(event):
        await event()
        return False
    return True


def says(*pieces: str, finish: str = "stop", usage: Usage | None = None) -> list[Any]:
    return [model.TextDelta(p) for p in pieces] + [model.Finish(finish, usage)]


def calls(*tool_calls: tuple[str, str, str], text: str = "") -> list[Any]:
    """A reply calling tools, given as (call id, name, arguments); each call's arguments arrive
    in two pieces, as a streaming model sends them."""
    events: list[Any] = [model.TextDelta(text)] if text else []
    for index, (call_id, name, arguments) in enumerate(tool_calls):
        half = len(arguments) // 2
        events.append(model.ToolCallDelta(index, call_id, name, arguments[:half]))
        events.append(model.ToolCallDelta(index, arguments=arguments[half:]))
    return events + [model.Finish("tool_calls")]


class Models:
    """The model router: every model is the scripted one."""

    def __init__(self, provider: ScriptedModel) -> None:
        self.provider = provider

    def resolve(self, name: str) -> tuple[ScriptedModel, str]:
        return self.provider, f"{name}-id"


def conversation(request: ChatRequest) -> list[tuple[str, str]]:
    """What the model was sent, as (role, content) pairs."""
    return [(m.role, m.content) for m in request.messages]


# --- the Agents API face ----------------------------------------------------------------------


class Announcements:
    """The lifecycle publisher, as a bus subscriber sees it: each pause's resume token."""

    def __init__(self) -> None:
        self.tokens: dict[str, str] = {}

    async def publish(self, status: str, detail: dict[str, Any]) -> None:
        if "resume_token" in detail:
            self.tokens[detail["turn_id"]] = detail["resume_token"]


@dataclass
class Agents:
    storage: MemoryTurnStorage
    model: ScriptedModel
    engine: TurnEngine
    agent_id: str
    session_id: str
    announced: Announcements

    async def start(self, text: str, stream: bool = False):
        body = CreateAgentTurnRequest(messages=[UserMessage(content=text)], stream=stream)
        return await self.engine.start_turn(TENANT, self.agent_id, self.session_id, body)

    async def resume(self, turn_id: str, content: str, stream: bool = False, **kw: Any):
        paused = await self.read(turn_id)
        answers = [
            ToolResponse(call_id=c.call_id, tool_name=c.tool_name, content=content)
            for c in paused.state.pending_calls
        ]
        if kw.get("queued"):  # a queued resume carries the token its pause announced
            kw.setdefault("resume_token", self.announced.tokens.get(turn_id))
        return await self.engine.resume_turn(
            TENANT, self.agent_id, self.session_id, turn_id, answers, stream, **kw
        )

    async def ask(self, text: str) -> Turn:
        """A turn run to its end (or pause) by a client that does not stream."""
        return await (await self.start(text)).result()

    async def answer(self, turn_id: str, content: str, **kw: Any) -> Turn:
        return await (await self.resume(turn_id, content, **kw)).result()

    async def read(self, turn_id: str):
        """The stored turn and its state (the port's read for a resume reads both)."""
        return await self.storage.read_paused(TENANT, self.agent_id, self.session_id, turn_id)

    async def lock(self, turn_id: str):
        """Take the session for another turn, as a second request would."""
        turn = Turn(
            turn_id=turn_id,
            session_id=self.session_id,
            input_messages=[UserMessage(content="meanwhile")],
            steps=[],
            output_message={"content": "", "stop_reason": "end_of_message"},
            started_at=L.now(),
        )
        lock = await self.storage.lock_session(TENANT, self.agent_id, turn)
        await self.storage.turn_started(lock, turn)
        return lock


def agents(*replies: list[Any], storage: MemoryTurnStorage | None = None, **config: Any) -> Agents:
    storage = storage or MemoryTurnStorage()
    scripted = ScriptedModel(*replies)
    config = {"model": "m", "instructions": "Be brief.", "client_tools": [WEATHER_TOOL], **config}
    agent = storage.add_agent(TENANT, AgentConfig.model_validate(config))
    session_id = storage.add_session(TENANT, agent.agent_id)
    announced = Announcements()
    engine = TurnEngine(storage, Models(scripted), publisher=announced)
    return Agents(storage, scripted, engine, agent.agent_id, session_id, announced)


async def chunks(run) -> list[Any]:
    return [item async for item in run.events()]


def kinds(items: list[Any]) -> list[str]:
    """Each stream item's payload event_type (`step_start:inference` for steps); a failure as
    `error <status>`."""
    out = []
    for item in items:
        if isinstance(item, RunFailed):
            out.append(f"error {item.status}")
            continue
        payload = item.event.payload
        step_type = getattr(payload, "step_type", None)
        out.append(f"{payload.event_type}:{step_type}" if step_type else payload.event_type)
    return out


def final_turn(items: list[Any]) -> Turn:
    return items[-1].event.payload.turn


def test_a_plain_answer_completes_the_turn_with_its_step_and_the_history_grows():
    world = agents(says("Hel", "lo"), says("Again."))

    async def scenario():
        items = await chunks(await world.start("Hi", stream=True))
        turn = final_turn(items)
        stored = await world.read(turn.turn_id)
        history = await world.storage.history(TENANT, world.session_id, turn.turn_id)
        second = await world.ask("Once more")
        return items, turn, stored, history, second

    items, turn, stored, history, second = asyncio.run(scenario())
    assert kinds(items) == [
        "turn_start",
        "step_start:inference",
        "step_progress:inference",
        "step_progress:inference",
        "step_complete:inference",
        "turn_complete",
    ]
    assert [i.event.payload.delta.text for i in items[2:4]] == ["Hel", "lo"]
    assert turn.output_message.content == "Hello"
    assert turn.output_message.stop_reason == "end_of_turn"
    assert stored.turn == turn and [s.step_type for s in stored.turn.steps] == ["inference"]
    assert (stored.state.status, stored.state.iterations) == (COMPLETED, 1)
    assert history == [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    # The next turn's model sees the agent's instructions, the history, then the new message;
    # it is called without streaming, as its client does not stream.
    assert second.output_message.content == "Again."
    assert conversation(world.model.requests[1]) == [
        ("system", "Be brief."),
        ("user", "Hi"),
        ("assistant", "Hello"),
        ("user", "Once more"),
    ]
    assert world.model.calls == ["stream", "complete"]
    assert world.model.requests[0].model == "m-id"


def test_a_client_tool_pauses_the_turn_and_a_resume_completes_it_counting_iterations_across():
    world = agents(calls(("call-1", "get_weather", PARIS)), says("Sunny in Paris."))

    async def scenario():
        paused_items = await chunks(await world.start("Weather in Paris?", stream=True))
        turn_id = final_turn(paused_items).turn_id
        paused = await world.read(turn_id)
        with pytest.raises(Conflict, match="awaiting tool responses"):
            await world.lock("another-turn")
        resumed_items = await chunks(await world.resume(turn_id, "sunny", stream=True))
        done = await world.read(turn_id)
        history = await world.storage.history(TENANT, world.session_id, turn_id)
        return paused_items, paused, resumed_items, done, history

    paused_items, paused, resumed_items, done, history = asyncio.run(scenario())
    assert kinds(paused_items) == [
        "turn_start",
        "step_start:inference",
        "step_progress:inference",  # the arguments' first piece
        "step_progress:inference",  # and second
        "step_progress:inference",  # the whole call, parsed
        "step_complete:inference",
        "turn_awaiting_input",
    ]
    assert paused.state.status == AWAITING_INPUT and paused.state.iterations == 1
    assert [(c.call_id, c.tool_name, c.arguments) for c in paused.state.pending_calls] == [
        ("call-1", "get_weather", {"city": "Paris"})
    ]
    assert paused.turn.output_message.tool_calls == paused.state.pending_calls
    assert kinds(resumed_items) == [
        "turn_start",
        "step_start:tool_execution",
        "step_complete:tool_execution",
        "step_start:inference",
        "step_progress:inference",
        "step_complete:inference",
        "turn_complete",
    ]
    assert final_turn(resumed_items).output_message.content == "Sunny in Paris."
    assert done.state.status == COMPLETED and done.state.pending_calls == []
    assert done.state.iterations == 2  # one call before the pause, one after
    assert [s.step_type for s in done.turn.steps] == ["inference", "tool_execution", "inference"]
    sent = world.model.requests[1].messages
    assert sent[-2].tool_calls == [ChatToolCall("call-1", "get_weather", PARIS)]
    assert sent[-1] == ChatMessage("tool", "sunny", tool_call_id="call-1")
    # The whole turn joins the session's history: the question, the call, its result, the answer.
    assert [ChatMessage.from_dict(m) for m in history] == sent[1:] + [
        ChatMessage("assistant", "Sunny in Paris.")
    ]


def test_a_warm_container_reads_the_agent_once_and_a_refused_lock_beside_it_still_refuses():
    """The first run reads the agent beside its first request; later turns and resumes use
    the copy the storage has at hand. A busy session is refused either way."""
    world = agents(says("One."), calls(("call-1", "get_weather", PARIS)), says("Sunny."))

    async def scenario():
        await world.ask("first")
        after_first = world.storage.agent_reads
        paused = await world.ask("Weather in Paris?")
        await world.answer(paused.turn_id, "sunny")
        lock = await world.lock("another-turn")
        with pytest.raises(Conflict, match="busy"):
            await world.start("meanwhile")
        await world.storage.release(lock)
        return after_first, world.storage.agent_reads

    after_first, reads = asyncio.run(scenario())
    assert (after_first, reads) == (1, 1)


def test_a_refused_resume_changes_nothing_and_a_finished_turn_cannot_be_resumed():
    world = agents(calls(("call-1", "get_weather", PARIS)), says("Sunny."))

    async def scenario():
        turn = await world.ask("Weather?")
        wrong = [ToolResponse(call_id="call-9", tool_name="get_weather", content="?")]
        with pytest.raises(InvalidRequest, match="call-1"):
            await world.engine.resume_turn(
                TENANT, world.agent_id, world.session_id, turn.turn_id, wrong, False
            )
        world.model.refusal = "this model takes no tool results today"
        with pytest.raises(InvalidRequest, match="no tool results"):
            await world.resume(turn.turn_id, "sunny")  # refused after the session was taken
        world.model.refusal = None
        unchanged = await world.read(turn.turn_id)
        await world.answer(turn.turn_id, "sunny")
        with pytest.raises(Conflict, match="not awaiting input"):
            await world.resume(turn.turn_id, "sunny")
        with pytest.raises(NotFound):
            await world.resume("no-such-turn", "sunny")
        return unchanged

    unchanged = asyncio.run(scenario())
    assert unchanged.state.status == AWAITING_INPUT and len(unchanged.turn.steps) == 1
    assert len(world.model.requests) == 2  # the pause and the one resume that ran


def test_a_call_to_an_unknown_tool_gets_an_error_result_and_the_loop_goes_on():
    world = agents(calls(("call-1", "launch_rockets", '{"count": 3}')), says("I cannot."))

    async def scenario():
        items = await chunks(await world.start("Launch!", stream=True))
        return items, await world.read(final_turn(items).turn_id)

    items, stored = asyncio.run(scenario())
    assert kinds(items) == [
        "turn_start",
        "step_start:inference",
        "step_progress:inference",
        "step_progress:inference",
        "step_progress:inference",
        "step_complete:inference",
        "step_start:tool_execution",
        "step_progress:tool_execution",
        "step_complete:tool_execution",
        "step_start:inference",
        "step_progress:inference",
        "step_complete:inference",
        "turn_complete",
    ]
    error = "Unknown tool `launch_rockets` was called."
    assert world.model.requests[1].messages[-1] == ChatMessage("tool", error, tool_call_id="call-1")
    tool_step = stored.turn.steps[1]
    assert [(r.call_id, r.content) for r in tool_step.tool_responses] == [("call-1", error)]
    assert stored.state.status == COMPLETED
    assert stored.turn.output_message.content == "I cannot."


def test_the_iteration_budget_ends_the_turn_out_of_tokens():
    rockets = calls(("call-1", "launch_rockets", "{}"))
    world = agents(rockets, copy.deepcopy(rockets), max_infer_iters=2)

    async def scenario():
        items = await chunks(await world.start("Launch!", stream=True))
        return items, await world.read(final_turn(items).turn_id)

    items, stored = asyncio.run(scenario())
    assert kinds(items)[-4:] == [
        "step_start:tool_execution",
        "step_progress:tool_execution",
        "step_complete:tool_execution",
        "turn_complete",
    ]
    assert len(world.model.calls) == 2
    assert stored.state.status == COMPLETED and stored.state.iterations == 2
    assert stored.turn.output_message.stop_reason == "out_of_tokens"
    assert [s.step_type for s in stored.turn.steps] == ["inference", "tool_execution"] * 2


def test_the_iteration_budget_counts_the_model_calls_made_before_a_pause():
    world = agents(
        calls(("call-1", "get_weather", PARIS)),
        calls(("call-2", "launch_rockets", "{}")),
        max_infer_iters=2,
    )

    async def scenario():
        turn = await world.ask("Weather?")
        await world.answer(turn.turn_id, "sunny")
        return await world.read(turn.turn_id)

    done = asyncio.run(scenario())
    assert len(world.model.calls) == 2  # one before the pause, one after: the budget is spent
    assert done.state.status == COMPLETED and done.state.iterations == 2
    assert done.turn.output_message.stop_reason == "out_of_tokens"


@pytest.mark.parametrize(
    ("error", "status"),
    [(UpstreamFailed("the model failed"), 502), (UpstreamTimeout("the model timed out"), 504)],
)
def test_a_model_failure_fails_the_turn_and_frees_the_session(error, status):
    world = agents([model.TextDelta("Half an ans"), error], says("Fine."))

    async def scenario():
        items = await chunks(await world.start("First", stream=True))
        failed = items[-1]
        stored = await world.read(failed.ids["turn_id"])
        second = await world.ask("Second")
        return items, stored, second

    items, stored, second = asyncio.run(scenario())
    assert kinds(items) == [
        "turn_start",
        "step_start:inference",
        "step_progress:inference",
        f"error {status}",
    ]
    failed = items[-1]
    assert (failed.status, failed.message, failed.retry) == (status, str(error), False)
    assert (stored.state.status, stored.state.error) == (FAILED, str(error))
    assert stored.turn.steps == [] and stored.turn.completed_at is not None
    # The session is free, and the failed turn adds nothing to the next turn's conversation.
    assert second.output_message.content == "Fine."
    assert conversation(world.model.requests[1]) == [("system", "Be brief."), ("user", "Second")]


def test_a_failed_turn_raises_its_status_to_a_caller_that_does_not_stream():
    world = agents([UpstreamTimeout("too slow")])

    async def scenario():
        run = await world.start("Hi")
        with pytest.raises(RunFailed) as failed:
            await run.result()
        return run.turn.turn_id, failed.value

    turn_id, failed = asyncio.run(scenario())
    assert failed.status == 504 and failed.ids == {"turn_id": turn_id}
    assert failed.body() == {"detail": "too slow", "turn_id": turn_id}


def refused_with_nothing_stored(world: Agents, match: str) -> None:
    """A turn refused with a 400 before anything ran: no model call, nothing of it stored, and
    its session free for the next turn."""

    async def scenario():
        with pytest.raises(InvalidRequest, match=match):
            await world.start("Hi")
        return await world.lock("next-turn")  # the session was released

    assert asyncio.run(scenario()).turn_id == "next-turn"
    assert world.storage.turns[(TENANT, world.session_id)].keys() == {"next-turn"}
    assert world.model.requests == []


def test_a_request_the_model_cannot_serve_is_refused_before_anything_is_stored():
    world = agents()
    world.model.refusal = "this model takes no images"
    refused_with_nothing_stored(world, "no images")


def test_a_turn_for_an_agent_that_is_gone_is_not_found_and_leaves_the_session_free():
    world = agents()
    del world.storage.agents[(TENANT, world.agent_id)]

    async def scenario():
        with pytest.raises(NotFound, match=world.agent_id):
            await world.start("Hi")
        return await world.lock("next-turn")

    assert asyncio.run(scenario()).turn_id == "next-turn"
    assert world.model.requests == []


@pytest.mark.parametrize("token", [None, "", "not-the-token"])
def test_a_queued_resume_without_the_pauses_token_is_refused_with_nothing_stored(token):
    world = agents(calls(("call-1", "get_weather", PARIS)), says("Sunny."))

    async def scenario():
        turn = await world.ask("Weather?")
        before = await world.read(turn.turn_id)
        with pytest.raises(Unauthenticated):
            await world.resume(turn.turn_id, "sunny", queued=True, resume_token=token)
        after = await world.read(turn.turn_id)
        done = await world.answer(turn.turn_id, "sunny", queued=True)  # the announced token
        return before, after, done

    before, after, done = asyncio.run(scenario())
    assert after.turn == before.turn and after.state == before.state
    assert after.state.status == AWAITING_INPUT
    assert done.output_message.content == "Sunny."


def resume_fails_at_once():
    """A turn that pauses on a client tool, whose resume's model call fails, then answers."""
    return agents(
        calls(("call-1", "get_weather", PARIS)),
        [UpstreamFailed("the model failed")],
        says("Sunny."),
    )


def test_a_queued_resume_whose_model_fails_at_once_goes_back_to_awaiting_input_unchanged():
    """The resume wrote only the tool results when the model failed: they go, and the turn
    awaits the same input again (SQS redelivers the message)."""
    world = resume_fails_at_once()

    async def scenario():
        turn = await world.ask("Weather?")
        before = await world.read(turn.turn_id)
        steps_before = copy.deepcopy(world.storage.steps)
        items = await chunks(await world.resume(turn.turn_id, "sunny", queued=True))
        after = await world.read(turn.turn_id)
        steps_after = copy.deepcopy(world.storage.steps)
        retried = await world.answer(turn.turn_id, "sunny", queued=True)
        return before, steps_before, items, after, steps_after, retried

    before, steps_before, items, after, steps_after, retried = asyncio.run(scenario())
    assert kinds(items)[-2:] == ["step_start:inference", "error 502"]
    assert items[-1].retry is True
    assert after.turn == before.turn
    assert dataclasses.replace(after.state, events=before.state.events) == before.state
    # Only the count of its stream's events went on: the next run numbers its events after them.
    assert after.state.events == before.state.events + len(items)
    # No tool results stay; the reply the paused turn kept may stay as a record of its own too
    # (the turn reads it once), as the table's store leaves it for a racing resume.
    own = {step.step_id: step for step in before.turn.steps}
    for key, records in steps_after.items():
        extra = {i: r for i, r in records.items() if i not in steps_before.get(key, {})}
        assert all(TypeAdapter(Step).validate_json(r) == own.get(i) for i, r in extra.items())
    assert retried.output_message.content == "Sunny."
    assert world.model.replies == []


def test_a_reverted_resume_writes_back_the_turn_as_it_was_read_not_as_the_run_left_it():
    """The turn the revert writes is the paused one: the tool results the resume added to its
    steps are not in it (they are removed apart)."""
    world = resume_fails_at_once()
    reverted = []
    revert = world.storage.revert

    async def recording(lock, turn, state, step_ids):
        reverted.append((turn.model_copy(deep=True), step_ids))
        await revert(lock, turn, state, step_ids)

    world.storage.revert = recording

    async def scenario():
        turn = await world.ask("Weather?")
        paused = await world.read(turn.turn_id)
        await chunks(await world.resume(turn.turn_id, "sunny", queued=True))
        return paused

    paused = asyncio.run(scenario())
    [(turn, step_ids)] = reverted
    assert [s.step_id for s in turn.steps] == [s.step_id for s in paused.turn.steps]
    assert turn.output_message == paused.turn.output_message
    assert len(step_ids) == 1 and step_ids[0] not in {s.step_id for s in turn.steps}


def test_a_queued_resume_whose_model_fails_after_steps_of_its_own_is_parked_after_them():
    """The resume wrote the tool results, a reply calling a tool and that tool's result before
    the model failed: undoing them would run the tool again on the retry, so the turn is
    parked after them (awaiting no call, a continuation token) and its continuation goes on
    from there, each tool run once."""
    world = agents(
        calls(("call-1", "get_weather", PARIS)),
        calls(("call-2", "launch_rockets", "{}")),
        [UpstreamFailed("the model failed")],
        says("Sunny."),
    )

    async def scenario():
        turn = await world.ask("Weather?")
        before = await world.read(turn.turn_id)
        run = await world.resume(turn.turn_id, "sunny", queued=True)
        items = await chunks(run)
        parked = await world.read(turn.turn_id)
        with pytest.raises(Conflict, match="awaiting tool responses"):
            await world.lock("another-turn")
        with pytest.raises(Unauthenticated):  # the pause's own token no longer resumes it
            await world.answer(turn.turn_id, "sunny", queued=True)
        continued = await world.engine.resume_turn(
            TENANT,
            world.agent_id,
            world.session_id,
            turn.turn_id,
            [],
            False,
            queued=True,
            resume_token=run.continuation_token,
        )
        return before, items, parked, await continued.result()

    before, items, parked, finished = asyncio.run(scenario())
    assert kinds(items)[-2:] == ["step_start:inference", "error 502"]
    assert items[-1].retry is True
    assert parked.state.status == AWAITING_INPUT and parked.state.pending_calls == []
    new_steps = [s.step_type for s in parked.turn.steps[len(before.turn.steps) :]]
    assert new_steps == ["tool_execution", "inference", "tool_execution"]
    assert finished.output_message.content == "Sunny."
    rockets = [
        call.call_id
        for step in finished.steps
        if step.step_type == "tool_execution"
        for call in step.tool_calls
        if call.tool_name == "launch_rockets"
    ]
    assert rockets == ["call-2"]
    assert world.model.replies == []


def test_a_direct_resume_whose_model_fails_fails_the_turn():
    world = agents(calls(("call-1", "get_weather", PARIS)), [UpstreamFailed("boom")], says("Ok."))

    async def scenario():
        turn = await world.ask("Weather?")
        with pytest.raises(RunFailed) as failed:
            await world.answer(turn.turn_id, "sunny")
        stored = await world.read(turn.turn_id)
        next_turn = await world.ask("Next")
        return failed.value, stored, next_turn

    failed, stored, next_turn = asyncio.run(scenario())
    assert (failed.status, failed.retry) == (502, False)
    assert stored.state.status == FAILED
    assert [s.step_type for s in stored.turn.steps] == ["inference", "tool_execution"]
    assert next_turn.output_message.content == "Ok."


def test_a_running_turn_reads_as_running_until_it_ends():
    """The port makes a started turn readable at once (a client that lost the stream fetches it)."""
    world = agents(says("Done."))
    seen: list[Any] = []

    async def peek():
        (turn_id,) = world.storage.turns[(TENANT, world.session_id)]
        seen.append((await world.read(turn_id)).state.status)

    world.model.replies[0].insert(0, peek)

    async def scenario():
        return await world.ask("Hi")

    turn = asyncio.run(scenario())
    assert seen == [RUNNING] and turn.output_message.content == "Done."


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_turn_that_lost_its_session_answers_409_and_stores_nothing():
    """Its lease ran out while the model worked (a frozen Lambda, say) and another turn took the
    session: its end is refused whole, and the other turn keeps the session."""
    clock = Clock()
    storage = MemoryTurnStorage(clock=clock)
    other: list[Any] = []

    async def another_turn_takes_over():
        clock.now += 3600  # past the lease
        other.append(await world.lock("other-turn"))

    world = agents(
        [model.TextDelta("Too late"), another_turn_takes_over, model.Finish("stop")],
        storage=storage,
    )

    async def scenario():
        items = await chunks(await world.start("Slow question", stream=True))
        lost = await world.read(items[0].event.payload.turn_id)
        other_holds = await storage.extend_lease(other[0])
        with pytest.raises(Conflict, match="busy with turn other-turn"):
            await world.lock("third-turn")
        return items, lost, other_holds

    items, lost, other_holds = asyncio.run(scenario())
    assert kinds(items) == [
        "turn_start",
        "step_start:inference",
        "step_progress:inference",
        "error 409",
    ]
    assert "lost its session" in items[-1].message
    # Recorded failed by the turn that took over; nothing of the late answer was stored.
    assert lost.state.status == FAILED and lost.turn.steps == []
    assert lost.turn.output_message.content == ""
    assert other_holds
    assert storage.sessions[(TENANT, world.session_id)].last_turn is None


# --- the loop itself: server-side tools ---------------------------------------------------------


class Tool:
    """A server-side tool (`ServerTool`) answering `result`, or raising it."""

    def __init__(self, result: str | Exception) -> None:
        self.result = result
        self.arguments: list[str] = []

    async def call(self, arguments: str) -> str:
        self.arguments.append(arguments)
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


async def loop_events(loop: L.AgentLoop) -> list[L.LoopEvent]:
    return [event async for event in loop.run()]


def agent_loop(scripted: ScriptedModel, tools: L.Tools) -> L.AgentLoop:
    request = ChatRequest(model="m", messages=[ChatMessage("user", "What time is it?")])
    return L.AgentLoop(scripted, request, tools, max_iterations=5)


def test_a_server_tool_runs_in_the_loop_and_its_result_goes_back_to_the_model():
    clock = Tool("12:00")
    scripted = ScriptedModel(calls(("call-1", "clock", '{"tz": "UTC"}')), says("It is noon."))
    loop = agent_loop(scripted, L.Tools(client=frozenset({"get_weather"}), server={"clock": clock}))

    events = asyncio.run(loop_events(loop))
    assert [type(e).__name__ for e in events] == [
        "ModelCallStarted",
        "ToolCallDelta",
        "ToolCallDelta",
        "ModelReplied",
        "ToolsStarted",
        "ToolFinished",
        "ToolsRan",
        "ModelCallStarted",
        "TextDelta",
        "ModelReplied",
        "Finished",
    ]
    assert clock.arguments == ['{"tz": "UTC"}']
    started, finished, ran = events[4:7]
    assert started.calls == [ChatToolCall("call-1", "clock", '{"tz": "UTC"}')]
    assert started.step_id == ran.step_id == finished.step_id
    assert finished.result == ran.results[0]
    assert ran.results == [L.ToolResult(ChatToolCall("call-1", "clock", '{"tz": "UTC"}'), "12:00")]
    assert scripted.requests[1].messages[-1] == ChatMessage("tool", "12:00", tool_call_id="call-1")
    assert events[-1] == L.Finished("answered") and loop.iterations == 2


def test_a_failing_server_tool_becomes_an_error_result_the_model_reads():
    broken = Tool(RuntimeError("the clock broke"))
    scripted = ScriptedModel(calls(("call-1", "clock", "{}")), says("Sorry, no clock."))
    events = asyncio.run(loop_events(agent_loop(scripted, L.Tools(server={"clock": broken}))))

    (ran,) = [e for e in events if isinstance(e, L.ToolsRan)]
    error = "Tool `clock` failed: the clock broke"
    assert [(r.content, r.is_error) for r in ran.results] == [(error, True)]
    assert scripted.requests[1].messages[-1] == ChatMessage("tool", error, tool_call_id="call-1")
    assert events[-1] == L.Finished("answered")


@pytest.mark.parametrize("client", [frozenset({"get_weather"}), None], ids=["agents", "responses"])
def test_server_tools_run_before_the_loop_pauses_for_the_client_calls_of_the_same_reply(client):
    clock = Tool("12:00")
    scripted = ScriptedModel(calls(("call-1", "clock", "{}"), ("call-2", "get_weather", PARIS)))
    loop = agent_loop(scripted, L.Tools(client=client, server={"clock": clock}))

    events = asyncio.run(loop_events(loop))
    ran, paused = events[-2:]
    assert [r.call.id for r in ran.results] == ["call-1"]
    assert paused == L.Paused([ChatToolCall("call-2", "get_weather", PARIS)])
    # The model's reply and the server tool's result are in the conversation a resume continues.
    assert [m.role for m in loop.request.messages] == ["user", "assistant", "tool"]


def test_the_loop_reports_a_model_failure_as_its_last_event():
    scripted = ScriptedModel([model.TextDelta("Hal"), UpstreamFailed("cut off")])
    events = asyncio.run(loop_events(agent_loop(scripted, L.Tools())))
    assert [type(e).__name__ for e in events] == ["ModelCallStarted", "TextDelta", "Failed"]
    assert isinstance(events[-1].error, UpstreamFailed)


# --- the Responses API face -------------------------------------------------------------------


WEATHER_FUNCTION = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def responses(*replies: list[Any]) -> tuple[ResponsesEngine, MemoryResponseStorage, ScriptedModel]:
    storage, scripted = MemoryResponseStorage(), ScriptedModel(*replies)
    return ResponsesEngine(storage, Models(scripted)), storage, scripted


def request(**fields: Any) -> CreateOpenaiResponseRequest:
    return CreateOpenaiResponseRequest.model_validate({"model": "m", **fields})


async def respond(engine: ResponsesEngine, **fields: Any):
    """A response run to its end by a client that does not stream."""
    return await (await engine.start(TENANT, request(**fields))).result()


async def stream_response(engine: ResponsesEngine, **fields: Any) -> list[Any]:
    run = await engine.start(TENANT, request(stream=True, **fields))
    return [event async for event in run.events()]


def types_and_numbers(events: list[Any]) -> list[str]:
    assert [e.sequence_number for e in events] == list(range(len(events)))
    return [e.type.removeprefix("response.") for e in events]


def test_a_text_response_streams_its_events_in_order_with_usage_and_is_stored():
    engine, storage, scripted = responses(says("Hel", "lo", usage=Usage(5, 2)))
    events = asyncio.run(stream_response(engine, input="Hi", instructions="Be brief."))

    assert types_and_numbers(events) == [
        "created",
        "in_progress",
        "output_item.added",
        "content_part.added",
        "output_text.delta",
        "output_text.delta",
        "output_text.done",
        "content_part.done",
        "output_item.done",
        "completed",
    ]
    item_id = events[2].item.id
    assert {e.item_id for e in events[3:8]} == {item_id} and events[8].item.id == item_id
    assert [e.delta for e in events[4:6]] == ["Hel", "lo"] and events[6].text == "Hello"
    final = events[-1].response
    assert final.status == "completed" and final.error is None
    assert [(o.type, o.content[0].text, o.status) for o in final.output] == [
        ("message", "Hello", "completed")
    ]
    usage = final.usage
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (5, 2, 7)
    assert conversation(scripted.requests[0]) == [("system", "Be brief."), ("user", "Hi")]
    stored = storage.response(TENANT, final.id)
    assert stored.output == final.output and stored.status == "completed"
    assert stored.input[0].content[0].text == "Hi"
    # The stored context is the conversation without this response's instructions.
    assert asyncio.run(storage.context(TENANT, final.id)) == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
    ]


def test_function_calls_become_output_items_after_the_text():
    reply = calls(("call-1", "get_weather", PARIS), ("call-2", "get_weather", '{"city": "Rome"}'))
    reply.insert(0, model.TextDelta("Checking."))
    engine, storage, scripted = responses(reply)
    events = asyncio.run(stream_response(engine, input="Paris and Rome?", tools=[WEATHER_FUNCTION]))

    assert types_and_numbers(events) == [
        "created",
        "in_progress",
        "output_item.added",
        "content_part.added",
        "output_text.delta",
        "output_text.done",
        "content_part.done",
        "output_item.done",
        "output_item.added",
        "function_call_arguments.delta",
        "function_call_arguments.delta",
        "function_call_arguments.done",
        "output_item.done",
        "output_item.added",
        "function_call_arguments.delta",
        "function_call_arguments.delta",
        "function_call_arguments.done",
        "output_item.done",
        "completed",
    ]
    assert [e.output_index for e in events[2:-1]] == [0] * 6 + [1] * 5 + [2] * 5
    assert events[11].arguments == PARIS
    final = events[-1].response
    assert [(o.type, o.status) for o in final.output] == [
        ("message", "completed"),
        ("function_call", "completed"),
        ("function_call", "completed"),
    ]
    assert [(o.call_id, o.name, o.arguments) for o in final.output[1:]] == [
        ("call-1", "get_weather", PARIS),
        ("call-2", "get_weather", '{"city": "Rome"}'),
    ]
    assert [t.name for t in scripted.requests[0].tools] == ["get_weather"]
    assert len(scripted.calls) == 1  # the client runs the functions: the response ends here


def test_a_reply_cut_at_its_token_limit_leaves_the_response_incomplete():
    engine, _, _ = responses(says("Once upon a", finish="length"))
    events = asyncio.run(stream_response(engine, input="A long story"))
    assert types_and_numbers(events)[-1] == "incomplete"
    final = events[-1].response
    assert final.status == "incomplete"
    assert final.incomplete_details == {"reason": "max_output_tokens"}
    assert final.output[0].content[0].text == "Once upon a"


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (UpstreamFailed("model broke"), 502, "model_error"),
        (UpstreamTimeout("late"), 504, "model_timeout"),
    ],
)
def test_a_model_failure_fails_the_response_with_its_code(error, status, code):
    # Streamed, then not: the model fails alike.
    engine, storage, scripted = responses([model.TextDelta("Par"), error], [error])

    async def scenario():
        run = await engine.start(TENANT, request(input="Hi", stream=True))
        events = [event async for event in run.events()]
        with pytest.raises(RunFailed) as failed:
            await respond(engine, input="Hi")
        return run, events, failed.value

    run, events, failed = asyncio.run(scenario())
    assert types_and_numbers(events) == [
        "created",
        "in_progress",
        "output_item.added",
        "content_part.added",
        "output_text.delta",
        # The item the client saw added is closed, incomplete, before the response fails.
        "output_text.done",
        "content_part.done",
        "output_item.done",
        "failed",
    ]
    assert events[-2].item.status == "incomplete"
    final = events[-1].response
    assert final.status == "failed"
    assert [(o.type, o.status) for o in final.output] == [("message", "incomplete")]
    assert (final.error.code, final.error.message) == (code, str(error))
    assert (failed.status, failed.message) == (status, str(error))
    assert set(failed.ids) == {"response_id"}
    assert scripted.calls == ["stream", "complete"]
    # Stored failed, and nothing of its output joins the conversation a chained response reads.
    assert storage.response(TENANT, run.response.id).status == "failed"
    assert asyncio.run(storage.context(TENANT, run.response.id)) == [
        {"role": "user", "content": "Hi"}
    ]


def test_chained_responses_carry_the_conversation_through_previous_response_id():
    engine, storage, scripted = responses(
        calls(("call-1", "get_weather", PARIS)), says("Sunny in Paris."), says("You asked twice.")
    )

    async def scenario():
        first = await respond(
            engine, input="Weather?", instructions="Be brief.", tools=[WEATHER_FUNCTION]
        )
        answer = {"type": "function_call_output", "call_id": "call-1", "output": "sunny"}
        second = await respond(engine, input=[answer], previous_response_id=first.id)
        third = await respond(engine, input="Again?", previous_response_id=second.id)
        return first, second, third

    first, second, third = asyncio.run(scenario())
    assert first.output[0].type == "function_call"
    assert second.previous_response_id == first.id
    assert second.output[0].content[0].text == "Sunny in Paris."
    sent = scripted.requests[1].messages
    assert [(m.role, m.content) for m in sent] == [
        ("user", "Weather?"),  # the first response's instructions were its own
        ("assistant", ""),
        ("tool", "sunny"),
    ]
    assert sent[1].tool_calls == [ChatToolCall("call-1", "get_weather", PARIS)]
    assert sent[2].tool_call_id == "call-1"
    assert conversation(scripted.requests[2]) == [
        ("user", "Weather?"),
        ("assistant", ""),
        ("tool", "sunny"),
        ("assistant", "Sunny in Paris."),
        ("user", "Again?"),
    ]
    assert third.output[0].content[0].text == "You asked twice."


def test_an_unstored_response_cannot_be_chained_to():
    engine, storage, _ = responses(says("Hello."))

    async def scenario():
        unstored = await respond(engine, input="Hi", store=False)
        with pytest.raises(NotFound):
            await engine.start(TENANT, request(input="More", previous_response_id=unstored.id))
        return unstored

    assert asyncio.run(scenario()).status == "completed"
    assert storage.records == {}


def test_a_call_the_model_sent_without_an_id_gets_one_in_both_faces():
    no_id = [model.ToolCallDelta(0, None, "get_weather", PARIS), model.Finish("tool_calls")]
    world = agents(copy.deepcopy(no_id))
    engine, _, _ = responses(copy.deepcopy(no_id))

    async def scenario():
        turn = await world.ask("Weather?")
        response = await respond(engine, input="Weather?", tools=[WEATHER_FUNCTION])
        return turn, response

    turn, response = asyncio.run(scenario())
    (call,) = turn.output_message.tool_calls
    assert call.call_id and call.tool_name == "get_weather"
    assert response.output[0].call_id.startswith("call_")


# --- one loop, two faces ------------------------------------------------------------------------


def test_the_same_model_replies_read_the_same_through_both_faces():
    """Text and tool calls, then the client's result and the answer: the same conversation is sent
    to the model, and the same text and calls come out, whichever API asks."""
    script = [calls(("call-1", "get_weather", PARIS), text="Let me check."), says("Sunny.")]
    world = agents(*copy.deepcopy(script))
    engine, _, scripted = responses(*copy.deepcopy(script))

    async def scenario():
        paused = await world.ask("Weather in Paris?")
        turn = await world.answer(paused.turn_id, "sunny")
        first = await respond(
            engine, input="Weather in Paris?", instructions="Be brief.", tools=[WEATHER_FUNCTION]
        )
        answer = {"type": "function_call_output", "call_id": "call-1", "output": "sunny"}
        second = await respond(engine, input=[answer], previous_response_id=first.id)
        return paused, turn, first, second

    paused, turn, first, second = asyncio.run(scenario())
    reply = paused.output_message
    message, call = first.output
    assert reply.content == message.content[0].text == "Let me check."
    assert [(c.call_id, c.tool_name, c.arguments_json) for c in reply.tool_calls] == [
        (call.call_id, call.name, call.arguments)
    ]
    assert turn.output_message.content == second.output[0].content[0].text == "Sunny."
    # The turn's model was sent the agent's instructions each time; the response chain sends
    # them with the first response only. Otherwise the conversations are the same.
    turn_sent = [m.to_dict() for m in world.model.requests[1].messages]
    chain_sent = [m.to_dict() for m in scripted.requests[1].messages]
    assert turn_sent[0] == {"role": "system", "content": "Be brief."}
    assert turn_sent[1:] == chain_sent
    assert json.loads(chain_sent[1]["tool_calls"][0]["arguments"]) == {"city": "Paris"}
    assert world.model.replies == scripted.replies == []


# --- the server's limits ----------------------------------------------------------------------


def pause_for(seconds: float):
    """A happening: the model keeps the call open (keep-alive comments, a slow trickle)."""

    async def wait() -> None:
        await asyncio.sleep(seconds)

    return wait


def test_a_model_call_that_never_finishes_fails_the_turn_at_its_deadline_and_frees_the_session():
    world = agents([model.TextDelta("Half an ans"), pause_for(30)], says("Fine."))
    world.engine.limits = L.Limits(call_seconds=0.05)

    async def scenario():
        items = await chunks(await world.start("First", stream=True))
        return items, await world.read(items[-1].ids["turn_id"]), await world.ask("Second")

    items, stored, second = asyncio.run(scenario())
    failed = items[-1]
    assert kinds(items)[-1] == "error 504"
    assert "ran out of time (a model call may take 0.05 s)" in failed.message
    assert stored.state.status == FAILED
    assert second.output_message.content == "Fine."


def test_a_deltas_chunk_validated_in_one_call_is_the_chunk_built_model_by_model():
    from agents_core.api.agents import (
        AgentTurnResponseEvent,
        AgentTurnResponseStepProgressPayload,
        AgentTurnResponseStreamChunk,
    )
    from agents_core.api.common import TextDelta, ToolCall, ToolCallDelta
    from agents_core.engine.turn_run import _progress

    call = ToolCall(call_id="c1", tool_name="get_weather", arguments={"city": "Paris"})
    text = 'a "quoted" \u00e9 line\nand more'
    cases = [
        ("s1", {"type": "text", "text": text}, TextDelta(text=text), "inference"),
        ("s2", *[ToolCallDelta(tool_call='{"ci', parse_status="in_progress")] * 2, "inference"),
        ("s3", *[ToolCallDelta(tool_call=call, parse_status="succeeded")] * 2, "inference"),
        ("s4", {"type": "text", "text": "out"}, TextDelta(text="out"), "tool_execution"),
    ]
    for step_id, given, delta, step_type in cases:
        payload = AgentTurnResponseStepProgressPayload(
            step_type=step_type, step_id=step_id, delta=delta
        )
        one_by_one = AgentTurnResponseStreamChunk(event=AgentTurnResponseEvent(payload=payload))
        built = _progress(step_id, given, step_type)
        assert built == one_by_one
        assert built.model_dump_json() == one_by_one.model_dump_json()


def test_a_model_calls_bound_cancels_only_its_own_wait_and_only_past_its_deadline():
    """One timer bounds a call's awaits: past the deadline, an await the consumer makes between
    events is left alone and the next wait raises at once; a wait under way is cut to a
    TimeoutError; a task cancelled from elsewhere stays cancelled."""
    from agents_core.engine.loop import _Bound

    async def consumer_between_events() -> list[str]:
        loop = asyncio.get_running_loop()
        bound = _Bound(loop.time() + 0.05)
        seen = [await bound.wait(asyncio.sleep(0, "first"))]
        await asyncio.sleep(0.1)  # the consumer's own await, past the deadline
        seen.append("consumer not cancelled")
        try:
            await bound.wait(asyncio.sleep(10))
        except TimeoutError:
            seen.append("next wait timed out")
        bound.close()
        return seen

    async def waiting_past_the_deadline() -> str:
        bound = _Bound(asyncio.get_running_loop().time() + 0.05)
        try:
            await bound.wait(asyncio.sleep(10))
        except TimeoutError:
            return "timed out"
        finally:
            bound.close()
        return "answered"

    async def cancelled_from_elsewhere() -> str:
        bound = _Bound(asyncio.get_running_loop().time() + 10)
        waiting = asyncio.ensure_future(bound.wait(asyncio.sleep(10)))
        await asyncio.sleep(0.01)
        waiting.cancel()
        try:
            await waiting
        except asyncio.CancelledError:
            return "cancelled"
        finally:
            bound.close()
        return "not cancelled"

    assert asyncio.run(consumer_between_events()) == [
        "first",
        "consumer not cancelled",
        "next wait timed out",
    ]
    assert asyncio.run(waiting_past_the_deadline()) == "timed out"
    assert asyncio.run(cancelled_from_elsewhere()) == "cancelled"


def test_the_run_deadline_bounds_a_turn_of_many_model_calls():
    slow_call = [pause_for(0.04), *calls(("call-1", "launch_rockets", "{}"))]
    world = agents(*(copy.deepcopy(slow_call) for _ in range(10)), max_infer_iters=10)
    world.engine.limits = L.Limits(run_seconds=0.1, call_seconds=10)

    async def scenario():
        return await chunks(await world.start("Launch!", stream=True))

    items = asyncio.run(scenario())
    assert kinds(items)[-1] == "error 504"
    assert "a run may take 0.1 s" in items[-1].message
    assert 2 <= len(world.model.calls) < 10


def test_the_servers_limits_cap_what_a_request_asks_and_end_the_turn():
    rockets = calls(("call-1", "launch_rockets", "{}"))
    world = agents(*(copy.deepcopy(rockets) for _ in range(5)), max_infer_iters=1_000_000_000)
    world.engine.limits = L.Limits(max_iterations=2)
    stored = asyncio.run(world.read(asyncio.run(world.ask("Launch!")).turn_id))
    assert len(world.model.calls) == 2 and stored.state.iterations == 2
    assert stored.turn.output_message.stop_reason == "out_of_tokens"

    two_calls = calls(("call-1", "launch_rockets", "{}"), ("call-2", "launch_rockets", "{}"))
    world = agents(two_calls)
    world.engine.limits = L.Limits(max_tool_calls=1)
    stored = asyncio.run(world.read(asyncio.run(world.ask("Launch twice!")).turn_id))
    assert len(world.model.calls) == 1 and stored.state.tool_calls == 2
    assert stored.state.status == COMPLETED
    assert [s.step_type for s in stored.turn.steps] == ["inference"]  # neither call was run


def test_a_limit_that_ends_a_response_is_named_in_incomplete_details():
    engine, _, _ = responses(calls(("c1", "a", "{}"), ("c2", "b", "{}")))
    engine.limits = L.Limits(max_tool_calls=1)
    response = asyncio.run(
        respond(engine, input="Call both", tools=[_function_tool("a"), _function_tool("b")])
    )
    assert response.status == "incomplete"
    assert response.incomplete_details == {"reason": "max_tool_calls"}


def _function_tool(name: str) -> dict[str, Any]:
    return {"type": "function", "name": name, "parameters": {"type": "object", "properties": {}}}
