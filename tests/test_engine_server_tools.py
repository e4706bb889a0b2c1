"""Server-side tools in both faces of the agent loop, over the in-memory storage and a fake tool
runtime (the engine's port): Agents tool groups as tool-execution steps, Responses MCP servers
and web search as output items with their stream events, MCP approvals. The real runtime (MCP
over HTTP, the search provider, the outbound guard) is tested in test_tools.py and end to end in
test_server_tools_e2e.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from agents_core.api.agents import AgentToolGroupWithArgs, CreateAgentTurnRequest
from agents_core.api.common import UserMessage
from agents_core.engine.responses import ResponsesEngine
from agents_core.engine.server_tools import McpEndpoint, ServerToolset
from agents_core.errors import InvalidRequest
from agents_core.inference.types import ToolSpec

from .memory_storage import MemoryResponseStorage
from .test_engine import PARIS, TENANT, Models, ScriptedModel, Tool, agents, calls, chunks
from .test_engine import kinds, says, types_and_numbers

CLOCK = ToolSpec("clock", "The time now", {"type": "object", "properties": {}})
SEARCH = ToolSpec("web_search", "Search the web", {"type": "object", "properties": {}})


class FakeRuntime:
    """The engine's ToolRuntime port: registered tool groups, MCP servers by URL (their tools,
    or the error listing them raises), a web search tool, URLs the guard refuses."""

    def __init__(self) -> None:
        self.groups: dict[str, list[tuple[ToolSpec, Tool]]] = {}
        self.servers: dict[str, list[tuple[ToolSpec, Tool]] | Exception] = {}
        self.search = Tool("1. Paris weather: sunny")
        self.refused: set[str] = set()
        self.seen_groups: list[tuple[Sequence[Any], Mapping[str, Any] | None]] = []
        self.listed: list[McpEndpoint] = []

    async def check_url(self, url: str) -> None:
        if url in self.refused:
            raise InvalidRequest(f"{url} is not an address the server may call")

    async def mcp_tools(self, endpoint: McpEndpoint) -> list[ToolSpec]:
        self.listed.append(endpoint)
        tools = self.servers[endpoint.url]
        if isinstance(tools, Exception):
            raise tools
        return [spec for spec, _ in tools]

    def mcp_tool(self, endpoint: McpEndpoint, name: str) -> Tool:
        tools = self.servers[endpoint.url]
        assert not isinstance(tools, Exception)
        return dict((spec.name, tool) for spec, tool in tools)[name]

    def web_search(self) -> tuple[ToolSpec, Tool]:
        return SEARCH, self.search

    async def toolgroups(
        self, tenant: str, groups: Sequence[Any], provider_data: Mapping[str, Any] | None
    ) -> ServerToolset:
        self.seen_groups.append((groups, provider_data))
        toolset = ServerToolset()
        for group in groups:
            name = group.name if isinstance(group, AgentToolGroupWithArgs) else group
            if name not in self.groups:
                raise InvalidRequest(f"Tool group {name} is not registered")
            for spec, tool in self.groups[name]:
                toolset.add(spec, tool)
        return toolset


def with_runtime(world, runtime: FakeRuntime):
    world.engine.tools = runtime
    return world


# --- Agents: tool groups -----------------------------------------------------------------------


def test_a_tool_group_tool_runs_as_a_tool_execution_step_and_the_turn_answers_with_its_result():
    runtime = FakeRuntime()
    clock = Tool("12:00")
    runtime.groups["mcp::time"] = [(CLOCK, clock)]
    world = with_runtime(
        agents(calls(("call-1", "clock", "{}")), says("It is noon."), toolgroups=["mcp::time"]),
        runtime,
    )

    async def scenario():
        items = await chunks(await world.start("What time is it?", stream=True))
        return items, await world.read(items[-1].event.payload.turn.turn_id)

    items, stored = asyncio.run(scenario())
    assert kinds(items) == [
        "turn_start",
        "step_start:inference",
        *["step_progress:inference"] * 3,  # two pieces of the call, then the call parsed
        "step_complete:inference",
        "step_start:tool_execution",
        "step_progress:tool_execution",
        "step_complete:tool_execution",
        "step_start:inference",
        "step_progress:inference",
        "step_complete:inference",
        "turn_complete",
    ]
    progress = items[7].event.payload.delta
    assert (progress.parse_status, progress.tool_call.tool_name) == ("in_progress", "clock")
    step = items[8].event.payload.step_details
    assert [r.content for r in step.tool_responses] == ["12:00"]
    assert step.tool_responses[0].metadata is None
    # The model saw the group's tool, and got its result back.
    assert [t.name for t in world.model.requests[0].tools] == ["get_weather", "clock"]
    assert world.model.requests[1].messages[-1].content == "12:00"
    turn = stored.turn
    assert turn.output_message.content == "It is noon."
    assert [s.step_type for s in turn.steps] == ["inference", "tool_execution", "inference"]


def test_a_failing_tool_group_tool_is_a_result_marked_as_an_error_and_the_turn_goes_on():
    runtime = FakeRuntime()
    runtime.groups["mcp::time"] = [(CLOCK, Tool(RuntimeError("clock server down")))]
    world = with_runtime(
        agents(calls(("call-1", "clock", "{}")), says("No clock."), toolgroups=["mcp::time"]),
        runtime,
    )
    turn = asyncio.run(world.ask("What time is it?"))
    step = turn.steps[1]
    assert step.tool_responses[0].metadata == {"error": True}
    assert "clock server down" in step.tool_responses[0].content
    assert turn.output_message.content == "No clock."


def test_a_reply_mixing_group_and_client_tools_runs_the_group_tool_and_pauses_for_the_client():
    runtime = FakeRuntime()
    clock = Tool("12:00")
    runtime.groups["mcp::time"] = [(CLOCK, clock)]
    reply = calls(("call-1", "clock", "{}"), ("call-2", "get_weather", PARIS))
    world = with_runtime(agents(reply, says("Noon, sunny."), toolgroups=["mcp::time"]), runtime)

    async def scenario():
        paused = await world.ask("Time and weather?")
        done = await (await world.resume(paused.turn_id, "sunny")).result()
        return paused, done

    paused, done = asyncio.run(scenario())
    assert [c.call_id for c in paused.output_message.tool_calls] == ["call-2"]
    assert clock.arguments == ["{}"]
    assert [s.step_type for s in done.steps] == [
        "inference",
        "tool_execution",
        "tool_execution",
        "inference",
    ]
    assert done.output_message.content == "Noon, sunny."
    # The resumed turn asked the runtime for the agent's groups again.
    assert [groups for groups, _ in runtime.seen_groups] == [["mcp::time"], ["mcp::time"]]


def test_an_unregistered_tool_group_is_refused_before_anything_is_stored():
    world = with_runtime(agents(says("never"), toolgroups=["mcp::nope"]), FakeRuntime())

    async def scenario():
        with pytest.raises(InvalidRequest, match="mcp::nope"):
            await world.start("Hi")
        return await world.lock("next-turn")  # the session was released

    assert asyncio.run(scenario()).turn_id == "next-turn"
    assert world.storage.turns[(TENANT, world.session_id)].keys() == {"next-turn"}
    assert world.model.requests == []


def test_a_turn_naming_its_own_tool_groups_uses_them_and_passes_the_provider_data_on():
    runtime = FakeRuntime()
    runtime.groups["mcp::time"] = [(CLOCK, Tool("12:00"))]
    world = with_runtime(agents(says("Hi.")), runtime)
    group = AgentToolGroupWithArgs(name="mcp::time", args={"tz": "UTC"})

    async def scenario():
        body = CreateAgentTurnRequest(messages=[UserMessage(content="Hi")], toolgroups=[group])
        data = {"mcp_headers": {"http://time": {"Authorization": "Bearer t"}}}
        run = await world.engine.start_turn(TENANT, world.agent_id, world.session_id, body, data)
        return await run.result()

    asyncio.run(scenario())
    assert runtime.seen_groups == [
        ([group], {"mcp_headers": {"http://time": {"Authorization": "Bearer t"}}})
    ]
    assert [t.name for t in world.model.requests[0].tools] == ["get_weather", "clock"]


def test_without_a_tool_runtime_tool_groups_are_refused():
    world = agents(says("never"), toolgroups=["builtin::websearch"])
    with pytest.raises(InvalidRequest, match="toolgroups"):
        asyncio.run(world.start("Hi"))
