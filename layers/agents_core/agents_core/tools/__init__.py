"""The tool runtime: tools the server runs for the agent loop (MCP servers, web search), and the
outbound guard every caller-named URL passes. Importing it loads neither `mcp` nor httpx."""

from .base import ToolDefinition, ToolFailed
from .guard import OutboundGuard, OutboundRefused
from .mcp_client import McpServer, McpTool, call_mcp_tool, list_mcp_tools

__all__ = [
    "McpServer",
    "McpTool",
    "OutboundGuard",
    "OutboundRefused",
    "ToolDefinition",
    "ToolFailed",
    "call_mcp_tool",
    "list_mcp_tools",
]
