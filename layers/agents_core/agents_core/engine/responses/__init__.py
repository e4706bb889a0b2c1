"""The Responses API face of the agent loop: output items and OpenAI's stream events, in the
order the official SDK accumulates them.

A response's conversation is its previous response's conversation, then its input, then its
output (as chat messages, stored as the response's CONTEXT). `instructions` apply to this
response only, as in OpenAI's API. Function tools end the response with `function_call` items;
the client answers with `function_call_output` items on a new response chained to this one.
MCP servers and web search run here, through the engine's ToolRuntime port: each MCP server's
tools are listed first (an `mcp_list_tools` item), each call is an `mcp_call` or
`web_search_call` item. A call to an MCP tool that needs approval ends the response with an
`mcp_approval_request` item instead; the next response runs it (or tells the model it was
declined) when its input carries the `mcp_approval_response`.

    run = await engine.start(tenant, request)        # 400 / 404 before anything runs
    async for event in run.events(): ...             # or: response = await run.result()

Its rooms: `engine` (a request made into a run), `inputs` (input items as chat messages),
`tools` (MCP servers, approvals, web and file search), `mcp` (an MCP server's listing and
the approved calls, before the first model call), `output` (loop events as output items
and stream events), `run` (run control: background, cancel, checkpoints, suspension, the end).
"""

from .engine import ResponsesEngine
from .run import ResponseRun, RunCancelled, RunControl, RunLost

__all__ = ["ResponseRun", "ResponsesEngine", "RunCancelled", "RunControl", "RunLost"]
