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
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from .. import metrics
from ..api.common import JsonSchemaResponseFormat
from ..api.conversations import as_conversation_item
from ..api.responses import (
    ContentPartAdded,
    ContentPartDone,
    ConversationReference,
    CreateOpenaiResponseRequest,
    FileSearchCallCompleted,
    FileSearchCallInProgress,
    FileSearchCallSearching,
    FunctionCallArgumentsDelta,
    FunctionCallArgumentsDone,
    McpCallArgumentsDelta,
    McpCallArgumentsDone,
    McpCallCompleted,
    McpCallFailed,
    McpCallInProgress,
    McpListToolsCompleted,
    McpListToolsFailed,
    McpListToolsInProgress,
    MCPListToolsTool,
    McpToolExecutionError,
    McpToolFilter,
    OpenAIResponseAnnotationFileCitation,
    OpenAIResponseContentPartRefusal,
    OpenAIResponseError,
    OpenAIResponseInputFunctionToolCallOutput,
    OpenAIResponseInputMessageContentFile,
    OpenAIResponseInputMessageContentImage,
    OpenAIResponseInputMessageContentText,
    OpenAIResponseInputToolFileSearch,
    OpenAIResponseInputToolFunction,
    OpenAIResponseInputToolMCP,
    OpenAIResponseInputToolWebSearch,
    OpenAIResponseMCPApprovalRequest,
    OpenAIResponseMCPApprovalResponse,
    OpenAIResponseMessage,
    OpenAIResponseObject,
    OpenAIResponseObjectWithInput,
    OpenAIResponseOutputMessageContentOutputText,
    OpenAIResponseOutputMessageFileSearchToolCall,
    OpenAIResponseOutputMessageFunctionToolCall,
    OpenAIResponseOutputMessageMCPCall,
    OpenAIResponseOutputMessageMCPListTools,
    OpenAIResponseOutputMessageWebSearchToolCall,
    OpenAIResponseReasoningItem,
    OpenAIResponseReasoningText,
    OpenAIResponseText,
    OpenAIResponseTextFormat,
    OutputItemAdded,
    OutputItemDone,
    OutputTextAnnotationAdded,
    OutputTextDelta,
    OutputTextDone,
    ReasoningTextDelta,
    ReasoningTextDone,
    RefusalDelta,
    RefusalDone,
    ResponseCancelled,
    ResponseCompleted,
    ResponseCreated,
    ResponseFailed,
    ResponseIncomplete,
    ResponseInProgress,
    StreamEvent,
    ToolChoiceFunction,
    ToolChoiceMcp,
    WebSearchAction,
    WebSearchCallCompleted,
    WebSearchCallInProgress,
    WebSearchCallSearching,
)
from ..domain import ConversationAppend
from ..errors import (
    Conflict,
    InvalidRequest,
    RunFailed,
    TooLarge,
    UpstreamFailed,
    UpstreamTimeout,
    status_of,
)
from ..ids import new_id
from ..inference.router import ModelRouter
from ..inference.types import (
    ChatDocument,
    ChatMessage,
    ChatRequest,
    ChatToolCall,
    ModelOptions,
    ToolSpec,
    Usage,
)
from ..lifecycle import RESPONSE_DETAIL_TYPES, TurnEventPublisher
from ..log import logger
from . import loop as L
from .file_search import QUERY_PARAMETERS, Citations, FileSearchTool, query_of
from .server_tools import McpEndpoint, ToolRuntime
from .shields import BLOCKED_MESSAGE, ShieldService, shields_for
from .storage import ResponseStorage


def _id(prefix: str) -> str:
    return f"{prefix}_{new_id().replace('-', '')}"


@dataclass
class _McpServer:
    """An MCP server a request names: where it is, and what its tools may do."""

    config: OpenAIResponseInputToolMCP
    endpoint: McpEndpoint

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
class _ServerCall:
    """What a call to a tool name is in this response's output."""

    kind: Literal["mcp", "approval", "web_search", "file_search"]
    server: _McpServer | None = None


@dataclass
class _Approval:
    """An `mcp_approval_response` of the input, the call it answers, and the tool message (in
    the conversation, right after the call) its outcome fills."""

    answer: OpenAIResponseMCPApprovalResponse
    call: ChatToolCall
    result: ChatMessage


class RunCancelled(Exception):
    """The response was cancelled: the run stops at this event boundary."""


class RunLost(Exception):
    """Another invocation carries the run now (this one's lease ran out): stop, write nothing."""


class RunControl(Protocol):
    """What a background run is handed by the worker that runs it: where its state goes at each
    step boundary, whether it was cancelled, when to stop for another invocation, and its end
    (written only while this invocation still owns the run)."""

    def should_suspend(self) -> bool:
        """Too little time is left in this invocation for another model call."""
        ...

    async def cancelled(self) -> bool:
        """Whether the response was cancelled; cheap to ask often (the answer may be a moment
        old)."""
        ...

    async def checkpoint(self, state: dict[str, Any]) -> None:
        """Store the run's state (`ResponseRun.state()`); RunCancelled or RunLost when it no
        longer may go on."""
        ...

    async def save(
        self,
        response: OpenAIResponseObjectWithInput,
        context: list[dict[str, Any]],
        conversation: ConversationAppend | None,
    ) -> None:
        """Store the ended response as `ResponseStorage.save` does, and end the run; RunLost
        when another invocation owns it."""
        ...


class ResponseRun:
    """One response being generated: the loop's events as output items and stream events;
    stored (unless `store` is false) when it ends.

    A background run is handed a RunControl: it stores its state (`state()`) at each step
    boundary (after a model reply, after each server-side call's result, after each MCP listing
    or approved call), stops when cancelled or when its invocation runs out of time, and is
    rebuilt from that state in the next invocation (`ResponsesEngine.restore`)."""

    def __init__(
        self,
        *,
        storage: ResponseStorage,
        tenant: str,
        response: OpenAIResponseObjectWithInput,
        context: list[ChatMessage],
        loop: L.AgentLoop,
        store: bool,
        tools: ToolRuntime | None = None,
        mcp: list[_McpServer] | None = None,
        approvals: list[_Approval] | None = None,
        server_calls: dict[str, _ServerCall] | None = None,
        publisher: TurnEventPublisher | None = None,
        conversation: ConversationAppend | None = None,
        control: RunControl | None = None,
        guardrails: list[str] | None = None,
        include: list[str] | None = None,
    ) -> None:
        self.storage = storage
        self.include = include or []  # what the request asked to include (file search results)
        self.control = control  # a background run's worker; None: runs in the caller's request
        self.guardrails = guardrails or []  # kept for a continuation's shields
        self.resumed = False  # continued from a stored state: created/in_progress were sent
        self.suspended = False  # stopped for another invocation to continue
        self.conversation = conversation  # where its items go when it ends, read at a version
        self.tenant = tenant
        self.response = response
        self.context = context  # the conversation up to and including this response's input
        self.loop = loop
        self.store = store
        self.tools = tools
        self.publisher = publisher  # the response's end goes to the bus, when there is one
        self.mcp = mcp or []  # listed before the first model call
        self.approvals = approvals or []  # run (or declined) before the first model call
        self._kinds = server_calls or {}  # tool name -> what its calls are; grows by listing
        self._items: dict[str, Any] = {}  # call id -> its output item
        self.stream = loop.stream
        self._base = len(loop.request.messages)  # what the loop adds comes after
        self._sequence = 0
        self._failure: RunFailed | None = None
        self._usage: Usage | None = None
        self._last_finish = "stop"
        self._text: OpenAIResponseMessage | None = None  # the message item being written
        self._reply_message: OpenAIResponseMessage | None = None  # the current reply's text
        self._reasoning: OpenAIResponseReasoningItem | None = None  # the reasoning being written
        self._call: Any = None  # likewise, the call item (of any kind) being written
        self._calls: dict[int, Any] = {}  # this reply's call items, by index
        self._input_checked = False  # the input shields ran (a continuation does not rerun them)
        found = loop.tools.server.get("file_search")
        self._file_search = found if isinstance(found, FileSearchTool) else None
        self._citations: Citations | None = None  # the text being written, with file search

    async def result(self) -> OpenAIResponseObject:
        """Run to the end without streaming: the response (completed or incomplete), or
        RunFailed with the status its cause means."""
        final: StreamEvent | None = None
        async for event in self.events():
            final = event
        if self._failure is not None:
            raise self._failure
        assert final is not None
        return final.response

    async def events(self) -> AsyncIterator[StreamEvent]:
        if self.store and self.control is None:  # readable while it runs
            await self._begin()
        if not self.resumed:
            snapshot = self._public()
            yield self._event(ResponseCreated, response=snapshot)
            yield self._event(ResponseInProgress, response=snapshot)
        try:
            try:
                if self.control is not None and await self.control.cancelled():
                    raise RunCancelled
                async for out in self._steps():
                    yield out
                    if self.control is not None and await self.control.cancelled():
                        raise RunCancelled
            except RunCancelled:
                for out in self._cut_short():
                    yield out
                yield await self._end("cancelled")
            except RunLost:
                raise
            except Exception as err:
                for out in self._cut_short():
                    yield out
                yield await self._fail(err)
        except RunLost:
            logger.warning("run carried on elsewhere", extra={"response_id": self.response.id})
            return
        if not self.suspended:
            await self._announce()

    async def _steps(self) -> AsyncIterator[StreamEvent]:
        """The run's events up to its end; a state stored after each step it completes."""
        while self.mcp:
            async for out in self._list_tools(self.mcp[0]):
                yield out
            self.mcp.pop(0)
            await self._checkpoint()
        while self.approvals:
            async for out in self._answer_approval(self.approvals[0]):
                yield out
            self.approvals.pop(0)
            await self._checkpoint()
        async with aclosing(self.loop.run()) as events:
            async for event in events:
                for out in self._on(event):
                    yield out
                if isinstance(event, L.ModelReplied | L.ToolFinished):
                    await self._checkpoint()
                elif isinstance(event, L.Suspended):
                    await self._checkpoint()
                    self.suspended = True
                    return
                elif isinstance(event, L.Paused | L.Finished):
                    yield await self._finish(event)
                elif isinstance(event, L.Failed):
                    for out in self._cut_short():
                        yield out
                    yield await self._fail(event.error)

    async def _checkpoint(self) -> None:
        if self.control is not None:
            await self.control.checkpoint(self.state())

    def state(self) -> dict[str, Any]:
        """Everything a continuation needs, as JSON data; MCP credentials are not in it (the
        worker's message carries them, never the table)."""
        request = self.loop.request
        return {
            "response": json.loads(self.response.model_dump_json(exclude_none=True)),
            "base": self._base,  # the messages before it: the system prompt, then the context
            "system": self._base - len(self.context),
            "model": request.model,
            "messages": [m.to_dict() for m in request.messages],
            "tools": [dataclasses.asdict(spec) for spec in request.tools],
            "tool_choice": request.tool_choice,
            "response_format": (
                request.response_format.model_dump() if request.response_format else None
            ),
            "options": dataclasses.asdict(request.options),
            "iterations": self.loop.iterations,
            "tool_calls": self.loop.tool_calls,
            "max_iterations": self.loop.max_iterations,
            "max_tool_calls": self.loop.limits.max_tool_calls,
            "stream": self.loop.stream,
            "sequence": self._sequence,
            "usage": dataclasses.asdict(self._usage) if self._usage else None,
            "last_finish": self._last_finish,
            "kinds": {
                name: [kind.kind, kind.server.config.server_label if kind.server else None]
                for name, kind in self._kinds.items()
            },
            "items": {call_id: self._index(item) for call_id, item in self._items.items()},
            "reply_message": (
                self._index(self._reply_message) if self._reply_message is not None else None
            ),
            "pending_mcp": [server.config.server_label for server in self.mcp],
            "approvals": [
                {
                    "answer": approval.answer.model_dump(exclude_none=True),
                    "call": dataclasses.asdict(approval.call),
                    "message": self._message_index(approval.result),
                }
                for approval in self.approvals
            ],
            "guardrails": self.guardrails,
            "include": self.include,
            "file_search": (
                {
                    "fallback_query": self._file_search.fallback_query,
                    "files": self._file_search.files,
                }
                if self._file_search is not None
                else None
            ),
            "shield_input": (
                self.loop.shields.input if self.loop.shields and not self._input_checked else []
            ),
            "store": self.store,
            "conversation": (
                [self.conversation.conversation_id, self.conversation.version]
                if self.conversation
                else None
            ),
        }

    def _message_index(self, message: ChatMessage) -> int:
        return next(i for i, m in enumerate(self.loop.request.messages) if m is message)

    async def _announce(self) -> None:
        """The response's end on the bus, after its last event reached the caller. A response
        not stored announces no output (`store: false` keeps nothing, anywhere)."""
        if self.publisher is None or self.response.status not in RESPONSE_DETAIL_TYPES:
            return
        r = self.response
        detail: dict[str, Any] = {
            "tenant": self.tenant,
            "response_id": r.id,
            "status": r.status,
            "model": r.model,
            "created_at": r.created_at,
            "completed_at": r.completed_at,
            "previous_response_id": r.previous_response_id,
            "conversation_id": r.conversation.id if r.conversation else None,
            "metadata": r.metadata,
            "usage": r.usage,
            "stored": self.store,
        }
        if r.status == "failed" and r.error is not None:
            detail["error"] = r.error.model_dump()
        if r.status == "incomplete":
            detail["incomplete_details"] = r.incomplete_details
        if r.status == "completed" and self.store:
            detail["output_text"] = "".join(
                part.text
                for item in r.output
                if isinstance(item, OpenAIResponseMessage)
                for part in item.content
                if isinstance(part, OpenAIResponseOutputMessageContentOutputText)
            )
        await self.publisher.publish_response(r.status, detail)

    def _cut_short(self) -> Iterator[StreamEvent]:
        """A failing run's open items end `incomplete`: every item a client saw added is done."""
        yield from self._close_reasoning("incomplete")
        yield from self._close_text("incomplete")
        yield from self._close_call("incomplete")
        for item in self._items.values():  # calls written but not run (or not done running)
            if isinstance(item, OpenAIResponseOutputMessageMCPCall) and item.status in (
                "in_progress",
                "calling",
            ):
                item.status = "incomplete"
            elif isinstance(
                item,
                OpenAIResponseOutputMessageWebSearchToolCall
                | OpenAIResponseOutputMessageFileSearchToolCall,
            ) and item.status in ("in_progress", "searching"):
                item.status = "incomplete" if item.type == "file_search_call" else "failed"
            else:
                continue
            yield self._event(OutputItemDone, item=item, output_index=self._index(item))

    def _on(self, event: L.LoopEvent) -> Iterator[StreamEvent]:
        """The stream events one loop event means: items opened, written and closed."""
        if isinstance(event, L.ShieldChecked) and event.source == "input":
            self._input_checked = True
        match event:
            case L.ModelCallStarted():
                self._calls = {}
                self._reply_message = None
            case L.ShieldChecked(violation=violation) if violation is not None:
                # A blocked answer leaves the response (a client that streamed saw it go by).
                if self._reply_message is not None:
                    self.response.output.remove(self._reply_message)
            case L.Finished(reason="blocked", violation=violation):
                yield from self._refuse(violation.user_message or BLOCKED_MESSAGE)
            case L.ReasoningDelta(text=text):
                yield from self._close_text()
                if self._reasoning is None:
                    yield from self._open_reasoning()
                item = self._reasoning
                ids = {"item_id": item.id, "output_index": self._index(item), "content_index": 0}
                yield self._event(ReasoningTextDelta, delta=text, **ids)
                item.content[0].text += text
            case L.TextDelta(text=text):
                yield from self._close_reasoning()
                if self._text is None:
                    yield from self._open_text()
                found: list[tuple[str, str, int]] = []
                if self._citations is not None:
                    text, found = self._citations.feed(text)
                yield from self._write(text)
                yield from self._cite(found)
            case L.ToolCallDelta(index=index, call_id=call_id, name=name, arguments=arguments):
                yield from self._close_reasoning()
                yield from self._close_text()
                if index not in self._calls:
                    yield from self._close_call()
                    yield from self._open_call(index, call_id, name)
                item = self._calls[index]
                if arguments and hasattr(item, "arguments"):
                    item.arguments += arguments
                    kind = {
                        OpenAIResponseOutputMessageFunctionToolCall: FunctionCallArgumentsDelta,
                        OpenAIResponseOutputMessageMCPCall: McpCallArgumentsDelta,
                    }.get(type(item))
                    if kind is not None:
                        yield self._event(
                            kind, item_id=item.id, output_index=self._index(item), delta=arguments
                        )
            case L.ToolsStarted(calls=calls):
                for call in calls:
                    yield from self._tool_started(call)
            case L.ToolFinished(result=result):  # its item is done as soon as its result is
                yield from self._tool_ran(result)
            case L.ModelReplied(finish=finish, usage=usage):
                yield from self._close_reasoning()
                yield from self._close_text()
                yield from self._close_call()
                self._last_finish = finish
                self._add_usage(usage)

    def _open_text(self) -> Iterator[StreamEvent]:
        item = OpenAIResponseMessage(
            id=_id("msg"),
            role="assistant",
            status="in_progress",
            content=[OpenAIResponseOutputMessageContentOutputText(text="")],
        )
        self._text = self._reply_message = item
        if self._file_search is not None:
            self._citations = Citations(self._file_search.files)
        self.response.output.append(item)
        index = self._index(item)
        announced = item.model_copy(update={"content": []})  # as opened, without the text
        yield self._event(OutputItemAdded, item=announced, output_index=index)
        yield self._event(
            ContentPartAdded,
            item_id=item.id,
            output_index=index,
            content_index=0,
            part=OpenAIResponseOutputMessageContentOutputText(text=""),
        )

    def _write(self, text: str) -> Iterator[StreamEvent]:
        if not text:
            return
        assert self._text is not None
        yield self._event(
            OutputTextDelta,
            item_id=self._text.id,
            output_index=self._index(self._text),
            content_index=0,
            delta=text,
        )
        self._text.content[0].text += text

    def _cite(self, found: list[tuple[str, str, int]]) -> Iterator[StreamEvent]:
        """A `file_citation` annotation where the answer cited a file search result."""
        assert self._text is not None
        annotations = self._text.content[0].annotations
        for file_id, filename, index in found:
            annotation = OpenAIResponseAnnotationFileCitation(
                file_id=file_id, filename=filename, index=index
            )
            annotations.append(annotation)
            yield self._event(
                OutputTextAnnotationAdded,
                item_id=self._text.id,
                output_index=self._index(self._text),
                content_index=0,
                annotation_index=len(annotations) - 1,
                annotation=annotation,
            )

    def _open_reasoning(self) -> Iterator[StreamEvent]:
        item = OpenAIResponseReasoningItem(
            id=_id("rs"), status="in_progress", content=[OpenAIResponseReasoningText(text="")]
        )
        self._reasoning = item
        self.response.output.append(item)
        yield self._event(
            OutputItemAdded, item=item.model_copy(deep=True), output_index=self._index(item)
        )

    def _close_reasoning(self, status: str = "completed") -> Iterator[StreamEvent]:
        item, self._reasoning = self._reasoning, None
        if item is None:
            return
        index, text = self._index(item), item.content[0].text
        item.status = status
        yield self._event(
            ReasoningTextDone, item_id=item.id, output_index=index, content_index=0, text=text
        )
        yield self._event(OutputItemDone, item=item, output_index=index)

    def _refuse(self, refusal: str) -> Iterator[StreamEvent]:
        """A guardrail blocked the input or the answer: the response says its message, as a
        `refusal` part, and the conversation goes on from that."""
        part = OpenAIResponseContentPartRefusal(refusal=refusal)
        item = OpenAIResponseMessage(
            id=_id("msg"), role="assistant", status="completed", content=[part]
        )
        self.response.output.append(item)
        index = self._index(item)
        ids = {"item_id": item.id, "output_index": index, "content_index": 0}
        opened = item.model_copy(update={"content": [], "status": "in_progress"})
        yield self._event(OutputItemAdded, item=opened, output_index=index)
        yield self._event(ContentPartAdded, part=part.model_copy(update={"refusal": ""}), **ids)
        yield self._event(RefusalDelta, delta=refusal, **ids)
        yield self._event(RefusalDone, refusal=refusal, **ids)
        yield self._event(ContentPartDone, part=part, **ids)
        yield self._event(OutputItemDone, item=item, output_index=index)
        messages = self.loop.request.messages
        if messages and messages[-1].role == "assistant" and not messages[-1].tool_calls:
            messages[-1].content = refusal  # the blocked answer is not kept
        else:
            messages.append(ChatMessage("assistant", refusal))

    def _close_text(self, status: str = "completed") -> Iterator[StreamEvent]:
        if self._text is not None and self._citations is not None:
            yield from self._write(self._citations.flush())  # a held `<|` that was no marker
        self._citations = None
        item, self._text = self._text, None
        if item is None:
            return
        index = self._index(item)
        part = item.content[0]
        item.status = status
        yield self._event(
            OutputTextDone, item_id=item.id, output_index=index, content_index=0, text=part.text
        )
        yield self._event(
            ContentPartDone, item_id=item.id, output_index=index, content_index=0, part=part
        )
        yield self._event(OutputItemDone, item=item, output_index=index)

    def _open_call(self, index: int, call_id: str, name: str) -> Iterator[StreamEvent]:
        """The item a call is: a function call for the client, an MCP call or a web search
        run here, or a request for the caller's approval."""
        kind = self._kinds.get(name)
        item: Any
        if kind is None:
            item = OpenAIResponseOutputMessageFunctionToolCall(
                id=_id("fc"), call_id=call_id, name=name, arguments="", status="in_progress"
            )
        elif kind.kind == "web_search":
            item = OpenAIResponseOutputMessageWebSearchToolCall(
                id=_id("ws"), status="in_progress", action=WebSearchAction()
            )
        elif kind.kind == "file_search":
            item = OpenAIResponseOutputMessageFileSearchToolCall(
                id=_id("fs"), queries=[], status="in_progress"
            )
        else:
            assert kind.server is not None
            label = kind.server.config.server_label
            if kind.kind == "approval":  # its id is the call's, for the approval to name
                item = OpenAIResponseMCPApprovalRequest(
                    id=call_id, name=name, arguments="", server_label=label
                )
            else:
                item = OpenAIResponseOutputMessageMCPCall(
                    id=_id("mcp"), name=name, arguments="", server_label=label, status="in_progress"
                )
        self._calls[index] = self._call = self._items[call_id] = item
        self.response.output.append(item)
        announced = item.model_copy()  # the event is sent later than the item grows
        yield self._event(OutputItemAdded, item=announced, output_index=self._index(item))

    def _close_call(self, status: str = "completed") -> Iterator[StreamEvent]:
        """The model finished writing the call: a function call or an approval request is
        complete; an MCP call or a web search still has to run."""
        item, self._call = self._call, None
        if item is None:
            return
        index = self._index(item)
        if isinstance(item, OpenAIResponseOutputMessageFunctionToolCall):
            item.status = status
            yield self._event(
                FunctionCallArgumentsDone,
                item_id=item.id,
                output_index=index,
                arguments=item.arguments,
            )
            yield self._event(OutputItemDone, item=item, output_index=index)
        elif isinstance(item, OpenAIResponseOutputMessageMCPCall):
            yield self._event(
                McpCallArgumentsDone, item_id=item.id, output_index=index, arguments=item.arguments
            )
        elif isinstance(item, OpenAIResponseMCPApprovalRequest):
            yield self._event(OutputItemDone, item=item, output_index=index)

    def _tool_started(self, call: ChatToolCall) -> Iterator[StreamEvent]:
        item = self._items.get(call.id)
        if isinstance(item, OpenAIResponseOutputMessageMCPCall):
            yield self._event(McpCallInProgress, item_id=item.id, output_index=self._index(item))
        elif isinstance(item, OpenAIResponseOutputMessageWebSearchToolCall):
            item.action = WebSearchAction(query=_argument(call.arguments, "query"))
            item.status = "searching"
            index = self._index(item)
            yield self._event(WebSearchCallInProgress, item_id=item.id, output_index=index)
            yield self._event(WebSearchCallSearching, item_id=item.id, output_index=index)
        elif isinstance(item, OpenAIResponseOutputMessageFileSearchToolCall):
            assert self._file_search is not None
            item.queries = [query_of(call.arguments, self._file_search.fallback_query)]
            item.status = "searching"
            index = self._index(item)
            yield self._event(FileSearchCallInProgress, item_id=item.id, output_index=index)
            yield self._event(FileSearchCallSearching, item_id=item.id, output_index=index)

    def _tool_ran(self, result: L.ToolResult) -> Iterator[StreamEvent]:
        item = self._items.get(result.call.id)
        if isinstance(item, OpenAIResponseOutputMessageMCPCall):
            yield from self._mcp_call_done(item, result)
        elif isinstance(item, OpenAIResponseOutputMessageWebSearchToolCall):
            index = self._index(item)
            item.status = "failed" if result.is_error else "completed"
            yield self._event(WebSearchCallCompleted, item_id=item.id, output_index=index)
            yield self._event(OutputItemDone, item=item, output_index=index)
        elif isinstance(item, OpenAIResponseOutputMessageFileSearchToolCall):
            index = self._index(item)
            item.status = "failed" if result.is_error else "completed"
            hits = self._file_search.found.get(result.call.arguments) if self._file_search else None
            if "file_search_call.results" in self.include and hits is not None:
                item.results = [
                    {
                        "file_id": hit.file_id,
                        "filename": hit.filename,
                        "score": hit.score,
                        "text": hit.text,
                        "attributes": dict(hit.attributes),
                    }
                    for hit in hits
                ]
            yield self._event(FileSearchCallCompleted, item_id=item.id, output_index=index)
            yield self._event(OutputItemDone, item=item, output_index=index)

    def _mcp_call_done(
        self, item: OpenAIResponseOutputMessageMCPCall, result: L.ToolResult
    ) -> Iterator[StreamEvent]:
        index = self._index(item)
        if result.is_error:
            text = [{"type": "text", "text": result.content}]
            item.status, item.error = "failed", McpToolExecutionError(content=text)
            yield self._event(McpCallFailed, item_id=item.id, output_index=index)
        else:
            item.status, item.output = "completed", result.content
            yield self._event(McpCallCompleted, item_id=item.id, output_index=index)
        yield self._event(OutputItemDone, item=item, output_index=index)

    async def _list_tools(self, server: _McpServer) -> AsyncIterator[StreamEvent]:
        """List an MCP server's tools as an `mcp_list_tools` item, and offer them to the model.
        A server that cannot be listed is reported in the item; the response goes on without
        its tools."""
        assert self.tools is not None
        label = server.config.server_label
        item = OpenAIResponseOutputMessageMCPListTools(id=_id("mcpl"), server_label=label, tools=[])
        self.response.output.append(item)
        index = self._index(item)
        yield self._event(OutputItemAdded, item=item.model_copy(), output_index=index)
        yield self._event(McpListToolsInProgress, item_id=item.id, output_index=index)
        try:
            specs = await self.tools.mcp_tools(server.endpoint)
        except Exception as err:
            logger.warning("could not list an MCP server's tools", extra={"server": label})
            item.error = str(err) or type(err).__name__
            yield self._event(McpListToolsFailed, item_id=item.id, output_index=index)
            yield self._event(OutputItemDone, item=item, output_index=index)
            return
        offered = {spec.name for spec in self.loop.request.tools}
        for spec in specs:
            if not server.allows(spec.name) or spec.name in offered:
                continue  # a name taken by another tool keeps its first owner
            offered.add(spec.name)
            self.loop.request.tools.append(spec)
            item.tools.append(
                MCPListToolsTool(
                    name=spec.name, description=spec.description, input_schema=spec.parameters
                )
            )
            if server.needs_approval(spec.name):
                self._kinds[spec.name] = _ServerCall("approval", server)
            else:
                self._kinds[spec.name] = _ServerCall("mcp", server)
                self.loop.tools.server[spec.name] = self.tools.mcp_tool(server.endpoint, spec.name)
        yield self._event(McpListToolsCompleted, item_id=item.id, output_index=index)
        yield self._event(OutputItemDone, item=item, output_index=index)

    async def _answer_approval(self, approval: _Approval) -> AsyncIterator[StreamEvent]:
        """Run an approved call as an `mcp_call` item, or tell the model the caller declined."""
        call, answer = approval.call, approval.answer
        kind = self._kinds.get(call.name)
        if not answer.approve:
            reason = f": {answer.reason}" if answer.reason else ""
            approval.result.content = f"The user declined the call to `{call.name}`{reason}"
            return
        if kind is None or kind.server is None or self.tools is None:
            approval.result.content = f"Tool `{call.name}` is not offered in this request."
            return
        item = OpenAIResponseOutputMessageMCPCall(
            id=_id("mcp"),
            name=call.name,
            arguments=call.arguments,
            server_label=kind.server.config.server_label,
            status="in_progress",
            approval_request_id=answer.approval_request_id,
        )
        self.response.output.append(item)
        index = self._index(item)
        yield self._event(OutputItemAdded, item=item.model_copy(), output_index=index)
        yield self._event(McpCallInProgress, item_id=item.id, output_index=index)
        tool = self.tools.mcp_tool(kind.server.endpoint, call.name)
        result = await L.run_tool(tool, call)
        approval.result.content = result.content
        for out in self._mcp_call_done(item, result):
            yield out

    def _add_usage(self, usage: Usage | None) -> None:
        if usage is None:
            return
        if self._usage is not None:
            usage = Usage(
                self._usage.input_tokens + usage.input_tokens,
                self._usage.output_tokens + usage.output_tokens,
            )
        self._usage = usage
        self.response.usage = {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }

    async def _finish(self, event: L.Paused | L.Finished) -> StreamEvent:
        if isinstance(event, L.Finished) and event.reason == "blocked":
            return await self._end("completed")  # with its refusal, as OpenAI's API answers
        if isinstance(event, L.Finished) and event.reason != "answered":  # a limit ended it
            self.response.incomplete_details = {"reason": event.reason}
            return await self._end("incomplete")
        if self._last_finish == "length":
            self.response.incomplete_details = {"reason": "max_output_tokens"}
            return await self._end("incomplete")
        return await self._end("completed")

    async def _fail(self, err: Exception) -> StreamEvent:
        status = status_of(err)
        if isinstance(err, UpstreamTimeout):
            code, message = "model_timeout", str(err)
        elif isinstance(err, UpstreamFailed):
            code, message = "model_error", str(err)
        else:
            logger.exception("response failed", extra={"response_id": self.response.id})
            code, message = "server_error", type(err).__name__
        self._failure = RunFailed(status, message, response_id=self.response.id)
        return await self._end("failed", OpenAIResponseError(code=code, message=message))

    async def _end(self, status: str, error: OpenAIResponseError | None = None) -> StreamEvent:
        self.response.status = status
        self.response.error = error
        self.response.completed_at = int(time.time()) if status == "completed" else None
        if self.store or self.control is not None:  # a background response is kept to be polled
            try:
                if self.control is not None:
                    await self.control.save(self.response, self._conversation(), self._appended())
                else:
                    await self.storage.save(
                        self.tenant, self.response, self._conversation(), self._appended()
                    )
            except RunLost:
                raise
            except Exception as err:
                if status_of(err) not in (409, 404, 413, 503):
                    raise
                logger.warning("response not stored", extra={"response_id": self.response.id})
                error = _not_stored(err)
                self._failure = RunFailed(
                    status_of(err), error.message, response_id=self.response.id
                )
                self.response.status = status = "failed"
                self.response.error = error
                self.response.completed_at = None
                if self.control is None:
                    await self._abandon(error)
        status = self.response.status  # a cancel may have won the race to the end
        kind = {
            "completed": ResponseCompleted,
            "incomplete": ResponseIncomplete,
            "cancelled": ResponseCancelled,
        }.get(status, ResponseFailed)
        metrics.count(f"Responses{status.capitalize()}")
        return self._event(kind, response=self._public())

    async def _begin(self) -> None:
        """Make the response readable while it runs; its loss only hides it meanwhile."""
        lease = time.time() + self.loop.limits.run_seconds + 60
        try:
            await self.storage.begin(self.tenant, self.response, lease)
        except Exception:
            logger.exception("could not record running response", extra={"id": self.response.id})

    async def _abandon(self, error: OpenAIResponseError) -> None:
        """The running response reads failed now, not only once its lease passes (best effort:
        the storage that failed may fail this too)."""
        try:
            await self.storage.abandon(self.tenant, self.response.id, error)
        except Exception:
            logger.warning("running response left to its lease", extra={"id": self.response.id})

    def _conversation(self) -> list[dict[str, Any]]:
        """The stored CONTEXT: the conversation through this response's input, then what the
        loop added (replies and tool results); nothing of a failed response's output."""
        added = [] if self.response.status == "failed" else self.loop.request.messages[self._base :]
        kept = [m for m in added if m.role != "assistant" or m.content or m.tool_calls]
        return [m.to_dict() for m in self.context + kept]

    def _appended(self) -> ConversationAppend | None:
        """A response in a conversation adds its input and output items to it when it ends,
        unless it failed (then nothing)."""
        if self.conversation is None or self.response.status == "failed":
            return None
        items = [as_conversation_item(i, _id) for i in self.response.input + self.response.output]
        return ConversationAppend(
            self.conversation.conversation_id, self.conversation.version, items
        )

    def _index(self, item: Any) -> int:
        return self.response.output.index(item)

    def _public(self) -> OpenAIResponseObject:
        data = self.response.model_dump(exclude={"input"})
        return OpenAIResponseObject.model_validate(data)

    def _event(self, kind: type[StreamEvent], **fields: Any) -> StreamEvent:
        event = kind(sequence_number=self._sequence, **fields)
        self._sequence += 1
        if kind in (OutputItemAdded, OutputItemDone):
            event.response_id = self.response.id
        return event


class ResponsesEngine:
    def __init__(
        self,
        storage: ResponseStorage,
        models: ModelRouter,
        limits: L.Limits = L.Limits(),
        tools: ToolRuntime | None = None,
        shields: ShieldService | None = None,
        publisher: TurnEventPublisher | None = None,
    ) -> None:
        self.storage = storage
        self.models = models
        self.limits = limits
        self.publisher = publisher
        self.tools = tools  # None: only function tools
        self.shields = shields  # None: `guardrails` are refused

    async def start(self, tenant: str, body: CreateOpenaiResponseRequest) -> ResponseRun:
        specs, mcp, server_tools, kinds = await self._tools(tenant, body)
        conversation = await self._in_conversation(tenant, body)
        previous: list[ChatMessage] = conversation[1] if conversation is not None else []
        if body.previous_response_id:
            stored = await self.storage.context(tenant, body.previous_response_id)
            previous = [ChatMessage.from_dict(m) for m in stored]
        items = _input_items(body.input)
        new_input = _input_messages(items, await self._read_files(items))
        if isinstance(server_tools.get("file_search"), FileSearchTool):  # for a call without one
            users = [m.content for m in new_input if m.role == "user" and m.content]
            server_tools["file_search"].fallback_query = users[-1] if users else ""
        guardrails = body.guardrails or []
        shields = await shields_for(
            self.shields,
            tenant,
            guardrails,
            guardrails,
            [{"role": m.role, "content": m.content} for m in new_input if m.content],
        )
        _refuse_answered_again(previous, new_input)
        current = previous + new_input
        approvals = _approvals(current, items)
        _answer_forgotten_calls(current)
        current = _fit(current, body.truncation or "disabled", self.limits.context_tokens)
        system = [ChatMessage("system", body.instructions)] if body.instructions else []
        provider, model_id = self.models.resolve(body.model)
        text = body.text or OpenAIResponseText(format=OpenAIResponseTextFormat(type="text"))
        request = ChatRequest(
            model=model_id,
            messages=system + current,
            tools=specs,
            tool_choice=_tool_choice(body, mcp),
            response_format=_response_format(text),
            options=ModelOptions(
                temperature=body.temperature,
                top_p=body.top_p,
                max_tokens=body.max_output_tokens,
                presence_penalty=body.presence_penalty,
                frequency_penalty=body.frequency_penalty,
                top_logprobs=body.top_logprobs,
                parallel_tool_calls=body.parallel_tool_calls,
                reasoning_effort=body.reasoning.effort if body.reasoning else None,
                user=body.safety_identifier or body.user,
                prompt_cache_key=body.prompt_cache_key,
            ),
        )
        provider.check(request)  # 400 before anything runs
        response = _response_object(body, items, text)
        if conversation is not None:
            response.conversation = ConversationReference(id=conversation[0].conversation_id)
        limits = self.limits
        if body.max_tool_calls is not None:
            calls = min(body.max_tool_calls, limits.max_tool_calls)
            limits = dataclasses.replace(limits, max_tool_calls=calls)
        loop = L.AgentLoop(
            provider,
            request,
            L.Tools(client=None, server=server_tools),
            max_iterations=body.max_infer_iters or 10,
            limits=limits,
            stream=bool(body.stream or body.background),  # a background run may be followed
            new_call_id=lambda: _id("call"),
            shields=shields,
        )
        return ResponseRun(
            storage=self.storage,
            tenant=tenant,
            response=response,
            context=current,
            loop=loop,
            store=body.store is not False,
            tools=self.tools,
            mcp=mcp,
            approvals=approvals,
            server_calls=kinds,
            publisher=self.publisher,
            conversation=conversation[0] if conversation is not None else None,
            guardrails=guardrails,
            include=list(body.include or []),
        )

    async def restore(
        self,
        tenant: str,
        state: dict[str, Any],
        credentials: dict[str, dict[str, Any]],
        control: RunControl,
        run_seconds: float | None = None,
    ) -> ResponseRun:
        """A run rebuilt from its stored `state()`, to go on under `control`. `credentials`:
        each MCP server's `headers` and `authorization` by label (never stored with the
        state); `run_seconds`: what is left of this invocation for the run."""
        response = OpenAIResponseObjectWithInput.model_validate(state["response"])
        servers: dict[str, _McpServer] = {}
        for tool in response.tools:
            if isinstance(tool, OpenAIResponseInputToolMCP):
                secret = credentials.get(tool.server_label, {})
                config = tool.model_copy(
                    update={
                        "headers": secret.get("headers"),
                        "authorization": secret.get("authorization"),
                    }
                )
                servers[tool.server_label] = _McpServer(config, _endpoint(config))
        kinds = {
            name: _ServerCall(kind, servers.get(label) if label else None)
            for name, (kind, label) in state["kinds"].items()
        }
        server_tools: dict[str, Any] = {}
        for name, call in kinds.items():
            if call.kind == "file_search":
                tool = next(
                    t for t in response.tools if isinstance(t, OpenAIResponseInputToolFileSearch)
                )
                search = self._file_search(tenant, tool)
                search.fallback_query = state["file_search"]["fallback_query"]
                search.files.update(state["file_search"]["files"])
                server_tools[name] = search
            elif call.kind == "web_search":
                server_tools[name] = self.tools.web_search()[1]
            elif call.kind == "mcp" and call.server is not None:
                server_tools[name] = self.tools.mcp_tool(call.server.endpoint, name)
        provider, _ = self.models.resolve(response.model)
        messages = [ChatMessage.from_dict(m) for m in state["messages"]]
        response_format = state["response_format"]
        request = ChatRequest(
            model=state["model"],
            messages=messages,
            tools=[ToolSpec(**spec) for spec in state["tools"]],
            tool_choice=state["tool_choice"],
            response_format=(
                JsonSchemaResponseFormat.model_validate(response_format)
                if response_format
                else None
            ),
            options=ModelOptions(**state["options"]),
        )
        guardrails = state["guardrails"]
        shields = await shields_for(
            self.shields, tenant, guardrails, guardrails, state["shield_input"]
        )
        limits = dataclasses.replace(self.limits, max_tool_calls=state["max_tool_calls"])
        if run_seconds is not None:
            limits = dataclasses.replace(limits, run_seconds=min(limits.run_seconds, run_seconds))
        loop = L.AgentLoop(
            provider,
            request,
            L.Tools(client=None, server=server_tools),
            max_iterations=state["max_iterations"],
            iterations=state["iterations"],
            tool_calls=state["tool_calls"],
            limits=limits,
            stream=state["stream"],
            new_call_id=lambda: _id("call"),
            shields=shields,
            should_suspend=control.should_suspend,
        )
        base, system = state["base"], state["system"]
        approvals = [
            _Approval(
                OpenAIResponseMCPApprovalResponse.model_validate(a["answer"]),
                ChatToolCall(**a["call"]),
                messages[a["message"]],
            )
            for a in state["approvals"]
        ]
        conversation = state["conversation"]
        run = ResponseRun(
            storage=self.storage,
            tenant=tenant,
            response=response,
            context=messages[system:base],  # the same messages, as the run built them
            loop=loop,
            store=state["store"],
            tools=self.tools,
            mcp=[servers[label] for label in state["pending_mcp"]],
            approvals=approvals,
            server_calls=kinds,
            publisher=self.publisher,
            conversation=ConversationAppend(*conversation) if conversation else None,
            control=control,
            guardrails=guardrails,
            include=state["include"],
        )
        run.resumed = state["sequence"] > 0
        run._base = base
        run._sequence = state["sequence"]
        run._usage = Usage(**state["usage"]) if state["usage"] else None
        run._last_finish = state["last_finish"]
        run._items = {call_id: response.output[i] for call_id, i in state["items"].items()}
        if state["reply_message"] is not None:
            run._reply_message = response.output[state["reply_message"]]
        run._input_checked = not state["shield_input"]
        return run

    async def _in_conversation(
        self, tenant: str, body: CreateOpenaiResponseRequest
    ) -> tuple[ConversationAppend, list[ChatMessage]] | None:
        """A response in a conversation continues it: its items as the context, and the version
        they were read at, which the append of this response's items must still find."""
        if body.conversation is None:
            return None
        if body.previous_response_id:
            raise InvalidRequest("conversation and previous_response_id cannot be used together")
        if body.store is False:
            raise InvalidRequest("a response in a conversation is stored: store cannot be false")
        conversation_id = body.conversation
        if not isinstance(conversation_id, str):
            conversation_id = conversation_id.id
        items, version = await self.storage.conversation_context(tenant, conversation_id)
        messages = _input_messages(items, await self._read_files(items))
        return ConversationAppend(conversation_id, version), messages

    async def _read_files(self, items: list[Any]) -> dict[int, str | ChatDocument]:
        """The content of each input_file part: its data decoded, or its URL fetched through
        the outbound guard; 400 (413) for what cannot be read."""
        files: dict[int, str | ChatDocument] = {}
        for part in _file_parts(items):
            if part.file_id is not None:
                raise InvalidRequest(
                    "input_file file_id needs the Files API, which this deployment does not"
                    " serve yet; send file_data or file_url"
                )
            if part.file_url is not None:
                if self.tools is None:
                    raise InvalidRequest("input_file file_url is not available; send file_data")
                name = part.filename or part.file_url.rsplit("/", 1)[-1] or "file"
                raw, media_type = await self.tools.fetch(part.file_url, MAX_FILE_BYTES)
            else:
                name = part.filename or "file"
                raw, media_type = _decode_file_data(part.file_data or "", name)
            files[id(part)] = _file_content(name, media_type, raw)
        return files

    def _file_search(self, tenant: str, tool: OpenAIResponseInputToolFileSearch) -> FileSearchTool:
        ranking = tool.ranking_options
        return FileSearchTool(
            runtime=self.tools,
            tenant=tenant,
            vector_store_ids=list(tool.vector_store_ids),
            max_results=tool.max_num_results or 10,
            filters=tool.filters,
            score_threshold=ranking.score_threshold if ranking else None,
        )

    async def _tools(
        self, tenant: str, body: CreateOpenaiResponseRequest
    ) -> tuple[list[ToolSpec], list[_McpServer], dict[str, Any], dict[str, _ServerCall]]:
        """The request's tools: function tools for the model to call and the client to run;
        web search to run here; MCP servers (checked by the outbound guard now, listed when
        the response runs). 400 for what cannot be served."""
        specs: list[ToolSpec] = []
        mcp: list[_McpServer] = []
        server_tools: dict[str, Any] = {}
        kinds: dict[str, _ServerCall] = {}
        for tool in body.tools or []:
            server_side = (
                OpenAIResponseInputToolMCP
                | OpenAIResponseInputToolWebSearch
                | OpenAIResponseInputToolFileSearch
            )
            if isinstance(tool, server_side) and self.tools is None:
                raise InvalidRequest(f"tool type '{tool.type}' is not available on this deployment")
            if isinstance(tool, OpenAIResponseInputToolMCP):
                if any(s.config.server_label == tool.server_label for s in mcp):
                    raise InvalidRequest(f"Two mcp tools have the label '{tool.server_label}'")
                await self.tools.check_url(tool.server_url)
                mcp.append(_McpServer(tool, _endpoint(tool)))
            elif isinstance(tool, OpenAIResponseInputToolFileSearch):
                spec = ToolSpec("file_search", FILE_SEARCH_DESCRIPTION, QUERY_PARAMETERS)
                specs.append(spec)
                server_tools[spec.name] = self._file_search(tenant, tool)
                kinds[spec.name] = _ServerCall("file_search")
            elif isinstance(tool, OpenAIResponseInputToolWebSearch):
                spec, runner = self.tools.web_search()
                specs.append(spec)
                server_tools[spec.name] = runner
                kinds[spec.name] = _ServerCall("web_search")
            else:
                parameters = tool.parameters or {"type": "object", "properties": {}}
                specs.append(ToolSpec(tool.name, tool.description or "", parameters))
        names = [spec.name for spec in specs]
        if len(set(names)) < len(names):
            raise InvalidRequest(f"Tool names must be unique; got {names}")
        return specs, mcp, server_tools, kinds


FILE_SEARCH_DESCRIPTION = (
    "Search the user's files (their vector stores) for passages about a query; answer from what"
    " it finds and cite it."
)


def _not_stored(err: Exception) -> OpenAIResponseError:
    """Why a finished response could not be stored: storage unavailable, or (a response in a
    conversation) the conversation changed meanwhile, is gone, or takes no more items at once."""
    status = status_of(err)
    if status == 503:
        message = "Storage is unavailable for a moment; the response was not stored"
        return OpenAIResponseError(code="server_error", message=message)
    code = {409: "conversation_conflict", 404: "conversation_not_found"}.get(status, "too_large")
    return OpenAIResponseError(code=code, message=f"{err}; the response was not stored")


def _response_object(
    body: CreateOpenaiResponseRequest, items: list[Any], text: OpenAIResponseText
) -> OpenAIResponseObjectWithInput:
    """The response as it starts: the request's settings echoed, the specification's defaults
    for what it left unset. MCP credentials (`headers`, `authorization`) are not echoed or
    stored."""
    tools = [
        tool.model_copy(update={"headers": None, "authorization": None})
        if isinstance(tool, OpenAIResponseInputToolMCP)
        else tool
        for tool in body.tools or []
    ]
    settings = body.model_dump(
        include={
            "temperature",
            "top_p",
            "presence_penalty",
            "frequency_penalty",
            "top_logprobs",
            "truncation",
            "parallel_tool_calls",
            "max_output_tokens",
            "max_tool_calls",
            "user",
            "safety_identifier",
            "prompt_cache_key",
            "service_tier",
            "metadata",
            "reasoning",
            "tool_choice",
        },
        exclude_none=True,
    )
    if settings.get("service_tier") == "auto":
        settings["service_tier"] = "default"  # the tier `auto` chose: there is one
    return OpenAIResponseObjectWithInput(
        id=_id("resp"),
        created_at=int(time.time()),
        model=body.model,
        output=[],
        status="in_progress",
        previous_response_id=body.previous_response_id,
        text=text,
        instructions=body.instructions,
        input=items,
        tools=tools,
        store=body.store is not False,
        background=bool(body.background),
        **settings,
    )


def _tool_choice(body: CreateOpenaiResponseRequest, mcp: list[_McpServer]) -> str:
    """`tool_choice` as the loop's model request names it: auto, none, required, or a tool."""
    choice = body.tool_choice or "auto"
    if isinstance(choice, str):
        return choice
    if isinstance(choice, ToolChoiceFunction):
        names = [t.name for t in body.tools or [] if isinstance(t, OpenAIResponseInputToolFunction)]
        if choice.name not in names:
            raise InvalidRequest(f"tool_choice names function {choice.name}, not in tools")
        return choice.name
    if isinstance(choice, ToolChoiceMcp):
        if not any(s.config.server_label == choice.server_label for s in mcp):
            raise InvalidRequest(
                f"tool_choice names MCP server {choice.server_label}, not in tools"
            )
        return choice.name or "required"
    if choice.type == "file_search":
        raise InvalidRequest("tool_choice file_search: file_search is not available")
    if not any(isinstance(t, OpenAIResponseInputToolWebSearch) for t in body.tools or []):
        raise InvalidRequest(f"tool_choice {choice.type} needs a {choice.type} tool in tools")
    return "web_search"


def _fit(
    conversation: list[ChatMessage], truncation: str, context_tokens: int
) -> list[ChatMessage]:
    """The conversation within the context window (estimated at 4 characters a token):
    `auto` drops the oldest messages (and results left without their call); `disabled`
    refuses a conversation that does not fit."""

    def tokens(messages: list[ChatMessage]) -> int:
        chars = sum(
            len(m.content) + sum(len(c.arguments) + len(c.name) for c in m.tool_calls)
            for m in messages
        )
        return chars // 4 + 1

    if tokens(conversation) <= context_tokens:
        return conversation
    if truncation != "auto":
        raise InvalidRequest(
            f"The input is about {tokens(conversation)} tokens, more than the context window of"
            f" {context_tokens}; send truncation: auto to drop the oldest items"
        )
    kept = list(conversation)
    while kept and tokens(kept) > context_tokens:
        kept.pop(0)
        while kept and kept[0].role == "tool":
            kept.pop(0)
    if not kept:
        raise InvalidRequest(
            f"The last input item alone is more than the context window of {context_tokens} tokens"
        )
    return kept


def _endpoint(tool: OpenAIResponseInputToolMCP) -> McpEndpoint:
    headers = dict(tool.headers or {})
    if tool.authorization:
        headers["Authorization"] = f"Bearer {tool.authorization}"
    return McpEndpoint(url=tool.server_url, label=tool.server_label, headers=headers)


def _approvals(conversation: list[ChatMessage], items: list[Any]) -> list[_Approval]:
    """The input's approval answers, each placed in the conversation as the result of the call
    it answers (right after that call's other results); 400 for an answer to no waiting call."""
    approvals = []
    for answer in items:
        if not isinstance(answer, OpenAIResponseMCPApprovalResponse):
            continue
        found = _waiting_call(conversation, answer.approval_request_id)
        if found is None:
            raise InvalidRequest(
                f"approval_request_id {answer.approval_request_id} names no call waiting for"
                " approval in this conversation"
            )
        position, call = found
        result = ChatMessage("tool", "", tool_call_id=call.id)
        conversation.insert(position, result)
        approvals.append(_Approval(answer, call, result))
    return approvals


def _waiting_call(conversation: list[ChatMessage], call_id: str) -> tuple[int, ChatToolCall] | None:
    """The call with this id that has no result yet, and where its result goes."""
    if any(m.role == "tool" and m.tool_call_id == call_id for m in conversation):
        return None
    for index, message in enumerate(conversation):
        for call in message.tool_calls:
            if call.id == call_id:
                position = index + 1
                while position < len(conversation) and conversation[position].role == "tool":
                    position += 1
                return position, call
    return None


def _refuse_answered_again(stored: list[ChatMessage], new_input: list[ChatMessage]) -> None:
    """A function call is answered once: an output for a call the conversation (or the chain of
    responses) already answered is a 409. Two clients racing to answer it in one conversation
    then have one winner; branches from one response each answer it once."""
    answered = {m.tool_call_id for m in stored if m.role == "tool"}
    again = [m.tool_call_id for m in new_input if m.role == "tool" and m.tool_call_id in answered]
    if again:
        raise Conflict(f"function call {again[0]} was already answered in this conversation")


def _answer_forgotten_calls(conversation: list[ChatMessage]) -> None:
    """A call the conversation never answered (an approval request followed by a new question)
    gets a result saying so: chat models refuse a call without one."""
    answered = {m.tool_call_id for m in conversation if m.role == "tool"}
    index = 0
    while index < len(conversation):
        calls = [c for c in conversation[index].tool_calls if c.id not in answered]
        position = index + 1
        while position < len(conversation) and conversation[position].role == "tool":
            position += 1
        if calls and position < len(conversation):  # at the end: the input answers it later
            for call in calls:
                note = f"No result: the call to `{call.name}` was not run."
                conversation.insert(position, ChatMessage("tool", note, tool_call_id=call.id))
                answered.add(call.id)
        index += 1


def _argument(arguments: str, name: str) -> str | None:
    try:
        value = json.loads(arguments or "{}").get(name)
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def _response_format(text: OpenAIResponseText) -> JsonSchemaResponseFormat | None:
    fmt = text.format
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_schema":
        if not fmt.schema_:
            raise InvalidRequest("text.format of type json_schema needs a schema")
        return JsonSchemaResponseFormat(json_schema=fmt.schema_)
    return JsonSchemaResponseFormat(json_schema={})  # json_object


def _input_items(value: str | list[Any]) -> list[Any]:
    """The request's input as stored items, each with an id (as OpenAI lists them)."""
    if isinstance(value, str):
        value = [
            OpenAIResponseMessage(
                role="user", content=[OpenAIResponseInputMessageContentText(text=value)]
            )
        ]
    items = []
    for item in value:
        if getattr(item, "id", None) is None:
            prefix = {"message": "msg", "function_call": "fc", "function_call_output": "fco"}
            item = item.model_copy(update={"id": _id(prefix.get(item.type, "item"))})
        items.append(item)
    return items


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.text for part in content if hasattr(part, "text"))


def _content_images(content: Any) -> list[str]:
    if isinstance(content, str):
        return []
    return [
        part.image_url
        for part in content
        if isinstance(part, OpenAIResponseInputMessageContentImage) and part.image_url
    ]


#: The largest file a request may give as input (API Gateway carries 10 MB at most).
MAX_FILE_BYTES = 8 * 1024 * 1024
_TEXT_TYPES = {"application/json", "application/xml", "application/yaml", "application/x-yaml"}


def _file_parts(items: list[Any]) -> Iterator[OpenAIResponseInputMessageContentFile]:
    for item in items:
        if isinstance(item, OpenAIResponseMessage) and not isinstance(item.content, str):
            for part in item.content:
                if isinstance(part, OpenAIResponseInputMessageContentFile):
                    yield part


def _decode_file_data(data: str, name: str) -> tuple[bytes, str]:
    """A data: URL's bytes and media type, or plain base64's with the type its name says."""
    import base64
    import binascii
    import mimetypes

    media_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
    if data.startswith("data:"):
        header, _, data = data.partition(",")
        media_type = header[5:].split(";")[0] or media_type
    if len(data) > MAX_FILE_BYTES * 4 // 3 + 4:
        raise TooLarge(f"input_file {name} is larger than {MAX_FILE_BYTES} bytes")
    try:
        return base64.b64decode(data, validate=True), media_type
    except (binascii.Error, ValueError):
        raise InvalidRequest(f"input_file {name}: file_data is not base64") from None


def _file_content(name: str, media_type: str, raw: bytes) -> str | ChatDocument:
    """A text file as text every model reads; anything else as a document for the providers
    that take documents (the others refuse it with a 400)."""
    import base64

    if media_type.startswith("text/") or media_type in _TEXT_TYPES:
        try:
            return f"[file {name}]\n{raw.decode()}"
        except UnicodeDecodeError:
            raise InvalidRequest(f"input_file {name} is not UTF-8 text") from None
    return ChatDocument(name, media_type, base64.b64encode(raw).decode())


def _input_messages(
    items: list[Any], files: dict[int, str | ChatDocument] | None = None
) -> list[ChatMessage]:
    """The input items as chat messages; `files`: each input_file part's content, read
    beforehand (`ResponsesEngine._read_files`)."""
    files = files or {}
    messages: list[ChatMessage] = []
    for item in items:
        if isinstance(item, OpenAIResponseMessage):
            role = {"developer": "system"}.get(item.role, item.role)
            text, images = _content_text(item.content), _content_images(item.content)
            message = ChatMessage(role, text, images=images)
            for part in item.content if not isinstance(item.content, str) else []:
                content = files.get(id(part))
                if isinstance(content, ChatDocument):
                    message.documents.append(content)
                elif content is not None:
                    message.content = "\n\n".join(filter(None, [message.content, content]))
            messages.append(message)
        elif isinstance(item, OpenAIResponseOutputMessageFunctionToolCall):
            call = ChatToolCall(item.call_id, item.name, item.arguments)
            if messages and messages[-1].role == "assistant":
                messages[-1].tool_calls.append(call)
            else:
                messages.append(ChatMessage("assistant", "", tool_calls=[call]))
        elif isinstance(item, OpenAIResponseInputFunctionToolCallOutput):
            messages.append(ChatMessage("tool", item.output, tool_call_id=item.call_id))
        elif isinstance(item, OpenAIResponseMCPApprovalRequest):
            call = ChatToolCall(item.id, item.name, item.arguments)
            messages.append(ChatMessage("assistant", "", tool_calls=[call]))
        elif isinstance(item, OpenAIResponseOutputMessageMCPCall):
            call = ChatToolCall(item.id, item.name, item.arguments)
            messages.append(ChatMessage("assistant", "", tool_calls=[call]))
            output = item.output if item.output is not None else str(item.error or "")
            messages.append(ChatMessage("tool", output, tool_call_id=item.id))
    return messages
