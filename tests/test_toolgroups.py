"""Tool groups, tools and the tool runtime routes, through llama-stack-client 0.2.12: the app
in process over moto (two tenants, as API Gateway names them), and the local server as `make run`
starts it. MCP servers are a real one over streamable HTTP (tests/peers/mcp_server.py)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
import uvicorn
from agents_core.api.agents import AgentToolGroupWithArgs
from agents_core.api.tools import ProviderData
from agents_core.errors import InvalidRequest
from agents_core.services import build_services
from agents_core.settings import Settings
from agents_core.web.agents import router as agents_router
from agents_core.web.app import create_app
from agents_core.web.tools import router as tools_router
from llama_stack_client import APIStatusError, LlamaStackClient
from llama_stack_client.lib.agents.agent import Agent

from .conftest import TABLE
from .legacy_support import tenant_headers
from .local_server import running_server
from .peers.mcp_server import McpPeer

MCP = "model-context-protocol"
ALICE, BOB = "user-alice", "user-bob"


@pytest.fixture(scope="module")
def peer() -> Iterator[McpPeer]:
    with McpPeer() as server:
        yield server


@pytest.fixture
def services(dynamodb):
    settings = Settings(
        table_name=TABLE,
        trust_request_context_header=True,
        outbound_allow=("127.0.0.0/8",),
        mcp_call_timeout_seconds=5,
        mcp_list_cache_seconds=0,
    )
    return build_services(settings, dynamodb)


@pytest.fixture
def app(services):
    return create_app(agents_router, tools_router, services=services)


@contextmanager
def serving(app) -> Iterator[str]:
    """The app on 127.0.0.1 over real HTTP (uvicorn in a thread), as a function serves it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=5)
        sock.close()


@pytest.fixture
def base(app) -> Iterator[str]:
    with serving(app) as url:
        yield url


@pytest.fixture
def client_as(base):
    """`client_as(tenant, **options)`: llama-stack-client calling the app as that tenant."""

    def make(tenant: str = ALICE, **options) -> LlamaStackClient:
        return LlamaStackClient(
            base_url=base, default_headers=tenant_headers(tenant), max_retries=0, **options
        )

    return make


@pytest.fixture
def alice(client_as) -> LlamaStackClient:
    return client_as(ALICE)


def register(client: LlamaStackClient, url: str, toolgroup_id: str = "mcp::peer", **kw) -> None:
    client.toolgroups.register(
        toolgroup_id=toolgroup_id, provider_id=MCP, mcp_endpoint={"uri": url}, **kw
    )


def status_of(call) -> tuple[int, str]:
    with pytest.raises(APIStatusError) as caught:
        call()
    return caught.value.status_code, caught.value.response.json()["detail"]


def group_ids(client: LlamaStackClient) -> list[str]:
    return [g.identifier for g in client.toolgroups.list()]


# --- built-in groups ---------------------------------------------------------------------------


def test_web_search_is_a_group_of_every_tenant_without_registering(client_as):
    for tenant in (ALICE, BOB):
        client = client_as(tenant)
        assert group_ids(client) == ["builtin::websearch", "builtin::rag"]
        group = client.toolgroups.get("builtin::websearch")
        assert group.type == "tool_group" and group.provider_id.endswith("-search")
        (tool,) = client.tools.list(toolgroup_id="builtin::websearch")
        assert (tool.identifier, tool.toolgroup_id) == ("web_search", "builtin::websearch")
        assert [(p.name, p.parameter_type, p.required) for p in tool.parameters] == [
            ("query", "string", True)
        ]


def test_web_search_runs_through_the_tool_runtime(alice):
    result = alice.tool_runtime.invoke_tool(tool_name="web_search", kwargs={"query": "llamas"})
    assert result.error_code is None and result.error_message is None
    assert "llamas" in str(result.content)


def test_registering_a_built_in_group_again_is_a_no_op_and_unregistering_it_a_400(alice):
    group = alice.toolgroups.get("builtin::websearch")
    alice.toolgroups.register(toolgroup_id="builtin::websearch", provider_id="tavily-search")
    alice.toolgroups.register(toolgroup_id="builtin::websearch", provider_id=group.provider_id)
    assert group_ids(alice) == ["builtin::websearch", "builtin::rag"]
    status, detail = status_of(lambda: alice.toolgroups.unregister("builtin::websearch"))
    assert status == 400 and "built in" in detail
    assert alice.toolgroups.get("builtin::websearch") == group


# --- MCP groups ----------------------------------------------------------------------------------


def test_an_mcp_server_registered_is_listed_its_tools_run_and_it_unregisters(alice, peer):
    register(alice, peer.url)
    assert group_ids(alice) == ["builtin::websearch", "builtin::rag", "mcp::peer"]
    group = alice.toolgroups.get("mcp::peer")
    assert (group.provider_id, group.mcp_endpoint.uri) == (MCP, peer.url)

    tools = {t.identifier: t for t in alice.tools.list(toolgroup_id="mcp::peer")}
    assert {"add", "echo", "fail", "header"} <= set(tools)
    add = alice.tools.get("add")
    assert add == tools["add"]
    assert (add.toolgroup_id, add.provider_id, add.metadata) == (
        "mcp::peer",
        MCP,
        {"endpoint": peer.url},
    )
    assert {(p.name, p.parameter_type, p.required) for p in add.parameters} == {
        ("a", "integer", True),
        ("b", "integer", True),
    }
    everything = [t.identifier for t in alice.tools.list()]
    assert everything[0] == "web_search" and set(tools) <= set(everything)

    result = alice.tool_runtime.invoke_tool(tool_name="add", kwargs={"a": 2, "b": 40})
    assert (result.content, result.error_code) == ("42", None)

    alice.toolgroups.unregister("mcp::peer")
    assert group_ids(alice) == ["builtin::websearch", "builtin::rag"]
    assert status_of(lambda: alice.toolgroups.get("mcp::peer"))[0] == 404
    assert status_of(lambda: alice.tools.get("add"))[0] == 404
    assert status_of(lambda: alice.toolgroups.unregister("mcp::peer"))[0] == 404


def test_a_tool_that_fails_answers_its_error_as_the_result(alice, peer):
    register(alice, peer.url)
    result = alice.tool_runtime.invoke_tool(tool_name="fail", kwargs={"message": "disk on fire"})
    assert result.error_code == 1
    assert "disk on fire" in result.error_message and "disk on fire" in str(result.content)


def test_the_runtime_lists_a_group_or_an_endpoint_as_the_client_asks(alice, peer):
    register(alice, peer.url)
    by_group = alice.tool_runtime.list_tools(tool_group_id="mcp::peer")
    by_endpoint = alice.tool_runtime.list_tools(mcp_endpoint={"uri": peer.url})
    assert {t.name for t in by_group} == {t.name for t in by_endpoint} >= {"add", "echo"}
    assert all(t.metadata == {"endpoint": peer.url} for t in by_endpoint)
    add = next(t for t in by_endpoint if t.name == "add")
    assert add.description == "Add two integers."


def test_mcp_headers_from_the_provider_data_reach_their_server_only(client_as, peer):
    other = "http://127.0.0.1:9/mcp"
    client = client_as(
        ALICE,
        provider_data={
            "mcp_headers": {
                peer.url: {"X-Api-Token": "secret-1"},
                other: {"X-Api-Token": "not-this-one"},
            }
        },
    )
    register(client, peer.url)
    result = client.tool_runtime.invoke_tool(tool_name="header", kwargs={"name": "x-api-token"})
    assert result.content == "secret-1"
    plain = client_as(ALICE).tool_runtime.invoke_tool(
        tool_name="header", kwargs={"name": "x-api-token"}
    )
    assert plain.content == "(none)"


def test_registering_the_same_group_again_is_a_no_op_and_another_definition_409(alice, peer):
    register(alice, peer.url, args={"k": 1})
    register(alice, peer.url, args={"k": 1})
    status, detail = status_of(lambda: register(alice, peer.url, args={"k": 2}))
    assert status == 409 and "unregister" in detail
    assert alice.toolgroups.get("mcp::peer").args == {"k": 1}


def test_a_server_gone_is_a_502_for_its_tools_and_passed_over_by_invoke(alice, peer):
    with McpPeer() as gone:
        register(alice, gone.url, toolgroup_id="mcp::gone")
    register(alice, peer.url)
    status, detail = status_of(lambda: alice.tools.list(toolgroup_id="mcp::gone"))
    assert status == 502 and "mcp::gone" in detail
    assert status_of(lambda: alice.tools.list())[0] == 502
    result = alice.tool_runtime.invoke_tool(tool_name="echo", kwargs={"text": "still here"})
    assert result.content == "still here"
    status, detail = status_of(lambda: alice.tools.get("no_such_tool"))
    assert status == 404 and "mcp::gone" in detail


def test_the_clients_agent_class_finds_the_tools_of_its_groups(alice, peer):
    register(alice, peer.url)
    agent = Agent(
        alice,
        model="offline",
        instructions="Use tools.",
        tools=["builtin::websearch", {"name": "mcp::peer", "args": {"b": 1}}],
    )
    assert agent.builtin_tools["web_search"] == {}
    assert agent.builtin_tools["add"] == {"b": 1}


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"toolgroup_id": "mcp::x", "provider_id": "tavily-search"}, "provider_id"),
        ({"toolgroup_id": "mcp::x", "provider_id": MCP}, "mcp_endpoint"),
        (
            {"toolgroup_id": "mcp#x", "provider_id": MCP, "mcp_endpoint": {"uri": "PEER"}},
            "toolgroup_id",
        ),
        (
            {"toolgroup_id": "a/b", "provider_id": MCP, "mcp_endpoint": {"uri": "PEER"}},
            "toolgroup_id",
        ),
        (
            {"toolgroup_id": "m" * 257, "provider_id": MCP, "mcp_endpoint": {"uri": "PEER"}},
            "toolgroup_id",
        ),
        (
            {"toolgroup_id": "mcp::x", "provider_id": MCP, "mcp_endpoint": {"uri": "ftp://h/x"}},
            "http",
        ),
        (
            {
                "toolgroup_id": "mcp::x",
                "provider_id": MCP,
                "mcp_endpoint": {"uri": "http://h/" + "x" * 2100},
            },
            "mcp_endpoint",
        ),
        ({"toolgroup_id": "builtin::code", "provider_id": "x"}, "builtin::websearch"),
        (
            {
                "toolgroup_id": "builtin::websearch",
                "provider_id": MCP,
                "mcp_endpoint": {"uri": "PEER"},
            },
            "always registered",
        ),
        (
            {
                "toolgroup_id": "mcp::x",
                "provider_id": MCP,
                "mcp_endpoint": {"uri": "http://169.254.169.254/latest/meta-data"},
            },
            "169.254.169.254",
        ),
        (
            {
                "toolgroup_id": "mcp::x",
                "provider_id": MCP,
                "mcp_endpoint": {"uri": "http://127.0.0.1:9/mcp"},
            },
            "did not list its tools",
        ),
    ],
)
def test_bad_registrations_are_400_and_store_nothing(base, alice, peer, body, says):
    body = json.loads(json.dumps(body).replace("PEER", peer.url))
    resp = httpx.post(f"{base}/v1/toolgroups", json=body, headers=tenant_headers(ALICE))
    assert resp.status_code == 400, resp.text
    assert says in resp.json()["detail"]
    assert group_ids(alice) == ["builtin::websearch", "builtin::rag"]


def test_a_group_too_large_to_store_is_413_and_stores_nothing(base, alice, peer):
    body = {"toolgroup_id": "mcp::big", "provider_id": MCP, "mcp_endpoint": {"uri": peer.url}}
    body["args"] = {"blob": "x" * 500_000}
    resp = httpx.post(f"{base}/v1/toolgroups", json=body, headers=tenant_headers(ALICE))
    assert resp.status_code == 413, resp.text
    assert group_ids(alice) == ["builtin::websearch", "builtin::rag"]


def test_bad_tool_references_and_provider_data_are_400(base, client_as):
    http = httpx.Client(base_url=base)
    assert http.get("/v1/toolgroups/mcp%23x").status_code == 400
    assert http.get("/v1/tools", params={"toolgroup_id": "x" * 600}).status_code == 400
    assert http.post("/v1/tool-runtime/invoke", json={"tool_name": "add"}).status_code == 400
    bad = http.get("/v1/tools", headers={"X-LlamaStack-Provider-Data": "{not json"})
    assert bad.status_code == 400 and "X-LlamaStack-Provider-Data" in bad.json()["detail"]
    wrong = {"X-LlamaStack-Provider-Data": json.dumps({"mcp_headers": {"http://h/": "token"}})}
    assert http.get("/v1/tools", headers=wrong).status_code == 400
    endpoint = http.get(
        "/v1/tool-runtime/list-tools", params={"mcp_endpoint[uri]": "file:///etc/passwd"}
    )
    assert endpoint.status_code == 400
    assert status_of(lambda: client_as(ALICE).tools.get("no_such_tool"))[0] == 404


# --- tenants -------------------------------------------------------------------------------------


def test_a_tenant_never_sees_or_changes_another_tenants_groups(client_as, peer):
    alice, bob = client_as(ALICE), client_as(BOB)
    register(alice, peer.url)
    assert group_ids(bob) == ["builtin::websearch", "builtin::rag"]
    assert status_of(lambda: bob.toolgroups.get("mcp::peer"))[0] == 404
    assert status_of(lambda: bob.toolgroups.unregister("mcp::peer"))[0] == 404
    assert status_of(lambda: bob.tools.list(toolgroup_id="mcp::peer"))[0] == 404
    assert status_of(lambda: bob.tools.get("add"))[0] == 404
    assert (
        status_of(lambda: bob.tool_runtime.invoke_tool(tool_name="add", kwargs={"a": 1, "b": 2}))[0]
        == 404
    )
    # Bob may use the same id for a server of his own.
    register(bob, peer.url, args={"owner": "bob"})
    assert alice.toolgroups.get("mcp::peer").args is None
    assert group_ids(alice) == ["builtin::websearch", "builtin::rag", "mcp::peer"]


# --- for the agent loop ------------------------------------------------------------------------


def test_an_agents_tool_groups_resolve_into_tools_the_loop_can_run(services, peer):
    svc, data = services.toolgroups, ProviderData()

    async def scenario():
        await svc.register(ALICE, _request("mcp::peer", peer.url), data)
        named = ["builtin::websearch", AgentToolGroupWithArgs(name="mcp::peer/add", args={"b": 1})]
        tools = await svc.resolve(ALICE, named, data)
        return tools, await tools[1].call(json.dumps({"a": 1, "b": 100}))

    tools, answer = asyncio.run(scenario())
    assert [(t.toolgroup_id, t.definition.name) for t in tools] == [
        ("builtin::websearch", "web_search"),
        ("mcp::peer", "add"),
    ]
    assert answer == "2"  # the agent's args win over the model's
    with pytest.raises(InvalidRequest, match="not registered"):
        asyncio.run(svc.resolve(BOB, ["mcp::peer"], data))
    with pytest.raises(InvalidRequest, match="no tool nope"):
        asyncio.run(svc.resolve(ALICE, ["mcp::peer/nope"], data))


def _request(toolgroup_id: str, url: str):
    from agents_core.api.tools import RegisterToolGroupRequest

    return RegisterToolGroupRequest(
        toolgroup_id=toolgroup_id, provider_id=MCP, mcp_endpoint={"uri": url}
    )


# --- the local server ----------------------------------------------------------------------------


def test_the_local_server_serves_tool_groups_to_the_client(peer):
    with running_server() as (base, _):
        client = LlamaStackClient(base_url=base, max_retries=0)
        register(client, peer.url, toolgroup_id="mcp::local")
        assert group_ids(client) == ["builtin::websearch", "builtin::rag", "mcp::local"]
        assert "echo" in [t.identifier for t in client.tools.list(toolgroup_id="mcp::local")]
        result = client.tool_runtime.invoke_tool(tool_name="echo", kwargs={"text": "hi there"})
        assert result.content == "hi there"
        client.toolgroups.unregister("mcp::local")
        assert group_ids(client) == ["builtin::websearch", "builtin::rag"]


def test_the_document_lists_the_statuses_the_tool_routes_answer(base):
    paths = httpx.get(f"{base}/openapi.json").json()["paths"]
    assert {"409", "413", "415"} <= set(paths["/v1/toolgroups"]["post"]["responses"])
    assert "404" in paths["/v1/toolgroups/{toolgroup_id}"]["delete"]["responses"]
    for path in ("/v1/tools", "/v1/tools/{tool_name}", "/v1/tool-runtime/list-tools"):
        assert {"404", "502"} <= set(paths[path]["get"]["responses"]), path
    assert "404" in paths["/v1/tool-runtime/invoke"]["post"]["responses"]
    missing = httpx.post(f"{base}/v1/tool-runtime/invoke", json={"tool_name": "nope", "kwargs": {}})
    assert missing.status_code == 404
