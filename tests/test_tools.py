"""The tool runtime against real local peers: an MCP server over streamable HTTP (FastMCP) and a
web search API stub; the outbound guard with the system resolver and a stand-in one."""

from __future__ import annotations

import asyncio
import time

import pytest
from agents_core.tools import (
    McpServer,
    McpTool,
    OutboundGuard,
    OutboundRefused,
    ToolFailed,
    call_mcp_tool,
    list_mcp_tools,
)
from agents_core.tools.mcp_client import forget_cached_tools

from .peers.mcp_server import McpPeer

LOOPBACK = OutboundGuard(["127.0.0.0/8", "::1/128"])


@pytest.fixture(scope="module")
def peer():
    with McpPeer() as server:
        yield server


@pytest.fixture(autouse=True)
def no_cached_tools():
    forget_cached_tools()
    yield
    forget_cached_tools()


def listed(server: McpServer, **kwargs) -> list:
    options = {"guard": LOOPBACK, "timeout": 10.0, "cache_seconds": 60.0, **kwargs}
    return asyncio.run(list_mcp_tools(server, **options))


def called(server: McpServer, name: str, arguments: dict, **kwargs) -> str:
    options = {"guard": LOOPBACK, "timeout": 10.0, "max_bytes": 65536, **kwargs}
    return asyncio.run(call_mcp_tool(server, name, arguments, **options))


def failure(call) -> str:
    with pytest.raises(ToolFailed) as caught:
        call()
    return str(caught.value)


# --- MCP ---------------------------------------------------------------------------------------


def test_an_mcp_servers_tools_are_listed_with_their_argument_schemas(peer):
    tools = {tool.name: tool for tool in listed(McpServer(peer.url))}

    assert {"add", "echo", "fail", "hang", "big", "header"} <= set(tools)
    assert tools["add"].description == "Add two integers."
    assert tools["add"].parameters["type"] == "object"
    assert set(tools["add"].parameters["properties"]) == {"a", "b"}
    assert tools["add"].parameters["required"] == ["a", "b"]


def test_a_second_listing_within_the_cache_time_makes_no_request(peer):
    server = McpServer(peer.url)
    first = listed(server)
    before = len(peer.requests)
    second = listed(server)

    assert second == first
    assert len(peer.requests) == before


def test_the_cache_keeps_callers_with_different_headers_apart(peer):
    listed(McpServer(peer.url, {"Authorization": "Bearer one"}))
    before = len(peer.requests)
    listed(McpServer(peer.url, {"Authorization": "Bearer two"}))

    assert len(peer.requests) > before


def test_a_listing_past_the_cache_time_asks_the_server_again(peer):
    server = McpServer(peer.url)
    listed(server, cache_seconds=0.01)
    time.sleep(0.05)
    before = len(peer.requests)
    listed(server, cache_seconds=0.01)

    assert len(peer.requests) > before


def test_a_tool_call_answers_the_tools_text(peer):
    assert called(McpServer(peer.url), "add", {"a": 2, "b": 40}) == "42"


def test_the_requests_headers_reach_the_mcp_server(peer):
    server = McpServer(peer.url, {"Authorization": "Bearer secret-token", "X-Tenant": "t1"})

    assert called(server, "header", {"name": "authorization"}) == "Bearer secret-token"
    assert called(server, "header", {"name": "x-tenant"}) == "t1"
    assert {"authorization": "Bearer secret-token"}.items() <= peer.requests[-1][2].items()


def test_a_tool_that_raises_fails_with_its_message(peer):
    message = failure(lambda: called(McpServer(peer.url), "fail", {"message": "disk on fire"}))

    assert "disk on fire" in message


def test_an_unknown_tool_fails_saying_so(peer):
    message = failure(lambda: called(McpServer(peer.url), "no_such_tool", {}))

    assert "no_such_tool" in message


def test_a_tool_that_hangs_fails_with_a_timeout_naming_the_bound(peer):
    server = McpServer(peer.url, label="slow-server")
    message = failure(lambda: called(server, "hang", {"seconds": 30}, timeout=1.0))

    assert message == "the MCP server slow-server timed out after 1 s calling hang"


def test_a_1_mb_result_is_cut_to_the_bound_with_a_marker(peer):
    text = called(McpServer(peer.url), "big", {"size": 1024 * 1024}, max_bytes=10_000)

    assert len(text.encode()) <= 10_000
    assert text.startswith("0123456789abcdef0123456789abcdef")
    assert "[truncated: the tool returned 1048576 bytes; the first" in text


def test_a_response_over_the_http_bound_fails_without_waiting_for_the_timeout(peer):
    server = McpServer(peer.url)
    message = failure(
        lambda: called(server, "big", {"size": 300_000}, max_response_bytes=100_000, timeout=60)
    )

    assert "passed the 100000 byte bound" in message


def test_an_unreachable_server_fails_the_listing_saying_so(peer):
    dead = McpServer("http://127.0.0.1:9/mcp", label="dead")

    assert (
        failure(lambda: listed(dead))
        == "the MCP server dead failed listing its tools: could not connect"
    )


def test_a_wrong_path_fails_the_listing(peer):
    message = failure(lambda: listed(McpServer(peer.url.replace("/mcp", "/elsewhere"))))

    assert message.startswith("the MCP server 127.0.0.1 failed listing its tools")


def test_an_mcp_tool_adapter_parses_the_models_arguments(peer):
    tools = {tool.name: tool for tool in listed(McpServer(peer.url))}
    tool = McpTool(McpServer(peer.url), tools["echo"], LOOPBACK, timeout=10, max_bytes=1000)

    assert asyncio.run(tool.call('{"text": "hello"}')) == "hello"


@pytest.mark.parametrize("arguments", ['{"text": ', "[1, 2]", "not json"])
def test_an_mcp_tool_adapter_refuses_arguments_that_are_not_a_json_object(peer, arguments):
    tool = McpTool(McpServer(peer.url), _definition("echo"), LOOPBACK, timeout=10, max_bytes=1000)
    before = len(peer.requests)

    message = failure(lambda: asyncio.run(tool.call(arguments)))

    assert "arguments" in message
    assert len(peer.requests) == before  # nothing was sent


def test_a_listing_of_a_server_the_guard_refuses_is_a_400_and_sends_nothing(peer):
    before = len(peer.requests)
    with pytest.raises(OutboundRefused) as caught:
        listed(McpServer(peer.url), guard=OutboundGuard())

    assert caught.value.status == 400
    assert "loopback" in str(caught.value)
    assert len(peer.requests) == before


def test_a_call_to_a_server_the_guard_refuses_fails_and_sends_nothing(peer):
    before = len(peer.requests)
    message = failure(
        lambda: called(McpServer(peer.url), "add", {"a": 1, "b": 2}, guard=OutboundGuard())
    )

    assert "refused to call 127.0.0.1" in message
    assert len(peer.requests) == before


def _definition(name: str):
    from agents_core.tools import ToolDefinition

    return ToolDefinition(name=name, description="", parameters={"type": "object"})
