"""The tool runtime: the tools the server runs for the agent loop (MCP servers, web search), and
the outbound guard every caller-named URL passes. Importing it loads neither `mcp` nor httpx:
a function that serves no server-side tool pays nothing for them.

    guard = OutboundGuard(settings.outbound_allow)
    server = McpServer(url, headers, label)
    tools = [McpTool(server, d, guard, settings.mcp_call_timeout_seconds,
                     settings.tool_result_max_bytes)
             for d in await list_mcp_tools(server, guard=guard,
                                           timeout=settings.mcp_call_timeout_seconds,
                                           cache_seconds=settings.mcp_list_cache_seconds)]
    search = WebSearchTool(web_search_provider(settings), max_bytes=settings.tool_result_max_bytes)
"""

from .base import ToolDefinition, ToolFailed, parse_arguments
from .documents import fetch_document
from .guard import OutboundGuard, OutboundRefused
from .knowledge_search import KNOWLEDGE_SEARCH, KnowledgeSearchTool
from .mcp_client import McpServer, McpTool, call_mcp_tool, forget_cached_tools, list_mcp_tools
from .web_search import (
    WEB_SEARCH,
    OfflineWebSearch,
    SearchResult,
    TavilyWebSearch,
    WebSearch,
    WebSearchTool,
    web_search_provider,
)

__all__ = [
    "KNOWLEDGE_SEARCH",
    "WEB_SEARCH",
    "KnowledgeSearchTool",
    "McpServer",
    "McpTool",
    "OfflineWebSearch",
    "OutboundGuard",
    "OutboundRefused",
    "SearchResult",
    "TavilyWebSearch",
    "ToolDefinition",
    "ToolFailed",
    "WebSearch",
    "WebSearchTool",
    "call_mcp_tool",
    "fetch_document",
    "forget_cached_tools",
    "list_mcp_tools",
    "parse_arguments",
    "web_search_provider",
]
