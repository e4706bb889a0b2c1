"""The Responses API face of the agent loop: output items and OpenAI's stream events, in the
order the official SDK accumulates them.

A response's conversation is its previous response's conversation, then its input, then its
output (as chat messages, stored as the response's CONTEXT). `instructions` apply to this
response only, as in OpenAI's API. Function tools end the response with `function_call` items;
the client answers with `function_call_output` items on a new response chained to this one.

    run = await engine.start(tenant, request)        # 400 / 404 before anything runs
    async for event in run.events(): ...             # or: response = await run.result()
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from typing import Any

from .. import metrics
from ..api.common import JsonSchemaResponseFormat
from ..api.responses import (
    ContentPartAdded,
    ContentPartDone,
    CreateOpenaiResponseRequest,
    FunctionCallArgumentsDelta,
    FunctionCallArgumentsDone,
    OpenAIResponseError,
    OpenAIResponseInputFunctionToolCallOutput,
    OpenAIResponseInputMessageContentImage,
    OpenAIResponseInputMessageContentText,
    OpenAIResponseInputToolFunction,
    OpenAIResponseMessage,
    OpenAIResponseObject,
    OpenAIResponseObjectWithInput,
    OpenAIResponseOutputMessageContentOutputText,
    OpenAIResponseOutputMessageFunctionToolCall,
    OpenAIResponseText,
    OpenAIResponseTextFormat,
    OutputItemAdded,
    OutputItemDone,
    OutputTextDelta,
    OutputTextDone,
    ResponseCompleted,
    ResponseCreated,
    ResponseFailed,
    ResponseIncomplete,
    ResponseInProgress,
    StreamEvent,
)
from ..errors import InvalidRequest, RunFailed, UpstreamFailed, UpstreamTimeout, status_of
from ..ids import new_id
from ..inference.router import ModelRouter
from ..inference.types import ChatMessage, ChatRequest, ChatToolCall, ToolSpec, Usage
from ..log import logger
from . import loop as L
from .storage import ResponseStorage


def _id(prefix: str) -> str:
    return f"{prefix}_{new_id().replace('-', '')}"


class ResponseRun:
    """One response being generated: the loop's events as output items and stream events;
    stored (unless `store` is false) when it ends."""

    def __init__(
        self,
        *,
        storage: ResponseStorage,
        tenant: str,
        response: OpenAIResponseObjectWithInput,
        context: list[ChatMessage],
        loop: L.AgentLoop,
        store: bool,
    ) -> None:
        self.storage = storage
        self.tenant = tenant
        self.response = response
        self.context = context  # the conversation up to and including this response's input
        self.loop = loop
        self.store = store
        self.stream = loop.stream
        self._base = len(loop.request.messages)  # what the loop adds comes after
        self._sequence = 0
        self._failure: RunFailed | None = None
        self._usage: Usage | None = None
        self._last_finish = "stop"
        self._text: OpenAIResponseMessage | None = None  # the message item being written
        self._call: OpenAIResponseOutputMessageFunctionToolCall | None = None  # likewise
        self._calls: dict[int, OpenAIResponseOutputMessageFunctionToolCall] = {}  # this reply's

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
        snapshot = self._public()
        yield self._event(ResponseCreated, response=snapshot)
        yield self._event(ResponseInProgress, response=snapshot)
        try:
            async with aclosing(self.loop.run()) as events:
                async for event in events:
                    for out in self._on(event):
                        yield out
                    if isinstance(event, L.Paused | L.Finished):
                        yield await self._finish(event)
                    elif isinstance(event, L.Failed):
                        yield await self._fail(event.error)
        except Exception as err:
            yield await self._fail(err)

    def _on(self, event: L.LoopEvent) -> Iterator[StreamEvent]:
        """The stream events one loop event means: items opened, written and closed."""
        match event:
            case L.ModelCallStarted():
                self._calls = {}
            case L.TextDelta(text=text):
                if self._text is None:
                    yield from self._open_text()
                yield self._event(
                    OutputTextDelta,
                    item_id=self._text.id,
                    output_index=self._index(self._text),
                    content_index=0,
                    delta=text,
                )
                self._text.content[0].text += text
            case L.ToolCallDelta(index=index, call_id=call_id, name=name, arguments=arguments):
                yield from self._close_text()
                if index not in self._calls:
                    yield from self._close_call()
                    yield from self._open_call(index, call_id, name)
                call = self._calls[index]
                if arguments:
                    call.arguments += arguments
                    yield self._event(
                        FunctionCallArgumentsDelta,
                        item_id=call.id,
                        output_index=self._index(call),
                        delta=arguments,
                    )
            case L.ModelReplied(finish=finish, usage=usage):
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
        self._text = item
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

    def _close_text(self) -> Iterator[StreamEvent]:
        item, self._text = self._text, None
        if item is None:
            return
        index = self._index(item)
        part = item.content[0]
        item.status = "completed"
        yield self._event(
            OutputTextDone, item_id=item.id, output_index=index, content_index=0, text=part.text
        )
        yield self._event(
            ContentPartDone, item_id=item.id, output_index=index, content_index=0, part=part
        )
        yield self._event(OutputItemDone, item=item, output_index=index)

    def _open_call(self, index: int, call_id: str, name: str) -> Iterator[StreamEvent]:
        call = OpenAIResponseOutputMessageFunctionToolCall(
            id=_id("fc"), call_id=call_id, name=name, arguments="", status="in_progress"
        )
        self._calls[index] = self._call = call
        self.response.output.append(call)
        announced = call.model_copy()  # the event is sent later than the call grows
        yield self._event(OutputItemAdded, item=announced, output_index=self._index(call))

    def _close_call(self) -> Iterator[StreamEvent]:
        call, self._call = self._call, None
        if call is None:
            return
        index = self._index(call)
        call.status = "completed"
        yield self._event(
            FunctionCallArgumentsDone, item_id=call.id, output_index=index, arguments=call.arguments
        )
        yield self._event(OutputItemDone, item=call, output_index=index)

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
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }

    async def _finish(self, event: L.Paused | L.Finished) -> StreamEvent:
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
        if self.store:
            try:
                await self.storage.save(self.tenant, self.response, self._conversation())
            except Exception as err:
                if status_of(err) != 503:
                    raise
                logger.warning("response not stored", extra={"response_id": self.response.id})
                message = "Storage is unavailable for a moment; the response was not stored"
                self._failure = RunFailed(503, message, response_id=self.response.id)
                self.response.status = status = "failed"
                self.response.error = OpenAIResponseError(code="server_error", message=message)
        kind = {"completed": ResponseCompleted, "incomplete": ResponseIncomplete}.get(
            status, ResponseFailed
        )
        metrics.count(f"Responses{status.capitalize()}")
        return self._event(kind, response=self._public())

    def _conversation(self) -> list[dict[str, Any]]:
        """The stored CONTEXT: the conversation through this response's input, then what the
        loop added (replies and tool results); nothing of a failed response's output."""
        added = [] if self.response.status == "failed" else self.loop.request.messages[self._base :]
        kept = [m for m in added if m.role != "assistant" or m.content or m.tool_calls]
        return [m.to_dict() for m in self.context + kept]

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
        self, storage: ResponseStorage, models: ModelRouter, limits: L.Limits = L.Limits()
    ) -> None:
        self.storage = storage
        self.models = models
        self.limits = limits

    async def start(self, tenant: str, body: CreateOpenaiResponseRequest) -> ResponseRun:
        tools = _function_tools(body)
        previous: list[ChatMessage] = []
        if body.previous_response_id:
            stored = await self.storage.context(tenant, body.previous_response_id)
            previous = [ChatMessage.from_dict(m) for m in stored]
        items = _input_items(body.input)
        current = previous + _input_messages(items)
        system = [ChatMessage("system", body.instructions)] if body.instructions else []
        provider, model_id = self.models.resolve(body.model)
        text = body.text or OpenAIResponseText(format=OpenAIResponseTextFormat(type="text"))
        request = ChatRequest(
            model=model_id,
            messages=system + current,
            tools=tools,
            response_format=_response_format(text),
            temperature=body.temperature,
        )
        provider.check(request)  # 400 before anything runs
        response = OpenAIResponseObjectWithInput(
            id=_id("resp"),
            created_at=int(time.time()),
            model=body.model,
            output=[],
            status="in_progress",
            previous_response_id=body.previous_response_id,
            temperature=body.temperature,
            text=text,
            instructions=body.instructions,
            input=items,
        )
        loop = L.AgentLoop(
            provider,
            request,
            L.Tools(client=None),
            max_iterations=body.max_infer_iters or 10,
            limits=self.limits,
            stream=bool(body.stream),
            new_call_id=lambda: _id("call"),
        )
        return ResponseRun(
            storage=self.storage,
            tenant=tenant,
            response=response,
            context=current,
            loop=loop,
            store=body.store is not False,
        )


def _function_tools(body: CreateOpenaiResponseRequest) -> list[ToolSpec]:
    specs = []
    for tool in body.tools or []:
        if not isinstance(tool, OpenAIResponseInputToolFunction):
            raise InvalidRequest(
                f"tool type '{tool.type}' is not available on this deployment; use function tools"
            )
        parameters = tool.parameters or {"type": "object", "properties": {}}
        specs.append(ToolSpec(tool.name, tool.description or "", parameters))
    return specs


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
    return "".join(
        part.text
        for part in content
        if not isinstance(part, OpenAIResponseInputMessageContentImage)
    )


def _content_images(content: Any) -> list[str]:
    if isinstance(content, str):
        return []
    return [
        part.image_url
        for part in content
        if isinstance(part, OpenAIResponseInputMessageContentImage) and part.image_url
    ]


def _input_messages(items: list[Any]) -> list[ChatMessage]:
    messages: list[ChatMessage] = []
    for item in items:
        if isinstance(item, OpenAIResponseMessage):
            role = {"developer": "system"}.get(item.role, item.role)
            text, images = _content_text(item.content), _content_images(item.content)
            messages.append(ChatMessage(role, text, images=images))
        elif isinstance(item, OpenAIResponseOutputMessageFunctionToolCall):
            call = ChatToolCall(item.call_id, item.name, item.arguments)
            if messages and messages[-1].role == "assistant":
                messages[-1].tool_calls.append(call)
            else:
                messages.append(ChatMessage("assistant", "", tool_calls=[call]))
        elif isinstance(item, OpenAIResponseInputFunctionToolCallOutput):
            messages.append(ChatMessage("tool", item.output, tool_call_id=item.call_id))
    return messages
