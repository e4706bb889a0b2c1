"""MCP servers over streamable HTTP, with the official `mcp` package.

Each operation (list the tools, call one) opens its own session: an MCP session would not
outlive the Lambda invocation anyway, and a session per operation keeps no state between runs.
A server's tool list is cached per container for a short time (`MCP_LIST_CACHE_SECONDS`), keyed
by its URL and a hash of the headers sent to it (callers with different credentials may see
different tools; the headers themselves are neither kept as keys nor logged).

Bounds: the whole operation (connect, initialize, the call) has one deadline, each HTTP response
is read up to `max_response_bytes`, and the result text handed to the model is cut to
`max_bytes` with a marker. A failure of any kind is a ToolFailed whose message the model reads,
except a URL the outbound guard refuses, which is the caller's mistake (OutboundRefused, 400).

`mcp` (and its dependencies) is imported inside the functions, so a function that serves no
MCP tool never loads it.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..log import logger
from .base import ToolDefinition, ToolFailed, parse_arguments, truncate
from .guard import OutboundGuard, OutboundRefused

#: Default bound on the bytes of one HTTP response from an MCP server.
MAX_RESPONSE_BYTES = 4 * 1024 * 1024
#: At most this many servers' tool lists are cached per container.
_CACHE_ENTRIES = 256


@dataclass(frozen=True)
class McpServer:
    #: The streamable HTTP endpoint (e.g. https://mcp.example.com/mcp).
    url: str
    #: Sent with every request: auth headers from the request (the Responses tool's `headers`,
    #: or the Llama Stack client's provider data).
    headers: Mapping[str, str] = field(default_factory=dict)
    #: The Responses `server_label` or the tool group id: how messages name the server.
    label: str = ""

    @property
    def name(self) -> str:
        return self.label or _host_of(self.url)

    def cache_key(self) -> str:
        """The URL and a digest of the headers: no secret in the key."""
        headers = json.dumps(sorted((k.lower(), v) for k, v in self.headers.items()))
        return f"{self.url} {hashlib.sha256(headers.encode()).hexdigest()}"


_listed: dict[str, tuple[float, list[ToolDefinition]]] = {}


def forget_cached_tools() -> None:
    """Drop every cached tool list (tests)."""
    _listed.clear()


async def list_mcp_tools(
    server: McpServer,
    *,
    guard: OutboundGuard,
    timeout: float,
    cache_seconds: float,
    max_response_bytes: int = MAX_RESPONSE_BYTES,
) -> list[ToolDefinition]:
    """The server's tools (every page), from the container's cache when listed less than
    `cache_seconds` ago. OutboundRefused if the guard refuses the URL; ToolFailed if the server
    cannot be reached, fails or does not answer within `timeout` seconds."""
    key = server.cache_key()
    cached = _listed.get(key)
    if cached and time.monotonic() < cached[0]:
        return list(cached[1])
    await guard.check(server.url)

    async def operation(session: Any) -> list[ToolDefinition]:
        tools: list[ToolDefinition] = []
        cursor = None
        for _ in range(100):  # pages: a server that keeps answering a cursor is cut off
            page = await session.list_tools(cursor)
            tools += [_definition(tool) for tool in page.tools]
            cursor = page.nextCursor
            if not cursor:
                break
        return tools

    tools = await _run(server, guard, timeout, max_response_bytes, "listing its tools", operation)
    if cache_seconds > 0:
        if len(_listed) >= _CACHE_ENTRIES:
            _listed.pop(next(iter(_listed)))
        _listed[key] = (time.monotonic() + cache_seconds, tools)
    return list(tools)


async def call_mcp_tool(
    server: McpServer,
    name: str,
    arguments: dict[str, Any],
    *,
    guard: OutboundGuard,
    timeout: float,
    max_bytes: int,
    max_response_bytes: int = MAX_RESPONSE_BYTES,
) -> str:
    """The text of the tool's result, at most `max_bytes` (cut with a marker). ToolFailed for an
    error result, a refused URL, an unreachable or failing server, or no answer in `timeout`."""
    try:
        await guard.check(server.url)
    except OutboundRefused as err:
        raise ToolFailed(str(err)) from None

    async def operation(session: Any) -> Any:
        return await session.call_tool(name, arguments)

    result = await _run(server, guard, timeout, max_response_bytes, f"calling {name}", operation)
    text = truncate(_result_text(result), max_bytes)
    if result.isError:
        raise ToolFailed(text or f"the tool {name} failed without a message")
    return text


@dataclass(frozen=True)
class McpTool:
    """One MCP tool as the agent loop runs it (engine/loop.py's ServerTool)."""

    server: McpServer
    definition: ToolDefinition
    guard: OutboundGuard
    timeout: float
    max_bytes: int
    max_response_bytes: int = MAX_RESPONSE_BYTES

    async def call(self, arguments: str) -> str:
        return await call_mcp_tool(
            self.server,
            self.definition.name,
            parse_arguments(arguments),
            guard=self.guard,
            timeout=self.timeout,
            max_bytes=self.max_bytes,
            max_response_bytes=self.max_response_bytes,
        )


async def _run(
    server: McpServer,
    guard: OutboundGuard,
    timeout: float,
    max_response_bytes: int,
    doing: str,
    operation: Any,
) -> Any:
    """`operation(session)` in a fresh initialized session, within `timeout` seconds."""
    import anyio
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from ._http import guarded_client

    too_large: list[BaseException] = []
    try:
        with anyio.fail_after(timeout), anyio.CancelScope() as scope:

            def stop(err: BaseException) -> None:
                too_large.append(err)
                scope.cancel()

            async with (
                guarded_client(
                    guard,
                    timeout=timeout,
                    max_response_bytes=max_response_bytes,
                    headers=server.headers,
                    on_too_large=stop,
                ) as http,
                streamable_http_client(server.url, http_client=http) as (read, write, _),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return await operation(session)
    except TimeoutError:
        raise ToolFailed(
            f"the MCP server {server.name} timed out after {timeout:g} s {doing}"
        ) from None
    except OutboundRefused as err:
        raise ToolFailed(str(err)) from None
    except Exception as err:  # noqa: BLE001 - any failure is the result the model reads
        cause = _leaf(err)
        failure = _describe(cause)  # no URL (its query may hold a token), no header
        logger.info("MCP server %s failed %s: %s (%s)", server.name, doing, failure, type(cause))
        raise ToolFailed(f"the MCP server {server.name} failed {doing}: {failure}") from None
    raise ToolFailed(f"the MCP server {server.name} failed {doing}: {too_large[0]}")


def _definition(tool: Any) -> ToolDefinition:
    schema = tool.inputSchema if isinstance(tool.inputSchema, dict) else {}
    return ToolDefinition(
        name=tool.name,
        description=tool.description or "",
        parameters={"type": "object", "properties": {}, **schema},
    )


def _result_text(result: Any) -> str:
    """The result's text contents joined; other contents described in a line each; structured
    content as JSON when no text came with it."""
    parts = []
    for item in result.content:
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(item.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} content: {item.mimeType}, {len(item.data)} base64 characters]")
        elif kind == "resource_link":
            parts.append(f"[resource link: {item.uri}]")
        elif kind == "resource":
            resource = item.resource
            text = getattr(resource, "text", None)
            parts.append(text if text is not None else f"[resource: {resource.uri}]")
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    if not parts and result.structuredContent is not None:
        parts.append(json.dumps(result.structuredContent))
    return "\n".join(parts)


def _leaf(err: BaseException) -> BaseException:
    """The first real exception inside (anyio's task groups wrap them in groups)."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    return err


def _describe(err: BaseException) -> str:
    import httpx

    if isinstance(err, httpx.HTTPStatusError):
        return f"HTTP {err.response.status_code}"
    if isinstance(err, httpx.TimeoutException):
        return "timed out"
    if isinstance(err, httpx.ConnectError):
        return "could not connect"
    error = getattr(err, "error", None)  # mcp's McpError: a JSON-RPC error answer
    message = getattr(error, "message", None) or str(err) or type(err).__name__
    return message[:500]


def _host_of(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).hostname or url[:100]
