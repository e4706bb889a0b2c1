"""A response's MCP steps before its first model call: each MCP server's tools listed (an
`mcp_list_tools` item) and offered to the model, and the calls the caller approved run (an
`mcp_call` item each) or told declined."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ...api.responses import (
    McpCallInProgress,
    McpListToolsCompleted,
    McpListToolsFailed,
    McpListToolsInProgress,
    MCPListToolsTool,
    OpenAIResponseOutputMessageMCPCall,
    OpenAIResponseOutputMessageMCPListTools,
    StreamEvent,
)
from ...ids import item_id
from ...inference.types import ChatToolCall
from ...log import logger
from .. import loop as L
from ..server_tools import ToolRuntime
from ..trace import RunTrace
from .output import OutputWriter
from .tools import Approval, McpServer, ServerCall


async def list_tools(
    output: OutputWriter,
    runtime: ToolRuntime,
    server: McpServer,
    loop: L.AgentLoop,
    trace: RunTrace | None = None,
) -> AsyncIterator[StreamEvent]:
    """List an MCP server's tools as an `mcp_list_tools` item, and offer them to the model.
    A server that cannot be listed is reported in the item; the response goes on without
    its tools."""
    label = server.config.server_label
    item = OpenAIResponseOutputMessageMCPListTools(id=item_id("mcpl"), server_label=label, tools=[])
    yield output.add(item)
    index = output.index(item)
    yield output.event(McpListToolsInProgress, item_id=item.id, output_index=index)
    started = L.now()
    listing = ChatToolCall(item.id, f"mcp_list_tools {label}", "{}")
    try:
        specs = await runtime.mcp_tools(server.endpoint)
    except Exception as err:
        logger.warning("could not list an MCP server's tools", extra={"server": label})
        item.error = str(err) or type(err).__name__
        if trace is not None:
            failed = L.ToolResult(listing, item.error, is_error=True)
            trace.tool(listing, started, L.now(), failed, kind="mcp_call")
        yield output.event(McpListToolsFailed, item_id=item.id, output_index=index)
        yield output.done(item)
        return
    offered = {spec.name for spec in loop.request.tools}
    for spec in specs:
        if not server.allows(spec.name) or spec.name in offered:
            continue  # a name taken by another tool keeps its first owner
        offered.add(spec.name)
        loop.request.tools.append(spec)
        item.tools.append(
            MCPListToolsTool(
                name=spec.name, description=spec.description, input_schema=spec.parameters
            )
        )
        if server.needs_approval(spec.name):
            output.kinds[spec.name] = ServerCall("approval", server)
        else:
            output.kinds[spec.name] = ServerCall("mcp", server)
            loop.tools.server[spec.name] = runtime.mcp_tool(server.endpoint, spec.name)
    if trace is not None:
        listed = L.ToolResult(listing, ", ".join(t.name for t in item.tools))
        trace.tool(listing, started, L.now(), listed, kind="mcp_call")
    yield output.event(McpListToolsCompleted, item_id=item.id, output_index=index)
    yield output.done(item)


async def answer_approval(
    output: OutputWriter,
    runtime: ToolRuntime | None,
    approval: Approval,
    trace: RunTrace | None = None,
) -> AsyncIterator[StreamEvent]:
    """Run an approved call as an `mcp_call` item, or tell the model the caller declined."""
    call, answer = approval.call, approval.answer
    kind = output.kinds.get(call.name)
    if not answer.approve:
        reason = f": {answer.reason}" if answer.reason else ""
        approval.result.content = f"The user declined the call to `{call.name}`{reason}"
        return
    if kind is None or kind.server is None or runtime is None:
        approval.result.content = f"Tool `{call.name}` is not offered in this request."
        return
    item = OpenAIResponseOutputMessageMCPCall(
        id=item_id("mcp"),
        name=call.name,
        arguments=call.arguments,
        server_label=kind.server.config.server_label,
        status="in_progress",
        approval_request_id=answer.approval_request_id,
    )
    yield output.add(item)
    yield output.event(McpCallInProgress, item_id=item.id, output_index=output.index(item))
    tool = runtime.mcp_tool(kind.server.endpoint, call.name)
    started = L.now()
    result = await L.run_tool(tool, call)
    if trace is not None:
        trace.tool(call, started, L.now(), result, kind="mcp_call")
    approval.result.content = result.content
    for out in output.mcp_call_done(item, result):
        yield out
