"""A response's server tools: MCP servers (listed, called, or waiting for approval), web search
and file search, run here through the engine's ToolRuntime port. Function tools are the
client's: the model sees them, and their calls end the response.

`request_tools` reads a request's `tools` (400 for what cannot be served); an MCP server's
listing and the approved calls run at the start of a response (mcp.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ...api.responses import (
    NAMESPACE_SEPARATOR,
    CountInputTokensRequest,
    CreateOpenaiResponseRequest,
    McpToolFilter,
    OpenAIResponseInputToolFileSearch,
    OpenAIResponseInputToolMCP,
    OpenAIResponseInputToolNamespace,
    OpenAIResponseInputToolWebSearch,
    OpenAIResponseMCPApprovalResponse,
)
from ...errors import InvalidRequest
from ...inference.types import ChatMessage, ChatToolCall, ToolSpec
from ..file_search import QUERY_PARAMETERS, FileSearchTool
from ..server_tools import McpEndpoint, ToolRuntime

FILE_SEARCH_DESCRIPTION = (
    "Search the user's files (their vector stores) for passages about a query; answer from what"
    " it finds and cite it."
)


@dataclass
class McpServer:
    """An MCP server a request names: where it is, and what its tools may do."""

    config: OpenAIResponseInputToolMCP
    endpoint: McpEndpoint

    @classmethod
    def of(cls, config: OpenAIResponseInputToolMCP) -> McpServer:
        headers = dict(config.headers or {})
        if config.authorization:
            headers["Authorization"] = f"Bearer {config.authorization}"
        endpoint = McpEndpoint(url=config.server_url, label=config.server_label, headers=headers)
        return cls(config, endpoint)

    def allows(self, name: str) -> bool:
        allowed = self.config.allowed_tools
        if allowed is None:
            return True
        names = allowed.tool_names if isinstance(allowed, McpToolFilter) else allowed
        return names is None or name in names

    def needs_approval(self, name: str) -> bool:
        """OpenAI's rule: `never` runs every call, `always` none; with a filter, the tools it
        lists under `never` run and every other call waits for approval."""
        rule = self.config.require_approval
        if isinstance(rule, str):
            return rule == "always"
        return not (_named(rule.never, name) and not _named(rule.always, name))


def _named(names: list[str] | McpToolFilter | None, name: str) -> bool:
    if isinstance(names, McpToolFilter):
        names = names.tool_names
    return name in (names or [])


@dataclass
class ServerCall:
    """What a call to a tool name is in this response's output."""

    kind: Literal["mcp", "approval", "web_search", "file_search"]
    server: McpServer | None = None


@dataclass
class Approval:
    """An `mcp_approval_response` of the input, the call it answers, and the tool message (in
    the conversation, right after the call) its outcome fills."""

    answer: OpenAIResponseMCPApprovalResponse
    call: ChatToolCall
    result: ChatMessage


@dataclass
class RequestTools:
    """A request's tools, sorted: what the model is offered now, the MCP servers to list
    first, the tools run here by name, what a call to each of those names is, and the
    functions of namespaces by the name the model sees (namespace, function)."""

    specs: list[ToolSpec]
    mcp: list[McpServer]
    server: dict[str, Any]
    kinds: dict[str, ServerCall]
    namespaced: dict[str, tuple[str, str]]


def file_search_tool(
    runtime: ToolRuntime | None, tenant: str, tool: OpenAIResponseInputToolFileSearch
) -> FileSearchTool:
    ranking = tool.ranking_options
    return FileSearchTool(
        runtime=runtime,
        tenant=tenant,
        vector_store_ids=list(tool.vector_store_ids),
        max_results=tool.max_num_results or 10,
        filters=tool.filters,
        score_threshold=ranking.score_threshold if ranking else None,
    )


async def request_tools(
    runtime: ToolRuntime | None,
    tenant: str,
    body: CreateOpenaiResponseRequest | CountInputTokensRequest,
) -> RequestTools:
    """The request's tools: function tools for the model to call and the client to run;
    web and file search to run here; MCP servers (checked by the outbound guard now, listed
    when the response runs). 400 for what cannot be served."""
    found = RequestTools([], [], {}, {}, {})
    server_side = (
        OpenAIResponseInputToolMCP
        | OpenAIResponseInputToolWebSearch
        | OpenAIResponseInputToolFileSearch
    )
    for tool in body.tools or []:
        if isinstance(tool, OpenAIResponseInputToolWebSearch) and tool.external_web_access is False:
            continue  # cached results only: this deployment has none, so no search at all
        if isinstance(tool, server_side) and runtime is None:
            raise InvalidRequest(f"tool type '{tool.type}' is not available on this deployment")
        if isinstance(tool, OpenAIResponseInputToolMCP):
            if any(s.config.server_label == tool.server_label for s in found.mcp):
                raise InvalidRequest(f"Two mcp tools have the label '{tool.server_label}'")
            await runtime.check_url(tool.server_url)
            found.mcp.append(McpServer.of(tool))
        elif isinstance(tool, OpenAIResponseInputToolFileSearch):
            spec = ToolSpec("file_search", FILE_SEARCH_DESCRIPTION, QUERY_PARAMETERS)
            found.specs.append(spec)
            found.server[spec.name] = file_search_tool(runtime, tenant, tool)
            found.kinds[spec.name] = ServerCall("file_search")
        elif isinstance(tool, OpenAIResponseInputToolWebSearch):
            spec, runner = runtime.web_search()
            found.specs.append(spec)
            found.server[spec.name] = runner
            found.kinds[spec.name] = ServerCall("web_search")
        elif isinstance(tool, OpenAIResponseInputToolNamespace):
            for function in tool.tools:
                name = f"{tool.name}{NAMESPACE_SEPARATOR}{function.name}"
                found.namespaced[name] = (tool.name, function.name)
                found.specs.append(_function_spec(name, function, tool.description))
        else:
            found.specs.append(_function_spec(tool.name, tool))
    names = [spec.name for spec in found.specs]
    if len(set(names)) < len(names):
        raise InvalidRequest(f"Tool names must be unique; got {names}")
    return found


def _function_spec(name: str, function: Any, namespace: str = "") -> ToolSpec:
    parameters = function.parameters or {"type": "object", "properties": {}}
    description = " ".join(filter(None, [namespace, function.description]))
    return ToolSpec(name, description, parameters)
