"""The tool runtime against real local peers: an MCP server over streamable HTTP (FastMCP) and a
web search API stub; the outbound guard with the system resolver and a stand-in one."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace

import boto3
import pytest
from agents_core import secrets
from agents_core.settings import Settings
from agents_core.tools import (
    WEB_SEARCH,
    McpServer,
    McpTool,
    OfflineWebSearch,
    OutboundGuard,
    OutboundRefused,
    SearchResult,
    ToolDefinition,
    ToolFailed,
    WebSearchTool,
    call_mcp_tool,
    forget_cached_tools,
    list_mcp_tools,
    web_search_provider,
)
from agents_core.tools.web_search import render_results
from moto import mock_aws

from .peers.mcp_server import McpPeer
from .peers.search_api import SearchApiStub

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
    echo = ToolDefinition(name="echo", description="", parameters={"type": "object"})
    tool = McpTool(McpServer(peer.url), echo, LOOPBACK, timeout=10, max_bytes=1000)
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


# --- the outbound guard ------------------------------------------------------------------------


def resolving(table: dict[str, list[str]]):
    """A stand-in resolver: the names a test needs, without DNS."""

    async def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise OSError("no such host")
        return table[host]

    return resolve


def refusal(guard: OutboundGuard, url: str) -> str:
    with pytest.raises(OutboundRefused) as caught:
        asyncio.run(guard.check(url))
    assert caught.value.status == 400
    return str(caught.value)


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://169.254.169.254/latest/meta-data/iam/security-credentials/", "instance metadata"),
        ("http://[fd00:ec2::254]/latest/meta-data/", "instance metadata"),
        ("http://169.254.10.1/", "link-local"),
        ("http://[fe80::1]/", "link-local"),
        ("http://127.0.0.1:8321/v1/agents", "loopback"),
        ("http://[::1]/", "loopback"),
        ("http://10.1.2.3/mcp", "private"),
        ("http://192.168.0.1/", "private"),
        ("http://172.16.5.5/", "private"),
        ("http://0.0.0.0:8000/", "unspecified"),
        ("http://[::]/", "unspecified"),
        ("http://224.0.0.1/", "multicast"),
        ("http://240.0.0.1/", "reserved"),
        ("http://[::ffff:169.254.169.254]/", "IPv4-mapped instance metadata"),
        ("http://[::ffff:10.0.0.1]/", "IPv4-mapped private"),
        ("http://[64:ff9b::a9fe:a9fe]/", "IPv4-mapped instance metadata"),
    ],
)
def test_the_guard_refuses_addresses_that_are_not_public(url, kind):
    message = refusal(OutboundGuard(), url)

    assert f": {kind} addresses are not called on a caller's behalf" in message


def test_the_guard_refuses_a_name_that_resolves_to_a_private_address():
    guard = OutboundGuard(resolve=resolving({"mcp.corp.example": ["93.184.216.34", "10.0.0.7"]}))

    message = refusal(guard, "https://mcp.corp.example/mcp")

    assert message.startswith("refused to call mcp.corp.example (it resolves to 10.0.0.7): private")


def test_the_guard_refuses_localhost_through_the_system_resolver():
    assert "loopback" in refusal(OutboundGuard(), "http://localhost:8000/mcp")


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://example.com/x", "gopher://a/", "http:///path"]
)
def test_the_guard_refuses_urls_that_are_not_http_with_a_host(url):
    message = refusal(OutboundGuard(["0.0.0.0/0"]), url)

    assert "only http and https" in message or "no host" in message


def test_the_guard_refuses_a_name_that_does_not_resolve():
    guard = OutboundGuard(resolve=resolving({}))

    assert (
        refusal(guard, "http://nowhere.example/")
        == "refused to call nowhere.example: resolving it failed"
    )


def test_the_guard_allows_public_addresses():
    guard = OutboundGuard(
        resolve=resolving({"mcp.example.com": ["93.184.216.34", "2606:2800:220:1::1"]})
    )

    assert asyncio.run(guard.resolve("https://mcp.example.com/mcp")) == [
        "93.184.216.34",
        "2606:2800:220:1::1",
    ]


def test_the_guard_allows_loopback_when_the_allow_list_names_its_network():
    guard = OutboundGuard(["127.0.0.0/8", "::1/128"])

    asyncio.run(guard.check("http://127.0.0.1:8000/mcp"))
    asyncio.run(guard.check("http://[::1]:8000/mcp"))
    asyncio.run(guard.check("http://localhost:8000/mcp"))  # the system resolver's answer
    assert "private" in refusal(guard, "http://10.0.0.1/")


def test_the_guard_allows_a_host_named_in_the_allow_list_whatever_it_resolves_to():
    guard = OutboundGuard(
        ["mcp.internal"], resolve=resolving({"mcp.internal": ["10.0.0.9"], "other": ["10.0.0.9"]})
    )

    assert asyncio.run(guard.resolve("http://mcp.internal/mcp")) == ["10.0.0.9"]
    assert "private" in refusal(guard, "http://other/mcp")


def test_an_allow_list_entry_that_is_not_a_valid_cidr_is_a_configuration_error():
    with pytest.raises(ValueError, match="not a valid CIDR"):
        OutboundGuard(["10.0.0.0/33"])


def test_the_guard_checks_each_request_the_mcp_client_sends_including_redirects(peer):
    """The transport re-checks: a server allowed by name cannot redirect the call elsewhere."""
    only_localhost = OutboundGuard(["localhost"])
    server = McpServer(peer.url.replace("127.0.0.1", "localhost"))

    assert called(server, "add", {"a": 1, "b": 1}, guard=only_localhost) == "2"
    assert peer.requests[-1][2]["host"].startswith("localhost:")  # pinned address, same Host


# --- web search --------------------------------------------------------------------------------


def search_settings(**kwargs) -> Settings:
    options = {"web_search_provider": "tavily", "web_search_timeout_seconds": 5.0, **kwargs}
    return replace(Settings(), **options)


@pytest.fixture
def search_api():
    with SearchApiStub() as stub:
        yield stub


@pytest.fixture
def secrets_client(aws_env):
    secrets.forget()
    with mock_aws():
        yield boto3.client("secretsmanager", region_name="us-east-1")
    secrets.forget()


def searched(tool: WebSearchTool, query: str = "llamas") -> dict:
    return json.loads(asyncio.run(tool.call(json.dumps({"query": query}))))


def test_the_web_search_tool_is_named_and_shaped_as_llama_stacks():
    assert WEB_SEARCH.name == "web_search"
    assert WEB_SEARCH.description == "Search the web for information"
    assert WEB_SEARCH.parameters["required"] == ["query"]
    assert WebSearchTool(OfflineWebSearch()).definition == WEB_SEARCH


def test_offline_web_search_is_the_default_and_answers_the_same_query_the_same_way():
    tool = WebSearchTool(web_search_provider(Settings()))

    first, again, other = (
        searched(tool, "llamas"),
        searched(tool, "llamas"),
        searched(tool, "alpacas"),
    )

    assert first == again
    assert first != other
    assert first["query"] == "llamas"
    assert [set(item) for item in first["top_k"]] == [{"title", "url", "content"}] * 3
    assert "llamas" in first["top_k"][0]["title"]


def test_the_search_api_is_called_with_the_key_from_secrets_manager(search_api, secrets_client):
    secrets_client.create_secret(
        Name="search-key", SecretString=json.dumps({"api_key": "tvly-123"})
    )
    settings = search_settings(
        web_search_base_url=search_api.url, web_search_api_key_secret_id="search-key"
    )
    tool = WebSearchTool(
        web_search_provider(settings, secrets_client=secrets_client), max_results=2
    )

    answer = searched(tool, "llama facts")

    assert search_api.requests == [("Bearer tvly-123", {"query": "llama facts", "max_results": 2})]
    assert answer == {
        "query": "llama facts",
        "top_k": [
            {
                "title": "Result 1 about llama facts",
                "url": "https://example.com/1",
                "content": "What the web says about llama facts, number 1.",
            },
            {
                "title": "Result 2 about llama facts",
                "url": "https://example.com/2",
                "content": "What the web says about llama facts, number 2.",
            },
        ],
    }


def test_a_search_api_error_fails_the_call_with_its_status(search_api, secrets_client):
    secrets_client.create_secret(Name="search-key", SecretString="tvly-123")
    settings = search_settings(
        web_search_base_url=search_api.url, web_search_api_key_secret_id="search-key"
    )
    tool = WebSearchTool(web_search_provider(settings, secrets_client=secrets_client))
    search_api.mode = "status"

    message = failure(lambda: searched(tool))

    assert message.startswith("web search failed: the search API answered HTTP 500")
    assert "search backend down" in message


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("garbage", "web search failed: the search API's answer was not understood"),
        ("huge", "web search failed: the answer passed the 1048576 byte bound"),
    ],
)
def test_a_search_api_answer_that_is_not_results_fails_the_call(search_api, mode, expected):
    tool = WebSearchTool(web_search_provider(search_settings(web_search_base_url=search_api.url)))
    tool.provider._key = "tvly-123"  # noqa: SLF001 - the key's source is tested above
    search_api.mode = mode

    assert failure(lambda: searched(tool)) == expected


def test_a_search_api_that_does_not_answer_fails_the_call_at_the_timeout(search_api):
    settings = search_settings(web_search_base_url=search_api.url, web_search_timeout_seconds=0.5)
    tool = WebSearchTool(web_search_provider(settings))
    tool.provider._key = "tvly-123"  # noqa: SLF001
    search_api.mode = "hang"

    assert failure(lambda: searched(tool)) == "web search timed out after 0.5 s"


def test_a_missing_search_key_secret_fails_the_call_saying_so(search_api, secrets_client):
    settings = search_settings(
        web_search_base_url=search_api.url, web_search_api_key_secret_id="absent"
    )
    tool = WebSearchTool(web_search_provider(settings, secrets_client=secrets_client))

    message = failure(lambda: searched(tool))

    assert message.startswith(
        "web search is unavailable: its API key: secret 'absent' could not be read"
    )
    assert search_api.requests == []


def test_a_search_provider_without_a_key_secret_fails_the_call_saying_so(search_api):
    tool = WebSearchTool(web_search_provider(search_settings(web_search_base_url=search_api.url)))

    assert "WEB_SEARCH_API_KEY_SECRET_ID" in failure(lambda: searched(tool))


def test_an_unknown_web_search_provider_is_a_configuration_error():
    with pytest.raises(ValueError, match="use offline or tavily"):
        web_search_provider(replace(Settings(), web_search_provider="bing"))


@pytest.mark.parametrize("arguments", ["{}", '{"query": ""}', '{"query": 3}', "nope"])
def test_a_web_search_call_without_a_query_fails_saying_so(arguments):
    tool = WebSearchTool(OfflineWebSearch())

    assert failure(lambda: asyncio.run(tool.call(arguments)))


def test_web_search_results_are_kept_within_the_tool_result_bound():
    results = [
        SearchResult(f"title {i}", f"https://example.com/{i}", "x" * 50_000) for i in range(5)
    ]

    text = render_results("q", results, 20_000)

    assert len(text.encode()) <= 20_000
    assert len(json.loads(text)["top_k"]) >= 1


def test_the_mcp_client_connects_to_the_addresses_the_guard_checked_in_order(peer):
    """No second DNS answer is used (DNS rebinding): the connection goes to the checked
    addresses, the next one when the first refuses."""
    checked = resolving({"localhost": ["127.0.0.2", "127.0.0.1"]})  # nothing listens on .2
    guard = OutboundGuard(["127.0.0.0/8"], resolve=checked)

    server = McpServer(peer.url.replace("127.0.0.1", "localhost"))

    assert called(server, "add", {"a": 2, "b": 2}, guard=guard) == "4"


def test_a_cut_result_never_splits_a_character_and_stays_within_the_bound():
    from agents_core.tools.base import truncate

    text = truncate("é" * 1000, 300)

    head, marker = text.split("\n[truncated: ")
    assert len(text.encode()) <= 300
    assert set(head) == {"é"}
    assert marker == f"the tool returned 2000 bytes; the first {len(head.encode())} are shown]"
    assert truncate("short", 300) == "short"


def test_importing_the_tool_runtime_loads_neither_mcp_nor_httpx():
    """A function that serves no server-side tool pays nothing for them at cold start."""
    import subprocess
    import sys

    code = "import sys, agents_core.tools; print(sorted({m.split('.')[0] for m in sys.modules} & {'mcp', 'httpx', 'anyio', 'jsonschema'}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert out.stdout.strip() == "[]"


def test_the_outbound_allow_list_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("OUTBOUND_ALLOW", " 10.0.0.0/8, mcp.internal ,,")
    monkeypatch.setenv("TOOL_RESULT_MAX_BYTES", "1000")

    settings = Settings.from_env()

    assert settings.outbound_allow == ("10.0.0.0/8", "mcp.internal")
    assert settings.tool_result_max_bytes == 1000
    assert Settings().outbound_allow == ()  # nothing private by default (Lambda)


# --- knowledge_search (builtin::rag) -------------------------------------------------------------


def test_knowledge_search_searches_the_stores_its_group_names_and_numbers_the_chunks():
    from types import SimpleNamespace

    from agents_core.tools import KnowledgeSearchTool

    asked = []

    async def search(tenant, stores, query, max_results):
        asked.append((tenant, list(stores), query, max_results))
        return [SimpleNamespace(file_id="file-1", filename="otters.md", score=0.9, text="Otters.")]

    tool = KnowledgeSearchTool(search, "acme")
    text = asyncio.run(tool.call('{"query": "otters", "vector_db_ids": ["vs_1"]}'))
    assert asked == [("acme", ["vs_1"], "otters", 5)]
    assert "[1] otters.md (document_id: file-1, score 0.90)\nOtters." in text
    for arguments, message in [
        ('{"vector_db_ids": ["vs_1"]}', "query"),
        ('{"query": "otters"}', "vector_db_ids"),
    ]:
        with pytest.raises(ToolFailed, match=message):
            asyncio.run(tool.call(arguments))
