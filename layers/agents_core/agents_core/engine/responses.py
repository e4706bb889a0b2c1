"""The Responses API on the shared providers: one model call per response, streamed as OpenAI's
events in the order the official SDK accumulates them.

A response's conversation is its previous response's conversation, then its input, then its
output (as chat messages, stored as the response's CONTEXT). `instructions` apply to this
response only, as in OpenAI's API. Function tools end the response with `function_call` items;
the client answers with `function_call_output` items on a new response chained to this one.

    run = await engine.start(tenant, request)        # 400 / 404 before anything runs
    async for event in run.events(): ...             # or: response = await run.result()
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from .. import aws, metrics
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
from ..ids import new_id
from ..inference.router import ModelRouter
from ..inference.types import (
    ChatMessage,
    ChatRequest,
    ChatToolCall,
    Finish,
    Provider,
    ProviderError,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    model_events,
)
from ..store.responses import ResponseStore
from ..web.log import logger
from .errors import InvalidRequest


def _id(prefix: str) -> str:
    return f"{prefix}_{new_id().replace('-', '')}"


@dataclass
class ResponseFailedError(Exception):
    """How a failed response ended, for a non-streaming caller (HTTP status and reason)."""

    status: int
    message: str
    response_id: str


@dataclass
class ResponseRun:
    """One response being generated; stored (unless `store` is false) when it ends."""

    engine: ResponsesEngine
    tenant: str
    response: OpenAIResponseObjectWithInput
    provider: Provider
    request: ChatRequest
    context: list[ChatMessage]  # the conversation up to and including this response's input
    store: bool
    stream: bool
    _sequence: int = 0
    _output_messages: list[ChatMessage] = field(default_factory=list)
    _failure_status: int = 502  # the HTTP status a failed response means (non-streaming)

    async def result(self) -> OpenAIResponseObject:
        final: StreamEvent | None = None
        async for event in self.events():
            final = event
        assert final is not None
        if isinstance(final, ResponseFailed):
            error = final.response.error
            raise ResponseFailedError(
                self._failure_status, error.message if error else "failed", final.response.id
            )
        return final.response  # completed or incomplete

    async def events(self) -> AsyncIterator[StreamEvent]:
        snapshot = self._public()
        yield self._event(ResponseCreated, response=snapshot)
        yield self._event(ResponseInProgress, response=snapshot)
        output = self.response.output
        text_item: OpenAIResponseMessage | None = None
        text: list[str] = []
        calls: dict[int, OpenAIResponseOutputMessageFunctionToolCall] = {}
        open_call: int | None = None
        finish = Finish("stop")
        try:
            async for event in model_events(self.provider, self.request, self.stream):
                if isinstance(event, TextDelta):
                    if text_item is None:
                        text_item = OpenAIResponseMessage(
                            id=_id("msg"), role="assistant", status="in_progress", content=[]
                        )
                        output.append(text_item)
                        yield self._event(
                            OutputItemAdded, item=text_item, output_index=len(output) - 1
                        )
                        yield self._event(
                            ContentPartAdded,
                            item_id=text_item.id,
                            output_index=len(output) - 1,
                            content_index=0,
                            part=OpenAIResponseOutputMessageContentOutputText(text=""),
                        )
                    text.append(event.text)
                    yield self._event(
                        OutputTextDelta,
                        item_id=text_item.id,
                        output_index=output.index(text_item),
                        content_index=0,
                        delta=event.text,
                    )
                elif isinstance(event, ToolCallDelta):
                    if text_item is not None and text_item.status == "in_progress":
                        for done in self._close_text(text_item, "".join(text)):
                            yield done
                    if event.index not in calls:
                        if open_call is not None:
                            for done in self._close_call(calls[open_call]):
                                yield done
                        call = OpenAIResponseOutputMessageFunctionToolCall(
                            id=_id("fc"),
                            call_id=event.id or _id("call"),
                            name=event.name or "",
                            arguments="",
                            status="in_progress",
                        )
                        calls[event.index] = call
                        output.append(call)
                        open_call = event.index
                        yield self._event(OutputItemAdded, item=call, output_index=len(output) - 1)
                    call = calls[event.index]
                    if event.arguments:
                        call.arguments += event.arguments
                        yield self._event(
                            FunctionCallArgumentsDelta,
                            item_id=call.id,
                            output_index=output.index(call),
                            delta=event.arguments,
                        )
                elif isinstance(event, Finish):
                    finish = event
            if text_item is not None and text_item.status == "in_progress":
                for done in self._close_text(text_item, "".join(text)):
                    yield done
            if open_call is not None:
                for done in self._close_call(calls[open_call]):
                    yield done
        except ProviderError as err:
            self._failure_status = err.status
            code = "model_timeout" if err.status == 504 else "model_error"
            yield await self._finish(
                "failed", error=OpenAIResponseError(code=code, message=str(err))
            )
            return
        except Exception as err:
            logger.exception("response failed", extra={"response_id": self.response.id})
            self._failure_status = 503 if aws.unavailable(err) else 500
            error = OpenAIResponseError(code="server_error", message=type(err).__name__)
            yield await self._finish("failed", error=error)
            return
        if finish.usage is not None:
            self.response.usage = {
                "input_tokens": finish.usage.input_tokens,
                "output_tokens": finish.usage.output_tokens,
                "total_tokens": finish.usage.input_tokens + finish.usage.output_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            }
        self._output_messages = _output_messages(output)
        if finish.reason == "length":
            self.response.incomplete_details = {"reason": "max_output_tokens"}
            yield await self._finish("incomplete")
        else:
            yield await self._finish("completed")

    def _close_text(self, item: OpenAIResponseMessage, text: str) -> list[StreamEvent]:
        index = self.response.output.index(item)
        part = OpenAIResponseOutputMessageContentOutputText(text=text)
        item.content = [part]
        item.status = "completed"
        return [
            self._event(
                OutputTextDone, item_id=item.id, output_index=index, content_index=0, text=text
            ),
            self._event(
                ContentPartDone, item_id=item.id, output_index=index, content_index=0, part=part
            ),
            self._event(OutputItemDone, item=item, output_index=index),
        ]

    def _close_call(self, call: OpenAIResponseOutputMessageFunctionToolCall) -> list[StreamEvent]:
        index = self.response.output.index(call)
        call.status = "completed"
        return [
            self._event(
                FunctionCallArgumentsDone,
                item_id=call.id,
                output_index=index,
                arguments=call.arguments,
            ),
            self._event(OutputItemDone, item=call, output_index=index),
        ]

    async def _finish(self, status: str, error: OpenAIResponseError | None = None) -> StreamEvent:
        self.response.status = status
        self.response.error = error
        if self.store:
            context = [m.to_dict() for m in self.context + self._output_messages]
            try:
                await asyncio.to_thread(self.engine.store.save, self.tenant, self.response, context)
            except Exception as err:
                if not aws.unavailable(err):
                    raise
                logger.warning("response not stored", extra={"response_id": self.response.id})
                self._failure_status = 503
                self.response.status = status = "failed"
                self.response.error = OpenAIResponseError(
                    code="server_error",
                    message="Storage is unavailable for a moment; the response was not stored",
                )
        kind = {"completed": ResponseCompleted, "incomplete": ResponseIncomplete}.get(
            status, ResponseFailed
        )
        metrics.count(f"Responses{status.capitalize()}")
        return self._event(kind, response=self._public())

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
    def __init__(self, store: ResponseStore, models: ModelRouter) -> None:
        self.store = store
        self.models = models

    async def start(self, tenant: str, body: CreateOpenaiResponseRequest) -> ResponseRun:
        tools = _function_tools(body)
        previous: list[ChatMessage] = []
        if body.previous_response_id:
            stored = await asyncio.to_thread(self.store.context, tenant, body.previous_response_id)
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
        provider.check(request)  # UnsupportedRequest: 400 before anything runs
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
        return ResponseRun(
            engine=self,
            tenant=tenant,
            response=response,
            provider=provider,
            request=request,
            context=current,
            store=body.store is not False,
            stream=bool(body.stream),
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


def _output_messages(output: list[Any]) -> list[ChatMessage]:
    message = ChatMessage("assistant", "")
    for item in output:
        if isinstance(item, OpenAIResponseMessage):
            message.content += _content_text(item.content)
        elif isinstance(item, OpenAIResponseOutputMessageFunctionToolCall):
            message.tool_calls.append(ChatToolCall(item.call_id, item.name, item.arguments))
    return [message] if message.content or message.tool_calls else []
