"""The engine's ToolRuntime port (engine/server_tools.py), over the tool runtime
(`agents_core.tools`: MCP servers, web search, the outbound guard) and the tenant's tool groups.
Nothing here is imported until a request names a server-side tool."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..engine.server_tools import McpEndpoint, ServerToolset
from ..inference.types import ToolSpec
from ..settings import Settings

if TYPE_CHECKING:
    from .tools import ToolGroupService


class ServerToolRuntime:
    def __init__(self, settings: Settings, toolgroups: ToolGroupService) -> None:
        self._settings = settings
        self._toolgroups = toolgroups  # it holds the guard and the web search provider

    async def check_url(self, url: str) -> None:
        await self._toolgroups.guard.check(url)

    async def mcp_tools(self, endpoint: McpEndpoint) -> list[ToolSpec]:
        from ..tools import list_mcp_tools

        s = self._settings
        definitions = await list_mcp_tools(
            self._server(endpoint),
            guard=self._toolgroups.guard,
            timeout=s.mcp_call_timeout_seconds,
            cache_seconds=s.mcp_list_cache_seconds,
            max_response_bytes=s.outbound_max_response_bytes,
        )
        return [ToolSpec(d.name, d.description, d.parameters) for d in definitions]

    def mcp_tool(self, endpoint: McpEndpoint, name: str) -> Any:
        from ..tools import McpTool, ToolDefinition

        s = self._settings
        return McpTool(
            self._server(endpoint),
            ToolDefinition(name, ""),
            guard=self._toolgroups.guard,
            timeout=s.mcp_call_timeout_seconds,
            max_bytes=s.tool_result_max_bytes,
            max_response_bytes=s.outbound_max_response_bytes,
        )

    def web_search(self) -> tuple[ToolSpec, Any]:
        from ..tools import WEB_SEARCH, WebSearchTool

        tool = WebSearchTool(
            self._toolgroups.web_search, max_bytes=self._settings.tool_result_max_bytes
        )
        return ToolSpec(WEB_SEARCH.name, WEB_SEARCH.description, WEB_SEARCH.parameters), tool

    async def fetch(self, url: str, max_bytes: int) -> tuple[bytes, str]:
        from ..tools import fetch_document

        return await fetch_document(
            url,
            guard=self._toolgroups.guard,
            timeout=self._settings.mcp_call_timeout_seconds,
            max_bytes=max_bytes,
        )

    async def toolgroups(
        self, tenant: str, groups: Sequence[Any], provider_data: Any
    ) -> ServerToolset:
        resolved = await self._toolgroups.resolve(tenant, list(groups), provider_data)
        toolset = ServerToolset()
        for tool in resolved:
            d = tool.definition
            toolset.add(ToolSpec(d.name, d.description, d.parameters), tool)
        return toolset

    @staticmethod
    def _server(endpoint: McpEndpoint) -> Any:
        from ..tools import McpServer

        return McpServer(endpoint.url, headers=dict(endpoint.headers), label=endpoint.label)
