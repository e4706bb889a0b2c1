"""The engine's ToolRuntime port (engine/server_tools.py), over the tool runtime
(`agents_core.tools`: MCP servers, web search, the outbound guard) and the tenant's tool groups.
Nothing here is imported until a request names a server-side tool."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..engine.server_tools import FileHit, McpEndpoint, ServerToolset
from ..errors import InvalidRequest
from ..inference.types import ToolSpec
from ..settings import Settings

if TYPE_CHECKING:
    from .tools import ToolGroupService


class ServerToolRuntime:
    def __init__(
        self,
        settings: Settings,
        toolgroups: ToolGroupService,
        vector_stores: Callable[[], Any] | None = None,
    ) -> None:
        self._settings = settings
        self._toolgroups = toolgroups  # it holds the guard and the web search provider
        self._vector_stores = vector_stores  # built at the first file search

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

    async def file_search(
        self,
        tenant: str,
        vector_store_ids: Sequence[str],
        query: str,
        max_results: int,
        filters: Mapping[str, Any] | None = None,
        score_threshold: float | None = None,
    ) -> list[FileHit]:
        """The vector stores' search (the same as `POST /v1/vector_stores/{id}/search`)."""
        if self._vector_stores is None:
            raise InvalidRequest("file search is not available on this deployment")
        results = await asyncio.to_thread(
            self._vector_stores().search,
            tenant,
            list(vector_store_ids),
            query,
            max_results,
            dict(filters) if filters else None,
            score_threshold,
        )
        return [
            FileHit(r.file_id, r.filename, r.score, r.text, dict(r.attributes or {}))
            for r in results
        ]

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
