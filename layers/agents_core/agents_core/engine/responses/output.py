"""A response's output: its items, and OpenAI's stream events for them, from the agent loop's
events, in the order the official SDK accumulates them.

`OutputWriter.on` turns one loop event into the stream events it means (items opened, written
and closed); the items it writes are the response's `output`. Every event is numbered here.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from ...api.responses import (
    ContentPartAdded,
    ContentPartDone,
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
    McpToolExecutionError,
    OpenAIResponseAnnotationFileCitation,
    OpenAIResponseContentPartRefusal,
    OpenAIResponseMCPApprovalRequest,
    OpenAIResponseMessage,
    OpenAIResponseObject,
    OpenAIResponseObjectWithInput,
    OpenAIResponseOutputMessageContentOutputText,
    OpenAIResponseOutputMessageFileSearchToolCall,
    OpenAIResponseOutputMessageFunctionToolCall,
    OpenAIResponseOutputMessageMCPCall,
    OpenAIResponseOutputMessageWebSearchToolCall,
    OpenAIResponseReasoningItem,
    OpenAIResponseReasoningText,
    OutputItemAdded,
    OutputItemDone,
    OutputTextAnnotationAdded,
    OutputTextDelta,
    OutputTextDone,
    ReasoningTextDelta,
    ReasoningTextDone,
    RefusalDelta,
    RefusalDone,
    StreamEvent,
    WebSearchAction,
    WebSearchCallCompleted,
    WebSearchCallInProgress,
    WebSearchCallSearching,
)
from ...ids import item_id
from ...inference.types import ChatMessage, ChatToolCall, Usage
from .. import loop as L
from ..file_search import Citations, FileSearchTool, query_of
from ..shields import BLOCKED_MESSAGE
from .tools import ServerCall


@dataclasses.dataclass(frozen=True, slots=True)
class PlainTextDelta:
    """A `response.output_text.delta` event as `ResponseRun.events(plain_text=True)` yields it:
    its fields as plain values, for an SSE writer (`services.streams.response_frame`), not an
    OutputTextDelta validated by pydantic, 7% of a delta's instructions."""

    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    delta: str
    type: ClassVar[str] = "response.output_text.delta"
    logprobs: ClassVar[tuple[()]] = ()


class OutputWriter:
    """The output items of one response and its numbered stream events.

    `kinds` says what a call to each tool name is (an MCP call, an approval request, a web or
    file search); a name it does not know is a function call for the client. `messages` is the
    loop's conversation, where a refusal replaces the answer it blocked."""

    def __init__(
        self,
        response: OpenAIResponseObjectWithInput,
        messages: list[ChatMessage],
        kinds: dict[str, ServerCall],
        include: list[str],
        file_search: FileSearchTool | None,
        namespaced: dict[str, tuple[str, str]] | None = None,
        seal_reasoning: Callable[[str], str] | None = None,
    ) -> None:
        self.response = response
        self.kinds = kinds  # tool name -> what its calls are; grows as MCP servers are listed
        self.include = include  # what the request asked to include (file search results)
        self.namespaced = namespaced or {}  # a namespace's function: (namespace, name) by tool
        self._seal_reasoning = seal_reasoning  # reasoning -> its blob, when `include` asks
        self.usage: Usage | None = None
        self.last_finish = "stop"  # the last model reply's finish reason
        self._messages = messages
        self._file_search = file_search
        self._sequence = 0
        #: A text delta as a PlainTextDelta (`ResponseRun.events(plain_text=True)`).
        self.plain_text = False
        self._items: dict[str, Any] = {}  # call id -> its output item
        self._text: OpenAIResponseMessage | None = None  # the message item being written
        self._reply_message: OpenAIResponseMessage | None = None  # the current reply's text
        self._reasoning: OpenAIResponseReasoningItem | None = None  # the reasoning being written
        self._call: Any = None  # likewise, the call item (of any kind) being written
        self._calls: dict[int, Any] = {}  # this reply's call items, by index
        self._citations: Citations | None = None  # the text being written, with file search

    def number_after(self, sequence: int) -> None:
        """Number the next event after `sequence`: the events a crashed invocation sent stay."""
        self._sequence = max(self._sequence, sequence + 1)

    def state(self) -> dict[str, Any]:
        """What a continuation needs of the output, as JSON data (`restore` reads it back)."""
        return {
            "sequence": self._sequence,
            "usage": dataclasses.asdict(self.usage) if self.usage else None,
            "last_finish": self.last_finish,
            "namespaced": self.namespaced,
            "kinds": {
                name: [kind.kind, kind.server.config.server_label if kind.server else None]
                for name, kind in self.kinds.items()
            },
            "items": {call_id: self.index(item) for call_id, item in self._items.items()},
            "reply_message": (
                self.index(self._reply_message) if self._reply_message is not None else None
            ),
        }

    def restore(self, state: dict[str, Any]) -> None:
        output = self.response.output
        self._sequence = state["sequence"]
        self.usage = Usage(**state["usage"]) if state["usage"] else None
        self.last_finish = state["last_finish"]
        self._items = {call_id: output[i] for call_id, i in state["items"].items()}
        if state["reply_message"] is not None:
            self._reply_message = output[state["reply_message"]]

    def event(self, kind: type[StreamEvent], **fields: Any) -> StreamEvent:
        event = kind(sequence_number=self._sequence, **fields)
        self._sequence += 1
        if kind in (OutputItemAdded, OutputItemDone):
            event.response_id = self.response.id
        return event

    def withdraw(self, event: StreamEvent) -> None:
        """Give back the number of `event`, the last numbered, which is never sent (an end
        whose store failed: the failure's end takes it)."""
        if event.sequence_number == self._sequence - 1:
            self._sequence -= 1

    def index(self, item: Any) -> int:
        return self.response.output.index(item)

    def public(self) -> OpenAIResponseObject:
        """The response as a client sees it (without its input): its fields as they are now,
        already valid, not dumped and validated again (about 20 us a call, three a response);
        the output list is copied, as the response goes on adding to it."""
        fields = {name: getattr(self.response, name) for name in OpenAIResponseObject.model_fields}
        fields["output"] = list(self.response.output)
        return OpenAIResponseObject.model_construct(**fields)

    def add(self, item: Any) -> StreamEvent:
        """A new item at the end of the output, announced as it is now."""
        self.response.output.append(item)
        return self.event(OutputItemAdded, item=item.model_copy(), output_index=self.index(item))

    def done(self, item: Any) -> StreamEvent:
        return self.event(OutputItemDone, item=item, output_index=self.index(item))

    def on(self, event: L.LoopEvent) -> Iterator[StreamEvent]:
        """The stream events one loop event means: items opened, written and closed."""
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
                ids = {"item_id": item.id, "output_index": self.index(item), "content_index": 0}
                yield self.event(ReasoningTextDelta, delta=text, **ids)
                item.content[0].text += text
            case L.TextDelta(text=text):
                if self._reasoning is not None:
                    yield from self._close_reasoning()
                if self._text is None:
                    yield from self._open_text()
                if self._citations is not None:
                    text, found = self._citations.feed(text)
                    yield from self._write(text)
                    yield from self._cite(found)
                elif text:  # most deltas: one event, without a generator for it
                    yield self._text_delta(text)
            case L.ToolCallDelta(index=index, call_id=call_id, name=name, arguments=arguments):
                yield from self._close_reasoning()
                yield from self._close_text()
                if index not in self._calls:
                    yield from self._close_call()
                    yield from self._open_call(index, call_id, name)
                yield from self._write_arguments(self._calls[index], arguments)
            case L.ToolsStarted(calls=calls):
                for call in calls:
                    yield from self._tool_started(call)
            case L.ToolFinished(result=result):  # its item is done as soon as its result is
                yield from self._tool_ran(result)
            case L.ModelReplied(finish=finish, usage=usage):
                yield from self._close_reasoning()
                yield from self._close_text()
                yield from self._close_call()
                self.last_finish = finish
                self._add_usage(usage)

    def cut_short(self) -> Iterator[StreamEvent]:
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
            yield self.done(item)

    def mcp_call_done(
        self, item: OpenAIResponseOutputMessageMCPCall, result: L.ToolResult
    ) -> Iterator[StreamEvent]:
        index = self.index(item)
        if result.is_error:
            text = [{"type": "text", "text": result.content}]
            item.status, item.error = "failed", McpToolExecutionError(content=text)
            yield self.event(McpCallFailed, item_id=item.id, output_index=index)
        else:
            item.status, item.output = "completed", result.content
            yield self.event(McpCallCompleted, item_id=item.id, output_index=index)
        yield self.done(item)

    def _open_text(self) -> Iterator[StreamEvent]:
        item = OpenAIResponseMessage(
            id=item_id("msg"),
            role="assistant",
            status="in_progress",
            content=[OpenAIResponseOutputMessageContentOutputText(text="")],
        )
        self._text = self._reply_message = item
        if self._file_search is not None:
            self._citations = Citations(self._file_search.files)
        self.response.output.append(item)
        index = self.index(item)
        announced = item.model_copy(update={"content": []})  # as opened, without the text
        yield self.event(OutputItemAdded, item=announced, output_index=index)
        yield self.event(
            ContentPartAdded,
            item_id=item.id,
            output_index=index,
            content_index=0,
            part=OpenAIResponseOutputMessageContentOutputText(text=""),
        )

    def _write(self, text: str) -> Iterator[StreamEvent]:
        if text:
            yield self._text_delta(text)

    def _text_delta(self, text: str) -> StreamEvent | PlainTextDelta:
        assert self._text is not None
        fields = {"item_id": self._text.id, "output_index": self.index(self._text)}
        if self.plain_text:
            event: StreamEvent | PlainTextDelta = PlainTextDelta(
                self._sequence, **fields, content_index=0, delta=text
            )
            self._sequence += 1
        else:
            event = self.event(OutputTextDelta, **fields, content_index=0, delta=text)
        self._text.content[0].text += text
        return event

    def _cite(self, found: list[tuple[str, str, int]]) -> Iterator[StreamEvent]:
        """A `file_citation` annotation where the answer cited a file search result."""
        assert self._text is not None
        annotations = self._text.content[0].annotations
        for file_id, filename, index in found:
            annotation = OpenAIResponseAnnotationFileCitation(
                file_id=file_id, filename=filename, index=index
            )
            annotations.append(annotation)
            yield self.event(
                OutputTextAnnotationAdded,
                item_id=self._text.id,
                output_index=self.index(self._text),
                content_index=0,
                annotation_index=len(annotations) - 1,
                annotation=annotation,
            )

    def _open_reasoning(self) -> Iterator[StreamEvent]:
        item = OpenAIResponseReasoningItem(
            id=item_id("rs"), status="in_progress", content=[OpenAIResponseReasoningText(text="")]
        )
        self._reasoning = item
        self.response.output.append(item)
        yield self.event(
            OutputItemAdded, item=item.model_copy(deep=True), output_index=self.index(item)
        )

    def _close_reasoning(self, status: str = "completed") -> Iterator[StreamEvent]:
        item, self._reasoning = self._reasoning, None
        if item is None:
            return
        index, text = self.index(item), item.content[0].text
        item.status = status
        if self._seal_reasoning is not None:
            item.encrypted_content = self._seal_reasoning(text)
        yield self.event(
            ReasoningTextDone, item_id=item.id, output_index=index, content_index=0, text=text
        )
        yield self.done(item)

    def _refuse(self, refusal: str) -> Iterator[StreamEvent]:
        """A guardrail blocked the input or the answer: the response says its message, as a
        `refusal` part, and the conversation goes on from that."""
        part = OpenAIResponseContentPartRefusal(refusal=refusal)
        item = OpenAIResponseMessage(
            id=item_id("msg"), role="assistant", status="completed", content=[part]
        )
        self.response.output.append(item)
        index = self.index(item)
        ids = {"item_id": item.id, "output_index": index, "content_index": 0}
        opened = item.model_copy(update={"content": [], "status": "in_progress"})
        yield self.event(OutputItemAdded, item=opened, output_index=index)
        yield self.event(ContentPartAdded, part=part.model_copy(update={"refusal": ""}), **ids)
        yield self.event(RefusalDelta, delta=refusal, **ids)
        yield self.event(RefusalDone, refusal=refusal, **ids)
        yield self.event(ContentPartDone, part=part, **ids)
        yield self.done(item)
        messages = self._messages
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
        index = self.index(item)
        part = item.content[0]
        item.status = status
        yield self.event(
            OutputTextDone, item_id=item.id, output_index=index, content_index=0, text=part.text
        )
        yield self.event(
            ContentPartDone, item_id=item.id, output_index=index, content_index=0, part=part
        )
        yield self.done(item)

    def _open_call(self, index: int, call_id: str, name: str) -> Iterator[StreamEvent]:
        """The item a call is: a function call for the client, an MCP call or a web search
        run here, or a request for the caller's approval."""
        kind = self.kinds.get(name)
        item: Any
        if kind is None:
            namespace, function = self.namespaced.get(name, (None, name))
            item = OpenAIResponseOutputMessageFunctionToolCall(
                id=item_id("fc"),
                call_id=call_id,
                name=function,
                namespace=namespace,
                arguments="",
                status="in_progress",
            )
        elif kind.kind == "web_search":
            item = OpenAIResponseOutputMessageWebSearchToolCall(
                id=item_id("ws"), status="in_progress", action=WebSearchAction()
            )
        elif kind.kind == "file_search":
            item = OpenAIResponseOutputMessageFileSearchToolCall(
                id=item_id("fs"), queries=[], status="in_progress"
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
                    id=item_id("mcp"),
                    name=name,
                    arguments="",
                    server_label=label,
                    status="in_progress",
                )
        self._calls[index] = self._call = self._items[call_id] = item
        yield self.add(item)  # a copy: the event is sent later than the item grows

    def _write_arguments(self, item: Any, arguments: str) -> Iterator[StreamEvent]:
        if not arguments or not hasattr(item, "arguments"):
            return
        item.arguments += arguments
        kind = {
            OpenAIResponseOutputMessageFunctionToolCall: FunctionCallArgumentsDelta,
            OpenAIResponseOutputMessageMCPCall: McpCallArgumentsDelta,
        }.get(type(item))
        if kind is not None:
            yield self.event(kind, item_id=item.id, output_index=self.index(item), delta=arguments)

    def _close_call(self, status: str = "completed") -> Iterator[StreamEvent]:
        """The model finished writing the call: a function call or an approval request is
        complete; an MCP call or a web search still has to run."""
        item, self._call = self._call, None
        if item is None:
            return
        index = self.index(item)
        if isinstance(item, OpenAIResponseOutputMessageFunctionToolCall):
            item.status = status
            yield self.event(
                FunctionCallArgumentsDone,
                item_id=item.id,
                output_index=index,
                arguments=item.arguments,
            )
            yield self.done(item)
        elif isinstance(item, OpenAIResponseOutputMessageMCPCall):
            yield self.event(
                McpCallArgumentsDone, item_id=item.id, output_index=index, arguments=item.arguments
            )
        elif isinstance(item, OpenAIResponseMCPApprovalRequest):
            yield self.done(item)

    def _tool_started(self, call: ChatToolCall) -> Iterator[StreamEvent]:
        item = self._items.get(call.id)
        if isinstance(item, OpenAIResponseOutputMessageMCPCall):
            yield self.event(McpCallInProgress, item_id=item.id, output_index=self.index(item))
        elif isinstance(item, OpenAIResponseOutputMessageWebSearchToolCall):
            item.action = WebSearchAction(query=_argument(call.arguments, "query"))
            item.status = "searching"
            index = self.index(item)
            yield self.event(WebSearchCallInProgress, item_id=item.id, output_index=index)
            yield self.event(WebSearchCallSearching, item_id=item.id, output_index=index)
        elif isinstance(item, OpenAIResponseOutputMessageFileSearchToolCall):
            assert self._file_search is not None
            item.queries = [query_of(call.arguments, self._file_search.fallback_query)]
            item.status = "searching"
            index = self.index(item)
            yield self.event(FileSearchCallInProgress, item_id=item.id, output_index=index)
            yield self.event(FileSearchCallSearching, item_id=item.id, output_index=index)

    def _tool_ran(self, result: L.ToolResult) -> Iterator[StreamEvent]:
        item = self._items.get(result.call.id)
        if isinstance(item, OpenAIResponseOutputMessageMCPCall):
            yield from self.mcp_call_done(item, result)
        elif isinstance(item, OpenAIResponseOutputMessageWebSearchToolCall):
            index = self.index(item)
            item.status = "failed" if result.is_error else "completed"
            yield self.event(WebSearchCallCompleted, item_id=item.id, output_index=index)
            yield self.done(item)
        elif isinstance(item, OpenAIResponseOutputMessageFileSearchToolCall):
            index = self.index(item)
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
            yield self.event(FileSearchCallCompleted, item_id=item.id, output_index=index)
            yield self.done(item)

    def _add_usage(self, usage: Usage | None) -> None:
        if usage is None:
            return
        if self.usage is not None:
            usage = Usage(
                self.usage.input_tokens + usage.input_tokens,
                self.usage.output_tokens + usage.output_tokens,
            )
        self.usage = usage
        self.response.usage = {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }


def _argument(arguments: str, name: str) -> str | None:
    try:
        value = json.loads(arguments or "{}").get(name)
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None
