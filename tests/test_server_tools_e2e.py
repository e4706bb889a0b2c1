"""Server-side tools end to end, as users run them: `make run`'s server, a real MCP server over
streamable HTTP (tests/peers/mcp_server.py), the scripted model server, and the clients users
have (llama-stack-client's `Agent`, the openai SDK)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import openai
import pytest
from llama_stack_client import LlamaStackClient
from llama_stack_client.lib.agents.agent import Agent
from llama_stack_client.lib.agents.client_tool import client_tool

from .conftest import error_message
from .local_server import running_server
from .peers.mcp_server import McpPeer

RESULT_BYTES = 4096


@pytest.fixture(scope="module")
def peer() -> Iterator[McpPeer]:
    with McpPeer() as server:
        yield server


@pytest.fixture(scope="module")
def base(model):
    env = {
        "OPENAI_BASE_URL": model.url,
        "MCP_CALL_TIMEOUT_SECONDS": "2",
        "MCP_LIST_CACHE_SECONDS": "0",
        "TOOL_RESULT_MAX_BYTES": str(RESULT_BYTES),
    }
    with running_server(env) as (url, _):
        yield url


@pytest.fixture
def llama(base, model, peer) -> LlamaStackClient:
    model.reset()
    client = LlamaStackClient(base_url=base)
    client.toolgroups.register(
        toolgroup_id="mcp::peer",
        provider_id="model-context-protocol",
        mcp_endpoint={"uri": peer.url},
    )
    return client


@pytest.fixture
def oai(base, model) -> openai.OpenAI:
    model.reset()
    return openai.OpenAI(base_url=f"{base}/v1/openai/v1", api_key="unused", max_retries=0)


def tool_messages(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


# --- Agents: tool groups -----------------------------------------------------------------------


def test_an_agent_calls_an_mcp_tool_group_and_answers_with_its_result(llama, model):
    model.reply(tool_calls=[("add", '{"a": 2, "b": 3}')])
    model.reply(text="It is 5.")
    agent = Agent(llama, model="m", instructions="Use tools.", tools=["mcp::peer"])
    session_id = agent.create_session("adding")
    chunks = list(
        agent.create_turn(messages=[{"role": "user", "content": "2+3?"}], session_id=session_id)
    )
    kinds = [
        (c.event.payload.event_type, getattr(c.event.payload, "step_type", None)) for c in chunks
    ]
    assert ("step_start", "tool_execution") in kinds
    assert ("step_progress", "tool_execution") in kinds
    turn = chunks[-1].event.payload.turn
    assert turn.output_message.content == "It is 5."
    (step,) = [s for s in turn.steps if s.step_type == "tool_execution"]
    assert [(r.tool_name, r.content) for r in step.tool_responses] == [("add", "5")]
    assert [t["function"]["name"] for t in model.requests[0]["tools"]] == [
        "add",
        "echo",
        "fail",
        "hang",
        "big",
        "header",
    ]
    assert tool_messages(model.requests[1]) == ["5"]


def test_a_turn_that_does_not_stream_runs_the_tool_and_passes_the_provider_data_headers(
    llama, model, peer
):
    model.reply(tool_calls=[("header", '{"name": "x-peer-token"}')])
    model.reply(text="Got it.")
    agent = llama.agents.create(
        agent_config={"model": "m", "instructions": "Use tools.", "toolgroups": ["mcp::peer"]}
    )
    session = llama.agents.session.create(agent_id=agent.agent_id, session_name="s")
    provider_data = {"mcp_headers": {peer.url: {"X-Peer-Token": "secret-1"}}}
    turn = llama.agents.turn.create(
        agent_id=agent.agent_id,
        session_id=session.session_id,
        messages=[{"role": "user", "content": "Which token?"}],
        stream=False,
        extra_headers={"X-LlamaStack-Provider-Data": json.dumps(provider_data)},
    )
    assert turn.output_message.content == "Got it."
    assert tool_messages(model.requests[1]) == ["secret-1"]


def test_a_reply_mixing_an_mcp_tool_and_a_client_tool_runs_both_through_the_agent(llama, model):
    @client_tool
    def get_weather(city: str) -> str:
        """The weather in a city.

        :param city: the city
        """
        return f"sunny in {city}"

    model.reply(tool_calls=[("add", '{"a": 1, "b": 1}'), ("get_weather", '{"city": "Oslo"}')])
    model.reply(text="2, and sunny.")
    agent = Agent(llama, model="m", instructions="Use tools.", tools=["mcp::peer", get_weather])
    session_id = agent.create_session("mixed")
    turn = agent.create_turn(
        messages=[{"role": "user", "content": "Both?"}], session_id=session_id, stream=False
    )
    assert turn.output_message.content == "2, and sunny."
    results = [
        (r.tool_name, r.content)
        for s in turn.steps
        if s.step_type == "tool_execution"
        for r in s.tool_responses
    ]
    # The client sends its tool's result JSON-encoded.
    assert results == [("add", "2"), ("get_weather", '"sunny in Oslo"')]
    assert sorted(tool_messages(model.requests[1])) == ['"sunny in Oslo"', "2"]


def test_an_agent_with_web_search_searches_and_answers(llama, model):
    model.reply(tool_calls=[("web_search", '{"query": "serverless agents"}')])
    model.reply(text="Found it.")
    agent = Agent(llama, model="m", instructions="Search.", tools=["builtin::websearch"])
    session_id = agent.create_session("search")
    turn = agent.create_turn(
        messages=[{"role": "user", "content": "Search."}], session_id=session_id, stream=False
    )
    assert turn.output_message.content == "Found it."
    (found,) = tool_messages(model.requests[1])
    assert json.loads(found)["query"] == "serverless agents"
    assert json.loads(found)["top_k"]


# --- Responses: MCP servers, approvals, web search ---------------------------------------------


def mcp(peer: McpPeer, **fields) -> dict:
    return {"type": "mcp", "server_label": "peer", "server_url": peer.url, **fields}


def test_a_response_lists_and_calls_an_mcp_tool_through_the_openai_sdk(oai, model, peer):
    model.reply(tool_calls=[("header", '{"name": "x-peer-token"}')])
    model.reply(text="The token is t-2.")
    tool = mcp(peer, require_approval="never", headers={"X-Peer-Token": "t-2"})
    with oai.responses.stream(model="m", input="Token?", tools=[tool]) as stream:
        kinds = [event.type for event in stream]
        response = stream.get_final_response()
    assert [o.type for o in response.output] == ["mcp_list_tools", "mcp_call", "message"]
    assert "response.mcp_call.completed" in kinds
    call = response.output[1]
    assert (call.name, call.output, call.server_label) == ("header", "t-2", "peer")
    assert response.output_text == "The token is t-2."
    stored = oai.responses.retrieve(response.id)
    assert stored.output[1].output == "t-2"
    assert all("headers" not in t.model_dump(exclude_none=True) for t in stored.tools)


def test_an_mcp_call_waits_for_approval_and_runs_once_approved(oai, model, peer):
    model.reply(tool_calls=[("add", '{"a": 20, "b": 22}')])
    model.reply(text="42.")
    waiting = oai.responses.create(model="m", input="20+22?", tools=[mcp(peer)])
    request = waiting.output[-1]
    assert request.type == "mcp_approval_request" and request.name == "add"
    calls_before = peer.count()
    done = oai.responses.create(
        model="m",
        previous_response_id=waiting.id,
        input=[
            {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}
        ],
        tools=[mcp(peer)],
    )
    call = next(o for o in done.output if o.type == "mcp_call")
    assert (call.approval_request_id, call.output) == (request.id, "42")
    assert done.output_text == "42."
    assert peer.count() > calls_before


@pytest.mark.parametrize(
    "arguments, check",
    [
        ('{"message": "it broke"}', lambda c: "it broke" in c.error.content[0]["text"]),
        ('{"seconds": 30}', lambda c: "timed out" in c.error.content[0]["text"]),
        (
            '{"size": 1048576}',
            lambda c: len(c.output.encode()) <= RESULT_BYTES and "truncated" in c.output,
        ),
    ],
    ids=["raises", "hangs", "1 MB"],
)
def test_a_tool_that_fails_hangs_or_floods_is_a_result_and_the_response_completes(
    oai, model, peer, arguments, check
):
    name = {"message": "fail", "seconds": "hang", "size": "big"}[next(iter(json.loads(arguments)))]
    model.reply(tool_calls=[(name, arguments)])
    model.reply(text="Noted.")
    response = oai.responses.create(
        model="m", input="Go", tools=[mcp(peer, require_approval="never")]
    )
    assert response.status == "completed" and response.output_text == "Noted."
    call = response.output[1]
    assert call.type == "mcp_call" and check(call)


def test_a_response_with_web_search_has_a_web_search_call_item(oai, model):
    model.reply(tool_calls=[("web_search", '{"query": "lambda streaming"}')])
    model.reply(text="Here is what I found.")
    response = oai.responses.create(model="m", input="Find", tools=[{"type": "web_search"}])
    search = response.output[0]
    assert (search.type, search.status, search.action.query) == (
        "web_search_call",
        "completed",
        "lambda streaming",
    )
    assert json.loads(tool_messages(model.requests[1])[0])["query"] == "lambda streaming"


def test_an_mcp_server_at_the_metadata_address_is_refused_with_a_400(base, model):
    model.reset()
    body = {
        "model": "m",
        "input": "Hi",
        "tools": [{"type": "mcp", "server_label": "imds", "server_url": "http://169.254.169.254/"}],
    }
    resp = httpx.post(f"{base}/v1/openai/v1/responses", json=body)
    assert resp.status_code == 400 and "169.254.169.254" in error_message(resp)
    assert model.requests == []
