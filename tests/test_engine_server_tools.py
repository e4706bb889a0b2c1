"""Server-side tools in both faces of the agent loop, over the in-memory storage and a fake tool
runtime (the engine's port): Agents tool groups as tool-execution steps, Responses MCP servers
and web search as output items with their stream events, MCP approvals. The real runtime (MCP
over HTTP, the search provider, the outbound guard) is tested in test_tools.py and end to end in
test_server_tools_e2e.py."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from agents_core.api.agents import AgentToolGroupWithArgs, CreateAgentTurnRequest
from agents_core.api.common import UserMessage
from agents_core.engine.file_search import Citations
from agents_core.engine.responses import ResponsesEngine
from agents_core.engine.server_tools import FileHit, McpEndpoint, ServerToolset
from agents_core.errors import InvalidRequest
from agents_core.inference.types import ToolSpec

from .memory_storage import MemoryResponseStorage
from .test_engine import (
    PARIS,
    TENANT,
    Models,
    ScriptedModel,
    Tool,
    agents,
    calls,
    chunks,
    kinds,
    refused_with_nothing_stored,
    respond,
    says,
    stream_response,
    types_and_numbers,
)

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
        self.documents: dict[str, tuple[bytes, str]] = {}
        self.hits: list[FileHit] = []
        self.searches: list[tuple[str, list[str], str, int]] = []

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

    async def file_search(
        self, tenant, vector_store_ids, query, max_results, filters=None, score_threshold=None
    ) -> list[FileHit]:
        self.searches.append((tenant, list(vector_store_ids), query, max_results))
        return self.hits[:max_results]

    async def fetch(self, url: str, max_bytes: int) -> tuple[bytes, str]:
        await self.check_url(url)
        return self.documents[url]

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
    refused_with_nothing_stored(world, "mcp::nope")


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


# --- Responses: MCP servers, web search, approvals ----------------------------------------------

TIME_SERVER = "http://time.example/mcp"


def mcp_tool(**fields: Any) -> dict[str, Any]:
    return {"type": "mcp", "server_label": "time", "server_url": TIME_SERVER, **fields}


def responses_with(runtime: FakeRuntime, *replies: list[Any]):
    storage, scripted = MemoryResponseStorage(), ScriptedModel(*replies)
    engine = ResponsesEngine(storage, Models(scripted), tools=runtime)
    return engine, storage, scripted


def time_runtime(clock: Tool) -> FakeRuntime:
    runtime = FakeRuntime()
    runtime.servers[TIME_SERVER] = [(CLOCK, clock), (SEARCH_DOCS, Tool("docs"))]
    return runtime


SEARCH_DOCS = ToolSpec("search_docs", "Search the docs", {"type": "object", "properties": {}})


def test_an_mcp_tool_that_needs_no_approval_is_listed_called_and_answered_in_one_response():
    clock = Tool("12:00")
    runtime = time_runtime(clock)
    engine, storage, scripted = responses_with(
        runtime, calls(("call-1", "clock", '{"tz": "UTC"}')), says("It is noon.")
    )
    headers = {"X-Token": "t"}
    events = asyncio.run(
        stream_response(
            engine,
            input="Time?",
            tools=[mcp_tool(require_approval="never", headers=headers, authorization="oauth")],
        )
    )
    assert types_and_numbers(events) == [
        "created",
        "in_progress",
        "output_item.added",
        "mcp_list_tools.in_progress",
        "mcp_list_tools.completed",
        "output_item.done",
        "output_item.added",
        "mcp_call_arguments.delta",
        "mcp_call_arguments.delta",
        "mcp_call_arguments.done",
        "mcp_call.in_progress",
        "mcp_call.completed",
        "output_item.done",
        "output_item.added",
        "content_part.added",
        "output_text.delta",
        "output_text.done",
        "content_part.done",
        "output_item.done",
        "completed",
    ]
    final = events[-1].response
    listed, call, answer = final.output
    assert [t.name for t in listed.tools] == ["clock", "search_docs"]
    assert (call.type, call.server_label, call.name, call.arguments) == (
        "mcp_call",
        "time",
        "clock",
        '{"tz": "UTC"}',
    )
    assert (call.status, call.output, call.error) == ("completed", "12:00", None)
    assert answer.content[0].text == "It is noon."
    assert clock.arguments == ['{"tz": "UTC"}']
    assert runtime.listed[0].headers == {"X-Token": "t", "Authorization": "Bearer oauth"}
    assert scripted.requests[1].messages[-1].content == "12:00"
    assert storage.response(TENANT, final.id).output == final.output


def test_a_failing_mcp_tool_fails_its_item_and_the_model_reads_the_error():
    runtime = time_runtime(Tool(RuntimeError("clock server down")))
    engine, _, scripted = responses_with(runtime, calls(("c1", "clock", "{}")), says("No clock."))
    events = asyncio.run(
        stream_response(engine, input="Time?", tools=[mcp_tool(require_approval="never")])
    )
    assert "mcp_call.failed" in types_and_numbers(events)
    final = events[-1].response
    call = final.output[1]
    assert call.status == "failed" and call.output is None
    assert "clock server down" in call.error.content[0]["text"]
    assert final.status == "completed" and final.output[-1].content[0].text == "No clock."
    assert "clock server down" in scripted.requests[1].messages[-1].content


def test_a_server_that_cannot_be_listed_is_reported_and_the_response_goes_on_without_it():
    runtime = FakeRuntime()
    runtime.servers[TIME_SERVER] = ConnectionError("connection refused")
    engine, _, scripted = responses_with(runtime, says("I cannot tell."))
    events = asyncio.run(stream_response(engine, input="Time?", tools=[mcp_tool()]))
    assert types_and_numbers(events)[2:6] == [
        "output_item.added",
        "mcp_list_tools.in_progress",
        "mcp_list_tools.failed",
        "output_item.done",
    ]
    listed = events[-1].response.output[0]
    assert listed.error == "connection refused" and listed.tools == []
    assert scripted.requests[0].tools == []


def test_allowed_tools_limits_what_the_model_sees():
    runtime = time_runtime(Tool("12:00"))
    engine, _, scripted = responses_with(runtime, says("Hi."))
    final = asyncio.run(
        respond(engine, input="Hi", tools=[mcp_tool(allowed_tools={"tool_names": ["clock"]})])
    )
    assert [t.name for t in final.output[0].tools] == ["clock"]
    assert [t.name for t in scripted.requests[0].tools] == ["clock"]


def approve(engine, previous: str, request_id: str, approve: bool = True, **fields: Any):
    answer = {"type": "mcp_approval_response", "approval_request_id": request_id}
    answer |= {"approve": approve, **fields}
    return respond(engine, input=[answer], previous_response_id=previous, tools=[mcp_tool()])


def test_a_call_that_needs_approval_waits_and_runs_once_approved():
    clock = Tool("12:00")
    runtime = time_runtime(clock)
    engine, storage, scripted = responses_with(
        runtime, calls(("call-1", "clock", "{}")), says("It is noon.")
    )

    async def scenario():
        waiting = await respond(engine, input="Time?", tools=[mcp_tool()])
        assert clock.arguments == []  # nothing ran without approval
        return waiting, await approve(engine, waiting.id, "call-1")

    waiting, done = asyncio.run(scenario())
    assert waiting.status == "completed"
    request = waiting.output[-1]
    assert (request.type, request.id, request.name, request.server_label) == (
        "mcp_approval_request",
        "call-1",
        "clock",
        "time",
    )
    listed, call, answer = done.output
    assert (call.type, call.approval_request_id, call.output) == ("mcp_call", "call-1", "12:00")
    assert answer.content[0].text == "It is noon."
    assert clock.arguments == ["{}"]
    # The model saw its call answered by the tool's result, in place.
    assert [(m.role, m.content) for m in scripted.requests[1].messages] == [
        ("user", "Time?"),
        ("assistant", ""),
        ("tool", "12:00"),
    ]


def test_a_declined_call_never_runs_and_the_model_is_told_why():
    clock = Tool("12:00")
    engine, _, scripted = responses_with(
        time_runtime(clock), calls(("call-1", "clock", "{}")), says("Understood.")
    )

    async def scenario():
        waiting = await respond(engine, input="Time?", tools=[mcp_tool()])
        return await approve(engine, waiting.id, "call-1", approve=False, reason="not now")

    done = asyncio.run(scenario())
    assert clock.arguments == []
    assert [o.type for o in done.output] == ["mcp_list_tools", "message"]
    told = scripted.requests[1].messages[-1]
    assert (told.role, told.content) == ("tool", "The user declined the call to `clock`: not now")


def test_per_tool_approval_runs_the_tools_named_never_and_waits_for_the_others():
    clock = Tool("12:00")
    runtime = time_runtime(clock)
    reply = calls(("call-1", "clock", "{}"), ("call-2", "search_docs", "{}"))
    engine, _, _ = responses_with(runtime, reply)
    rule = {"never": {"tool_names": ["clock"]}}
    final = asyncio.run(respond(engine, input="Go", tools=[mcp_tool(require_approval=rule)]))
    assert [o.type for o in final.output] == ["mcp_list_tools", "mcp_call", "mcp_approval_request"]
    assert clock.arguments == ["{}"]


def test_an_approval_for_no_waiting_call_is_refused_before_anything_runs():
    engine, storage, scripted = responses_with(time_runtime(Tool("12:00")), says("never"))

    async def scenario():
        first = await respond(engine, input="Hi", tools=[mcp_tool()])
        with pytest.raises(InvalidRequest, match="approval_request_id"):
            await approve(engine, first.id, "call-nope")

    scripted.replies.insert(0, says("Hello."))
    asyncio.run(scenario())
    assert len(scripted.requests) == 1


def test_an_mcp_server_the_outbound_guard_refuses_is_a_400_before_anything_runs():
    runtime = time_runtime(Tool("12:00"))
    runtime.refused.add(TIME_SERVER)
    engine, storage, scripted = responses_with(runtime, says("never"))
    with pytest.raises(InvalidRequest, match="not an address"):
        asyncio.run(respond(engine, input="Time?", tools=[mcp_tool()]))
    assert scripted.requests == [] and runtime.listed == []


def test_web_search_is_a_web_search_call_item_with_its_query_and_events():
    runtime = FakeRuntime()
    engine, _, scripted = responses_with(
        runtime, calls(("c1", "web_search", '{"query": "paris weather"}')), says("Sunny.")
    )
    events = asyncio.run(stream_response(engine, input="Weather?", tools=[{"type": "web_search"}]))
    assert types_and_numbers(events) == [
        "created",
        "in_progress",
        "output_item.added",
        "web_search_call.in_progress",
        "web_search_call.searching",
        "web_search_call.completed",
        "output_item.done",
        "output_item.added",
        "content_part.added",
        "output_text.delta",
        "output_text.done",
        "content_part.done",
        "output_item.done",
        "completed",
    ]
    search = events[-1].response.output[0]
    assert (search.status, search.action.query) == ("completed", "paris weather")
    assert runtime.search.arguments == ['{"query": "paris weather"}']
    assert scripted.requests[1].messages[-1].content == "1. Paris weather: sunny"


def test_a_reply_mixing_an_mcp_call_and_a_function_call_runs_one_and_hands_over_the_other():
    clock = Tool("12:00")
    reply = calls(("c1", "clock", "{}"), ("c2", "get_weather", PARIS))
    engine, _, _ = responses_with(time_runtime(clock), reply)
    weather = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
    final = asyncio.run(
        respond(engine, input="Go", tools=[mcp_tool(require_approval="never"), weather])
    )
    assert [o.type for o in final.output] == ["mcp_list_tools", "mcp_call", "function_call"]
    assert final.output[1].output == "12:00" and final.output[2].call_id == "c2"
    assert final.status == "completed"


def test_without_a_tool_runtime_mcp_and_web_search_are_refused():
    engine, _, _ = responses_with(FakeRuntime(), says("never"))
    engine.tools = None
    for tool in (mcp_tool(), {"type": "web_search"}):
        with pytest.raises(InvalidRequest, match="not available"):
            asyncio.run(respond(engine, input="Hi", tools=[tool]))


# --- Responses: file search ---------------------------------------------------------------------


def searchable(runtime: FakeRuntime) -> FakeRuntime:
    runtime.hits = [
        FileHit("file-otters", "otters.md", 0.91, "Otters hold hands while they sleep.", {}),
        FileHit("file-seals", "seals.txt", 0.42, "Seals sleep in the water.", {"kind": "seal"}),
    ]
    return runtime


def file_search_tool(**fields: Any) -> dict[str, Any]:
    return {"type": "file_search", "vector_store_ids": ["vs_1"], **fields}


def test_a_file_search_call_is_an_item_and_the_answer_cites_the_file_it_used():
    runtime = searchable(FakeRuntime())
    engine, storage, scripted = responses_with(
        runtime,
        calls(("c1", "file_search", '{"query": "how do otters sleep"}')),
        says("They hold hands <|fi", "le-otters|>. Also <|file-unknown|>."),
    )
    events = asyncio.run(
        stream_response(
            engine,
            input="How do otters sleep?",
            tools=[file_search_tool(max_num_results=5)],
            include=["file_search_call.results"],
        )
    )
    names = types_and_numbers(events)
    assert names[2:7] == [
        "output_item.added",
        "file_search_call.in_progress",
        "file_search_call.searching",
        "file_search_call.completed",
        "output_item.done",
    ]
    assert "output_text.annotation.added" in names
    final = events[-1].response
    search, answer = final.output
    assert (search.type, search.queries, search.status) == (
        "file_search_call",
        ["how do otters sleep"],
        "completed",
    )
    assert [r["file_id"] for r in search.results] == ["file-otters", "file-seals"]
    text = answer.content[0].text
    assert text == "They hold hands . Also <|file-unknown|>."
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == text
    (citation,) = answer.content[0].annotations
    assert (citation.type, citation.file_id, citation.filename) == (
        "file_citation",
        "file-otters",
        "otters.md",
    )
    assert text[: citation.index] == "They hold hands "
    assert runtime.searches == [(TENANT, ["vs_1"], "how do otters sleep", 5)]
    tool_text = scripted.requests[1].messages[-1].content
    assert "<|file-otters|> otters.md" in tool_text and "Seals sleep" in tool_text
    assert storage.response(TENANT, final.id).output == final.output


def test_file_search_results_stay_out_of_the_item_unless_included():
    runtime = searchable(FakeRuntime())
    engine, _, _ = responses_with(
        runtime, calls(("c1", "file_search", '{"query": "otters"}')), says("Done.")
    )
    response = asyncio.run(respond(engine, input="Otters?", tools=[file_search_tool()]))
    assert response.output[0].results is None


def test_a_file_search_call_without_a_query_searches_for_the_users_words():
    runtime = searchable(FakeRuntime())
    engine, _, _ = responses_with(runtime, calls(("c1", "file_search", "{}")), says("Done."))
    asyncio.run(respond(engine, input="sleeping otters", tools=[file_search_tool()]))
    assert runtime.searches[0][2] == "sleeping otters"


def test_citations_take_markers_split_across_deltas_and_leave_other_text_alone():
    citations = Citations({"file-a": "a.md"})
    out, found = [], []
    for delta in ["x <", "|file", "-a|> y <| not a marker", " |> z <", ""]:
        text, cited = citations.feed(delta)
        out.append(text)
        found += cited
    out.append(citations.flush())
    assert "".join(out) == "x  y <| not a marker |> z <"
    assert found == [("file-a", "a.md", 2)]
