"""Runs that stop and go on: a Responses run under a RunControl (the background worker's), its
state stored at each step boundary, rebuilt from that state in another "invocation": suspended
for time, killed right after any step, cancelled, or taken over. Over the in-memory storage, a
scripted model and a fake tool runtime; the worker, the table and the queue are tested in
test_background.py."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents_core.engine.responses import ResponsesEngine, RunLost

from .memory_storage import MemoryResponseStorage
from .test_engine import TENANT, Models, ScriptedModel, Tool, calls, request, says
from .test_engine_server_tools import mcp_tool, time_runtime

CREDENTIALS = {"time": {"headers": {"X-Token": "t"}, "authorization": None}}


class Killed(BaseException):
    """The invocation dies here (as with SIGKILL: nothing after it runs, nothing is written)."""


class MemoryControl:
    """A RunControl keeping every state it is handed (through JSON, as the table would)."""

    def __init__(
        self, suspend: bool = False, kill_after: int | None = None, cancel_after: int | None = None
    ) -> None:
        self.states: list[dict[str, Any]] = []
        self.saved: Any = None
        self.suspend = suspend
        self.kill_after = kill_after  # checkpoints, then the invocation dies
        self.cancel_after = cancel_after  # `cancelled()` questions answered no, then yes
        self.asked = 0
        self.lose = False

    def should_suspend(self) -> bool:
        return self.suspend

    async def cancelled(self) -> bool:
        self.asked += 1
        return self.cancel_after is not None and self.asked > self.cancel_after

    async def checkpoint(self, state: dict[str, Any]) -> None:
        if self.lose:
            raise RunLost("taken over")
        self.states.append(json.loads(json.dumps(state)))
        if self.kill_after is not None and len(self.states) >= self.kill_after:
            raise Killed

    async def save(self, response: Any, context: Any, conversation: Any, trace: Any = None) -> None:
        self.saved = response.model_copy(deep=True)
        self.trace = trace


def world():
    clock = Tool("12:00")
    runtime = time_runtime(clock)
    scripted = ScriptedModel(
        calls(("call-1", "clock", '{"tz": "UTC"}')),
        calls(("call-2", "clock", '{"tz": "CET"}')),
        says("It is noon, ", "or one."),
    )
    engine = ResponsesEngine(MemoryResponseStorage(), Models(scripted), tools=runtime)
    return engine, scripted, clock, runtime


BODY = {
    "input": "Time?",
    "background": True,
    "tools": [mcp_tool(require_approval="never", headers={"X-Token": "t"})],
}


async def first_state(engine: ResponsesEngine) -> dict[str, Any]:
    run = await engine.start(TENANT, request(**BODY))
    return json.loads(json.dumps(run.state()))


async def invocation(engine: ResponsesEngine, state: dict[str, Any], control: MemoryControl):
    """One invocation: the run rebuilt from `state`, its events until it ends, stops or dies."""
    run = await engine.restore(TENANT, state, CREDENTIALS, control)
    events: list[Any] = []
    try:
        async for event in run.events():
            events.append(event)
    except Killed:
        pass
    return run, events


def uninterrupted() -> tuple[list[Any], Any]:
    engine, *_ = world()

    async def scenario():
        control = MemoryControl()
        _, events = await invocation(engine, await first_state(engine), control)
        return events, control.saved

    return asyncio.run(scenario())


def shape(output: list[Any]) -> list[tuple[Any, ...]]:
    """Output items without their ids, which every run draws anew."""
    return [
        (
            item.type,
            getattr(item, "name", None),
            getattr(item, "arguments", None),
            getattr(item, "output", None),
            item.content[0].text if item.type == "message" else None,
        )
        for item in output
    ]


def test_a_run_suspended_after_every_model_call_ends_as_an_uninterrupted_one_in_three_invocations():
    engine, scripted, clock, runtime = world()

    async def scenario():
        state, streamed, invocations = await first_state(engine), [], 0
        while True:
            invocations += 1
            control = MemoryControl(suspend=True)
            run, events = await invocation(engine, state, control)
            streamed += events
            if not run.suspended:
                return invocations, streamed, control.saved, control.trace
            state = control.states[-1]

    invocations, streamed, saved, trace = asyncio.run(scenario())
    plain_events, plain_saved = uninterrupted()

    assert invocations == 3
    assert len(scripted.requests) == 3 and clock.arguments == ['{"tz": "UTC"}', '{"tz": "CET"}']
    assert [e.sequence_number for e in streamed] == list(range(len(streamed)))
    assert [e.type for e in streamed] == [e.type for e in plain_events]
    assert streamed[-1].type == "response.completed"
    assert saved.status == "completed" and shape(saved.output) == shape(plain_saved.output)
    assert saved.usage == plain_saved.usage
    # Its trace: a run span per invocation, the model calls and tool calls each in its own.
    assert len(trace) == 3
    assert [[span[0] for span in run["spans"]].count("inference") for run in trace] == [1, 1, 1]
    assert sum(span[0] == "mcp_call" for run in trace for span in run["spans"]) == 3
    # Each invocation calls the MCP server with the credentials its message carried.
    assert {tuple(e.headers.items()) for e in runtime.listed} == {(("X-Token", "t"),)}
    # The model saw the same conversation as in one go: the first answer's call and result.
    assert [m.role for m in scripted.requests[2].messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]


def checkpoints_of_a_whole_run() -> int:
    engine, *_ = world()

    async def scenario():
        control = MemoryControl()
        await invocation(engine, await first_state(engine), control)
        return len(control.states)

    return asyncio.run(scenario())


@pytest.mark.parametrize("kill_after", range(1, checkpoints_of_a_whole_run() + 1))
def test_a_run_killed_after_any_step_goes_on_from_its_state_and_makes_no_call_twice(kill_after):
    engine, scripted, clock, runtime = world()

    async def scenario():
        state = await first_state(engine)
        killed = MemoryControl(kill_after=kill_after)
        await invocation(engine, state, killed)
        control = MemoryControl()
        run, _ = await invocation(engine, killed.states[-1], control)
        return control.saved

    saved = asyncio.run(scenario())
    _, plain_saved = uninterrupted()
    assert len(scripted.requests) == 3  # every model call once
    assert clock.arguments == ['{"tz": "UTC"}', '{"tz": "CET"}']  # every tool call once
    assert shape(saved.output) == shape(plain_saved.output)
    assert len(runtime.listed) == 1  # the listing was a step too


def test_a_cancelled_run_stops_at_the_next_event_keeping_what_it_produced():
    engine, scripted, clock, _ = world()

    async def scenario():
        control = MemoryControl(cancel_after=8)
        _, events = await invocation(engine, await first_state(engine), control)
        return events, control.saved

    events, saved = asyncio.run(scenario())
    assert events[-1].type == "response.cancelled"
    assert saved.status == "cancelled" and events[-1].response.status == "cancelled"
    assert saved.output and saved.output[0].type == "mcp_list_tools"
    assert len(scripted.requests) < 3
    # Every item a client saw added is done.
    added = {e.item.id for e in events if e.type == "response.output_item.added"}
    done = {e.item.id for e in events if e.type == "response.output_item.done"}
    assert added == done


def test_a_run_cancelled_before_it_starts_calls_nothing():
    engine, scripted, clock, runtime = world()

    async def scenario():
        control = MemoryControl(cancel_after=0)
        _, events = await invocation(engine, await first_state(engine), control)
        return events, control.saved

    events, saved = asyncio.run(scenario())
    assert [e.type for e in events] == [
        "response.created",
        "response.in_progress",
        "response.cancelled",
    ]
    assert saved.status == "cancelled" and saved.output == []
    assert scripted.requests == [] and runtime.listed == [] and clock.arguments == []


def test_a_run_taken_over_by_another_invocation_stops_and_writes_nothing():
    engine, scripted, *_ = world()

    async def scenario():
        control = MemoryControl()
        control.lose = True
        _, events = await invocation(engine, await first_state(engine), control)
        return events, control.saved

    events, saved = asyncio.run(scenario())
    assert saved is None
    assert events[-1].type not in ("response.completed", "response.failed")
    assert scripted.requests == []
