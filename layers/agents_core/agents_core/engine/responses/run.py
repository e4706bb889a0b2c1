"""Run control: one response from its first event to its end, in the caller's request or as a
background run (checkpoints at each step boundary, cancel, suspension for another invocation),
stored when it ends and announced on the bus."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Any, Protocol

from ... import metrics
from ...api.conversations import as_conversation_item
from ...api.responses import (
    OpenAIResponseCompactionItem,
    OpenAIResponseError,
    OpenAIResponseMessage,
    OpenAIResponseObject,
    OpenAIResponseObjectWithInput,
    OpenAIResponseOutputMessageContentOutputText,
    ResponseCancelled,
    ResponseCompleted,
    ResponseCreated,
    ResponseFailed,
    ResponseIncomplete,
    ResponseInProgress,
    StreamEvent,
)
from ...domain import ConversationAppend
from ...errors import RunFailed, UpstreamFailed, UpstreamTimeout, status_of
from ...ids import item_id
from ...inference.types import ChatMessage
from ...lifecycle import RESPONSE_DETAIL_TYPES, TurnEventPublisher
from ...log import logger
from ...seal import Sealer
from .. import loop as L
from ..file_search import FileSearchTool
from ..server_tools import ToolRuntime
from ..storage import ResponseStorage
from ..trace import RunTrace, SpanExporter
from .mcp import answer_approval, list_tools
from .output import OutputWriter, PlainTextDelta
from .tools import Approval, McpServer, ServerCall


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
        trace: list[dict[str, Any]] | None = None,
    ) -> None:
        """Store the ended response as `ResponseStorage.save` does, and end the run; RunLost
        when another invocation owns it."""
        ...


class ResponseRun:
    """One response being generated: the loop's events as output items and stream events (its
    OutputWriter); stored (unless `store` is false) when it ends.

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
        mcp: list[McpServer] | None = None,
        approvals: list[Approval] | None = None,
        server_calls: dict[str, ServerCall] | None = None,
        publisher: TurnEventPublisher | None = None,
        conversation: ConversationAppend | None = None,
        control: RunControl | None = None,
        guardrails: list[str] | None = None,
        include: list[str] | None = None,
        namespaced: dict[str, tuple[str, str]] | None = None,
        base: int | None = None,
        input_checked: bool = False,
        resumed: bool = False,
        sealer: Sealer | None = None,
        compaction: OpenAIResponseCompactionItem | None = None,
        trace: list[dict[str, Any]] | None = None,
        exporter: SpanExporter | None = None,
    ) -> None:
        self.storage = storage
        self.control = control  # a background run's worker; None: runs in the caller's request
        self.guardrails = guardrails or []  # kept for a continuation's shields
        self.resumed = resumed  # continued from a stored state: created/in_progress were sent
        self.suspended = False  # stopped for another invocation to continue
        self.conversation = conversation  # where its items go when it ends, read at a version
        self.tenant = tenant
        self.response = response
        self.context = context  # the conversation up to and including this response's input
        self.loop = loop
        self.stream = loop.stream  # the caller reads events as they come, not only the end
        self.store = store
        self.tools = tools
        self.publisher = publisher  # the response's end goes to the bus, when there is one
        self.mcp = mcp or []  # listed before the first model call
        self.approvals = approvals or []  # run (or declined) before the first model call
        self.compaction = compaction  # the context compacted for this response: its first item
        found = loop.tools.server.get("file_search")
        self._file_search = found if isinstance(found, FileSearchTool) else None
        self.output = OutputWriter(
            response,
            loop.request.messages,
            server_calls or {},
            include or [],
            self._file_search,
            namespaced,
            seal_reasoning=(
                (lambda text: sealer.seal(tenant, "reasoning", {"text": text}))
                if sealer is not None and "reasoning.encrypted_content" in (include or [])
                else None
            ),
        )
        self._base = len(loop.request.messages) if base is None else base  # the loop adds after
        self._input_checked = input_checked  # the input shields ran (not rerun on continuing)
        self._failure: RunFailed | None = None
        #: The run's spans; `trace`: those of the invocations before this one (a background run).
        self.trace = RunTrace(
            response.id,
            loop.request.model,
            kind_of=self._span_kind,
            earlier=trace,
            provider=loop.provider.name,
        )
        #: Where the run's spans go besides the response (OTLP), if anywhere.
        self.exporter = exporter
        self._end_with: Callable[[StreamEvent], Awaitable[Any]] | None = None  # see events()

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

    async def events(
        self,
        *,
        plain_text: bool = False,
        end_with: Callable[[StreamEvent], Awaitable[Any]] | None = None,
    ) -> AsyncIterator[StreamEvent | PlainTextDelta]:
        """The response's stream events. `plain_text`: a text delta comes as a PlainTextDelta,
        what an SSE writer needs, not a validated OutputTextDelta (`OutputWriter`). `end_with`:
        asked, for the end event about to be stored, for a write to make with the response's
        end (its recorded stream's last, `StreamRecorder.end_with`; None for none); the event
        yielded is that one unless the end came out otherwise (not stored: failed)."""
        self.output.plain_text = plain_text
        self._end_with = end_with if self.control is None else None
        if self.store and self.control is None:  # readable while it runs
            await self._begin()
        if not self.resumed:
            snapshot = self.output.public()
            yield self.output.event(ResponseCreated, response=snapshot)
            yield self.output.event(ResponseInProgress, response=snapshot)
        try:
            try:
                if self.control is not None and await self.control.cancelled():
                    raise RunCancelled
                async for out in self._steps():
                    yield out
                    if self.control is not None and await self.control.cancelled():
                        raise RunCancelled
            except RunCancelled:
                for out in self.output.cut_short():
                    yield out
                yield await self._end("cancelled")
            except RunLost:
                raise
            except Exception as err:
                for out in self.output.cut_short():
                    yield out
                yield await self._fail(err)
        except RunLost:
            logger.warning("run carried on elsewhere", extra={"response_id": self.response.id})
            return
        if not self.suspended:
            await self._announce()
        await self.trace.export(self.exporter)

    async def _steps(self) -> AsyncIterator[StreamEvent]:
        """The run's events up to its end; a state stored after each step it completes."""
        if self.compaction is not None:
            yield self.output.add(self.compaction)
            yield self.output.done(self.compaction)
            self.compaction = None
        while self.mcp:
            assert self.tools is not None
            async for out in list_tools(
                self.output, self.tools, self.mcp[0], self.loop, self.trace
            ):
                yield out
            self.mcp.pop(0)
            await self._checkpoint()
        while self.approvals:
            async for out in answer_approval(
                self.output, self.tools, self.approvals[0], self.trace
            ):
                yield out
            self.approvals.pop(0)
            await self._checkpoint()
        async with aclosing(self.loop.run()) as events:
            async for event in events:
                self.trace.observe(event)
                if isinstance(event, L.ShieldChecked) and event.source == "input":
                    self._input_checked = True
                for out in self.output.on(event):
                    yield out
                if isinstance(event, L.ModelReplied | L.ToolFinished):
                    await self._checkpoint()
                elif isinstance(event, L.Suspended):
                    self.trace.end()
                    await self._checkpoint()
                    self.suspended = True
                    return
                elif isinstance(event, L.Paused | L.Finished):
                    yield await self._finish(event)
                elif isinstance(event, L.Failed):
                    for out in self.output.cut_short():
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
            **self.output.state(),
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
            "include": self.output.include,
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
            "trace": self.trace.so_far(),
            "conversation": (
                [self.conversation.conversation_id, self.conversation.version]
                if self.conversation
                else None
            ),
        }

    def _span_kind(self, name: str) -> str | None:
        call = self.output.kinds.get(name)
        return _SPAN_KINDS.get(call.kind) if call is not None else None

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

    async def _finish(self, event: L.Paused | L.Finished) -> StreamEvent:
        if isinstance(event, L.Finished) and event.reason == "blocked":
            return await self._end("completed")  # with its refusal, as OpenAI's API answers
        if isinstance(event, L.Finished) and event.reason != "answered":  # a limit ended it
            self.response.incomplete_details = {"reason": event.reason}
            return await self._end("incomplete")
        if self.output.last_finish == "length":
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
        trace = self.trace.end("error" if status == "failed" else None)  # exported if not stored
        kind = _END_EVENTS.get(status, ResponseFailed)
        end = self.output.event(kind, response=self.output.public())
        if self.store or self.control is not None:  # a background response is kept to be polled
            stream_end = await self._end_with(end) if self._end_with is not None else None
            try:
                await self._save(trace, stream_end)
            except RunLost:
                raise
            except Exception as err:
                if status_of(err) not in (409, 404, 413, 503):
                    self.output.withdraw(end)
                    raise
                await self._not_saved(err)
        if self.response.status != status or self.response.error is not error:
            # not stored (failed, saying why), or a cancel won the race to the end
            kind = _END_EVENTS.get(self.response.status, ResponseFailed)
            end = kind(sequence_number=end.sequence_number, response=self.output.public())
        metrics.count(f"Responses{self.response.status.capitalize()}")
        return end

    async def _save(self, trace: list[dict[str, Any]], stream_end: Any) -> None:
        if self.control is not None:
            await self.control.save(self.response, self._conversation(), self._appended(), trace)
        else:
            await self.storage.save(
                self.tenant,
                self.response,
                self._conversation(),
                self._appended(),
                trace,
                stream_end=stream_end,
            )

    async def _not_saved(self, err: Exception) -> None:
        """The response could not be stored: it ends failed, saying why."""
        logger.warning("response not stored", extra={"response_id": self.response.id})
        error = _not_stored(err)
        self._failure = RunFailed(status_of(err), error.message, response_id=self.response.id)
        self.response.status = "failed"
        self.response.error = error
        self.response.completed_at = None
        if self.control is None:
            await self._abandon(error)

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
        items = [
            as_conversation_item(i, item_id) for i in self.response.input + self.response.output
        ]
        return ConversationAppend(
            self.conversation.conversation_id, self.conversation.version, items
        )


#: The event that ends a response, by its status (any other: ResponseFailed).
_END_EVENTS: dict[str, type[StreamEvent]] = {
    "completed": ResponseCompleted,
    "incomplete": ResponseIncomplete,
    "cancelled": ResponseCancelled,
}

#: A server tool's span kind, by what its calls are in the output.
_SPAN_KINDS = {
    "mcp": "mcp_call",
    "approval": "mcp_call",
    "web_search": "web_search_call",
    "file_search": "file_search_call",
}


def _not_stored(err: Exception) -> OpenAIResponseError:
    """Why a finished response could not be stored: storage unavailable, or (a response in a
    conversation) the conversation changed meanwhile, is gone, or takes no more items at once."""
    status = status_of(err)
    if status == 503:
        message = "Storage is unavailable for a moment; the response was not stored"
        return OpenAIResponseError(code="server_error", message=message)
    code = {409: "conversation_conflict", 404: "conversation_not_found"}.get(status, "too_large")
    return OpenAIResponseError(code=code, message=f"{err}; the response was not stored")
