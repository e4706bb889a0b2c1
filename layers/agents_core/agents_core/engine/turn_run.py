"""A turn as it runs (`TurnRun`): the agent loop's events as Agents API stream chunks and
steps, each step stored as it completes, the turn's end stored with the lock's release, the
lease renewed meanwhile, and the end announced on the bus."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any

from .. import metrics
from ..api.agents import (
    AgentTurnResponseEvent,
    AgentTurnResponseStepCompletePayload,
    AgentTurnResponseStepStartPayload,
    AgentTurnResponseStreamChunk,
    AgentTurnResponseTurnAwaitingInputPayload,
    AgentTurnResponseTurnCompletePayload,
    AgentTurnResponseTurnStartPayload,
    InferenceStep,
    ShieldCallStep,
    Step,
    ToolExecutionStep,
    Turn,
)
from ..api.common import CompletionMessage, StopReason, ToolCallDelta, ToolResponse
from ..domain import AWAITING_INPUT, COMPLETED, FAILED, SessionLock, TurnState, resume_token_hash
from ..errors import Conflict, RunFailed, UpstreamFailed, status_of
from ..inference.types import ChatToolCall
from ..lifecycle import TurnEventPublisher
from ..log import logger
from . import loop as L
from . import messages as convert
from .shields import BLOCKED_MESSAGE
from .storage import TurnStorage
from .trace import RunTrace, SpanExporter

_TURN_METRIC = {
    AWAITING_INPUT: "TurnsAwaitingInput",
    COMPLETED: "TurnsCompleted",
    FAILED: "TurnsFailed",
}


class TurnRun:
    """One started (or resumed) turn, holding its session until it pauses or ends: the loop's
    events as Agents API stream chunks, and the turn stored as it goes."""

    def __init__(
        self,
        *,
        storage: TurnStorage,
        publisher: TurnEventPublisher | None,
        agent_id: str,
        lock: SessionLock,
        turn: Turn,
        state: TurnState,
        loop: L.AgentLoop,
        prelude: tuple[Step, ...] = (),
        revert_to: tuple[Turn, TurnState] | None = None,
        exporter: SpanExporter | None = None,
    ) -> None:
        self.storage = storage
        self.publisher = publisher
        self.agent_id = agent_id
        self.lock = lock
        self.turn = turn
        self.state = state
        self.loop = loop
        self.stream = loop.stream
        self.prelude = prelude  # steps stored before the loop runs (a resume's tool results)
        #: For a queued resume: the paused turn to go back to if the model fails (SQS retries).
        self.revert_to = revert_to
        self.written_steps = [step.step_id for step in prelude]
        self.exporter = exporter  # where the run's spans go besides the turn (OTLP), if anywhere
        self.trace = RunTrace(
            turn.turn_id,
            loop.request.model,
            earlier=state.trace,
            provider=loop.provider.name,
            attributes={"gen_ai.agent.id": agent_id, "gen_ai.conversation.id": turn.session_id},
        )
        #: The number of the run's first stream event (None: unknown, see TurnState.events).
        self.first_event = state.events
        self._yielded = 0  # events of this run's stream so far
        self._answer: InferenceStep | None = None  # the last reply, stored with the turn's end
        #: A reply that called tools: stored with the pause if one follows at once (its resume
        #: then reads the turn in one request), else as its own item before what follows.
        self._calls: InferenceStep | None = None
        #: Steps the turn's end stores inside its item while that write is under way: a failed
        #: end stores them with the failure instead.
        self._unsaved: tuple[Step, ...] = ()
        #: While the run goes on: the timer of the lease's next renewal, or the renewal itself.
        self._renewal: asyncio.TimerHandle | asyncio.Task | None = None
        self._reverted = False  # back to awaiting input, as before this resume: nothing to tell
        self._resume_token: str | None = None  # issued at a pause, told only to the bus
        #: Issued when the turn was parked for time: its continuation's message carries it.
        self.continuation_token: str | None = None

    async def result(self, observe: Callable[[Any], None] | None = None) -> Turn:
        """Run to the end without streaming: the Turn, or RunFailed (raised once the run has
        finished, its lifecycle event published). `observe` sees each item of the stream (a
        queued resume records them for followers)."""
        final: Turn | None = None
        failed: RunFailed | None = None
        async for item in self.events():
            if observe is not None:
                observe(item)
            if isinstance(item, RunFailed):
                failed = item
                continue
            payload = item.event.payload
            if isinstance(
                payload,
                AgentTurnResponseTurnCompletePayload | AgentTurnResponseTurnAwaitingInputPayload,
            ):
                final = payload.turn
        if failed is not None:
            raise failed
        assert final is not None
        return final

    async def events(self, *, plain_text: bool = False) -> AsyncIterator[Any]:
        """The turn's stream: turn_start, steps, then turn_complete / turn_awaiting_input, or a
        RunFailed as the last item. `plain_text`: the run's most frequent chunks come as what
        they say, what an SSE writer needs (`services.streams.turn_frame`), not validated into
        their models: a text delta as the loop's TextDelta (its step id and text; a fifth of a
        delta's instructions), the turn's start as a TurnStarted, and a model call's step start
        as the loop's ModelCallStarted (about 20 us each with cold caches)."""
        async for item in self._items(plain_text):
            self._yielded += 1
            yield item

    def _events_after_next(self, count: int = 1) -> int | None:
        """The count of the turn's stream events once the next `count` are sent (those a pause
        or a failure ends this run with), as the turn's state keeps it."""
        if self.first_event is None:
            return None
        return self.first_event + self._yielded + count

    async def _items(self, plain_text: bool = False) -> AsyncIterator[Any]:
        if plain_text:
            yield L.TurnStarted(self.turn.turn_id)
        else:
            yield _chunk(AgentTurnResponseTurnStartPayload(turn_id=self.turn.turn_id))
        self._renewal = asyncio.get_running_loop().call_later(self._lease_quarter(), self._renew)
        try:
            for step in self.prelude:
                if isinstance(step, ToolExecutionStep):  # the client's results: its calls' spans
                    _trace_client_calls(self.trace, step)
                yield _step_start(step.step_type, step.step_id)
                yield _step_complete(step)
            async with aclosing(self.loop.run()) as events:
                async for event in events:
                    self.trace.observe(event)
                    if type(event) is L.TextDelta:  # most events: no generator of its own
                        if plain_text:
                            yield event
                        else:
                            yield _progress(event.step_id, {"type": "text", "text": event.text})
                        continue
                    if plain_text and type(event) is L.ModelCallStarted and self._calls is None:
                        yield event
                        continue
                    async for chunk in self._on(event):
                        yield chunk
        except Exception as err:  # storage failed or the turn lost its session
            yield await self._fail(err)
        finally:
            self._renewal.cancel()  # the timer, or the renewal under way
        if self.continuation_token is not None:
            metrics.count("TurnsContinued")
        elif not self._reverted:
            await self._announce()
        await self.trace.export(self.exporter)  # a reverted run never ended: it sends nothing

    async def _on(self, event: L.LoopEvent) -> AsyncIterator[AgentTurnResponseStreamChunk | Any]:
        """The chunks one loop event means for the turn, storing what it completes."""
        if self._calls is not None and type(event) is not L.Paused:
            step, self._calls = self._calls, None
            await self._save_step(step)
            yield _step_complete(step)
        match event:
            case L.ModelCallStarted(step_id=step_id):
                yield _step_start("inference", step_id)
            case L.ToolCallDelta(step_id=step_id, arguments=arguments) if arguments:
                delta = ToolCallDelta(tool_call=arguments, parse_status="in_progress")
                yield _progress(step_id, delta)
            case L.ModelReplied():
                step = _inference_step(self.turn.turn_id, event)
                for call in step.model_response.tool_calls or []:
                    delta = ToolCallDelta(tool_call=call, parse_status="succeeded")
                    yield _progress(step.step_id, delta)
                if step.model_response.tool_calls:
                    self._calls = step
                else:  # the answer: stored with the turn's end
                    self._answer = step
            case L.ShieldChecked():
                if self._answer is not None:  # the answer comes before its check
                    await self._save_step(self._answer)
                    yield _step_complete(self._answer)
                    self._answer = None
                step = ShieldCallStep(
                    turn_id=self.turn.turn_id,
                    step_id=event.step_id,
                    started_at=event.started_at,
                    completed_at=event.completed_at,
                    violation=event.violation,
                )
                yield _step_start(step.step_type, step.step_id)
                await self._save_step(step)
                yield _step_complete(step)
            case L.Finished(reason="blocked", violation=violation):
                message = violation.user_message or BLOCKED_MESSAGE
                output = CompletionMessage(content=message, stop_reason=StopReason.end_of_turn)
                yield await self._complete(output)
            case L.ToolsStarted(step_id=step_id, calls=calls):
                yield _step_start("tool_execution", step_id)
                for call in calls:
                    delta = ToolCallDelta(
                        tool_call=convert.tool_call(call.id, call.name, call.arguments),
                        parse_status="in_progress",
                    )
                    yield _progress(step_id, delta, "tool_execution")
            case L.ToolsRan():
                step = _tool_step(self.turn.turn_id, event)
                await self._save_step(step)
                yield _step_complete(step)
            case L.Paused(calls=calls):
                step, self._calls = self._calls, None
                paused = await self._pause([c.id for c in calls], step)
                if step is not None:
                    yield _step_complete(step)
                yield paused
            case L.Suspended():
                yield await self._park()
            case L.Finished(reason="answered"):
                answer = self._answer
                if answer is None:  # stored already, before its output shields' step
                    yield await self._complete(self._last_reply())
                else:
                    done = await self._complete(answer.model_response, answer)
                    yield _step_complete(answer)
                    yield done
            case L.Finished(reason=limit):  # max_iterations or max_tool_calls
                logger.info(
                    "turn ended by a limit", extra={"turn_id": self.turn.turn_id, "limit": limit}
                )
                yield await self._complete(self._last_output(StopReason.out_of_tokens))
            case L.Failed(error=error):
                yield await self._fail(error)

    def _lease_quarter(self) -> float:
        return self.storage.lease_seconds / 4

    def _renew(self) -> None:
        """A quarter of the lease has passed: renew it, so a turn whose Lambda died frees its
        session within one lease, however long turns may run. Until then a timer waits, not a
        task (most turns end within the first quarter, and a task costs 20-50 us more)."""
        self._renewal = asyncio.get_running_loop().create_task(self._extend_lease())

    async def _extend_lease(self) -> None:
        try:
            if not await self.storage.extend_lease(self.lock):
                return  # the turn lost its session; its end will say so
        except Exception:  # a missed renewal is not fatal: the lease has three more
            logger.warning("could not renew the lease", extra={"turn_id": self.turn.turn_id})
        self._renewal = asyncio.get_running_loop().call_later(self._lease_quarter(), self._renew)

    async def _save_step(self, step: Step) -> None:
        await self.storage.save_step(self.lock, step)
        self.written_steps.append(step.step_id)
        self.turn.steps.append(step)

    async def _end(self, status: str, sent: int = 1, **stored: Any) -> None:
        """Store the turn's end; `sent`: the stream events the run sends after it."""
        self.state.status = status
        self.state.events = self._events_after_next(sent)
        self.state.iterations = self.loop.iterations
        self.state.tool_calls = self.loop.tool_calls
        self.state.trace = self.trace.end("error" if status == FAILED else None)
        self._unsaved = stored.get("steps", ())
        await self.storage.end_turn(self.lock, self.turn, self.state, **stored)
        self._unsaved = ()

    async def _complete(
        self, output: CompletionMessage, last_step: Step | None = None
    ) -> AgentTurnResponseStreamChunk:
        steps = (last_step,) if last_step is not None else ()
        self.turn.steps.extend(steps)
        self.turn.output_message = output
        self.turn.completed_at = L.now()
        self.state.pending_calls = []
        history = [m.to_dict() for m in convert.turn_messages(self.turn)]
        await self._end(COMPLETED, history=history, steps=steps)
        return _chunk(AgentTurnResponseTurnCompletePayload(turn=self.turn))

    async def _pause(
        self, call_ids: list[str], step: InferenceStep | None
    ) -> AgentTurnResponseStreamChunk:
        """Park the turn awaiting the client's calls; `step`, the reply that made them when
        not stored yet, is kept inside the turn's item (its step_complete follows)."""
        steps = (step,) if step is not None else ()
        self.turn.steps.extend(steps)
        reply = self._last_reply()
        pending = [c for c in reply.tool_calls or [] if c.call_id in call_ids]
        self.turn.output_message = reply.model_copy(update={"tool_calls": pending})
        self.state.pending_calls = pending
        # A queued resume must carry this token (the awaiting-input event has it): a queue
        # message then resumes only the pause it was told about, under the tenant that owns it.
        self._resume_token = secrets.token_urlsafe(32)
        self.state.resume_token_hash = resume_token_hash(self._resume_token)
        await self._end(AWAITING_INPUT, sent=1 + len(steps), steps=steps)
        return _chunk(AgentTurnResponseTurnAwaitingInputPayload(turn=self.turn))

    async def _park(self) -> AgentTurnResponseStreamChunk:
        """Out of time in this invocation: the turn awaits no call, only its continuation (a
        resume with no tool responses, carrying `continuation_token`). Nothing is announced:
        the turn is not waiting for anyone."""
        self.turn.output_message = self._last_reply().model_copy(update={"tool_calls": []})
        self.state.pending_calls = []
        self.continuation_token = secrets.token_urlsafe(32)
        self.state.resume_token_hash = resume_token_hash(self.continuation_token)
        await self._end(AWAITING_INPUT)
        return _chunk(AgentTurnResponseTurnAwaitingInputPayload(turn=self.turn))

    async def _fail(self, err: Exception) -> RunFailed:
        """End the turn as failed, and say why; a turn that lost its session writes nothing. A
        queued resume whose model failed is retried instead: parked where it stopped when it
        had stored steps of its own (a retry must not run their tools again), else back to
        awaiting input as before it, for SQS to redeliver the message."""
        status, message = status_of(err), _reason(err)
        turn_id = self.turn.turn_id
        if isinstance(err, Conflict):  # ran past its lease: another turn has the session now
            logger.warning("turn lost its session", extra={"turn_id": turn_id})
            self.state.status, self.state.error = FAILED, message
            return RunFailed(status, message, turn_id=turn_id)
        if isinstance(err, UpstreamFailed) and self.revert_to is not None:
            if len(self.written_steps) > len(self.prelude):
                await self._park()
                return RunFailed(status, message, retry=True, turn_id=turn_id)
            paused_turn, paused_state = self.revert_to
            paused_state.events = self._events_after_next()  # this run's events were sent
            await self.storage.revert(self.lock, paused_turn, paused_state, self.written_steps)
            self.turn, self.state, self._reverted = paused_turn, paused_state, True
            return RunFailed(status, message, retry=True, turn_id=turn_id)
        if status >= 500 and not isinstance(err, UpstreamFailed):
            log = logger.warning if status == 503 else logger.exception
            log("turn failed", extra={"turn_id": turn_id, "error": type(err).__name__})
        self.state.error = message
        self.turn.completed_at = L.now()
        try:
            await self._end(FAILED, steps=self._unsaved)
        except Exception:  # the lease expires on its own; the client still learns why
            logger.exception("could not record failed turn", extra={"turn_id": turn_id})
        return RunFailed(status, message, turn_id=turn_id)

    async def _announce(self) -> None:
        """Count the turn's new state (paused, completed, failed) and publish it on the bus."""
        status = self.state.status
        metrics.count(_TURN_METRIC[status])
        if self.publisher is None:
            return
        detail: dict[str, Any] = {
            "tenant": self.lock.tenant,
            "agent_id": self.agent_id,
            "session_id": self.turn.session_id,
            "turn_id": self.turn.turn_id,
            "status": status,
        }
        if status == AWAITING_INPUT:
            detail["pending_tool_calls"] = [
                c.model_dump(mode="json") for c in self.state.pending_calls
            ]
            detail["resume_token"] = self._resume_token
        elif status == COMPLETED:
            detail["output_message"] = self.turn.output_message.model_dump(mode="json")
        else:
            detail["error"] = self.state.error
        await self.publisher.publish(status, detail)

    def _last_reply(self) -> CompletionMessage:
        for step in reversed(self.turn.steps):
            if isinstance(step, InferenceStep):
                return step.model_response
        return CompletionMessage(content="", stop_reason=StopReason.end_of_message)

    def _last_output(self, stop: StopReason) -> CompletionMessage:
        return self._last_reply().model_copy(update={"stop_reason": stop})


def _inference_step(turn_id: str, reply: L.ModelReplied) -> InferenceStep:
    calls = [convert.tool_call(c.id, c.name, c.arguments) for c in reply.tool_calls]
    if reply.finish == "length":
        stop = StopReason.out_of_tokens
    elif calls:
        stop = StopReason.end_of_message
    else:
        stop = StopReason.end_of_turn
    return InferenceStep(
        turn_id=turn_id,
        step_id=reply.step_id,
        started_at=reply.started_at,
        completed_at=reply.completed_at,
        model_response=CompletionMessage(content=reply.text, stop_reason=stop, tool_calls=calls),
    )


def _tool_step(turn_id: str, ran: L.ToolsRan) -> ToolExecutionStep:
    return ToolExecutionStep(
        turn_id=turn_id,
        step_id=ran.step_id,
        started_at=ran.started_at,
        completed_at=ran.completed_at,
        tool_calls=[
            convert.tool_call(r.call.id, r.call.name, r.call.arguments) for r in ran.results
        ],
        tool_responses=[
            ToolResponse(
                call_id=r.call.id,
                tool_name=r.call.name,
                content=r.content,
                metadata={"error": True} if r.is_error else None,
            )
            for r in ran.results
        ],
    )


def _trace_client_calls(trace: RunTrace, step: ToolExecutionStep) -> None:
    results = {r.call_id: r for r in step.tool_responses}
    started = step.started_at or step.completed_at or L.now()
    completed = step.completed_at or started
    for call in step.tool_calls:
        arguments = call.arguments_json or json.dumps(call.model_dump(mode="json")["arguments"])
        chat_call = ChatToolCall(call.call_id, str(call.tool_name), arguments)
        answer = results.get(call.call_id)
        content = answer.model_dump(mode="json")["content"] if answer is not None else ""
        text = content if isinstance(content, str) else json.dumps(content)
        result = L.ToolResult(chat_call, text)
        trace.tool(chat_call, started, completed, result)


def _reason(err: Exception) -> str:
    """What a failed turn says about its cause: the message of an error raised on purpose; for
    AWS unavailable or a bug, no more than what kind it was."""
    status = status_of(err)
    if status == 500:
        return f"internal error: {type(err).__name__}"
    if status == 503:
        return f"storage unavailable: {err}"
    return str(err)


def _chunk(payload: Any) -> AgentTurnResponseStreamChunk:
    return AgentTurnResponseStreamChunk(event=AgentTurnResponseEvent(payload=payload))


def _step_start(step_type: str, step_id: str) -> AgentTurnResponseStreamChunk:
    return _chunk(AgentTurnResponseStepStartPayload(step_type=step_type, step_id=step_id))


def _progress(
    step_id: str, delta: Any, step_type: str = "inference"
) -> AgentTurnResponseStreamChunk:
    """A delta's chunk (`delta`: a model, or a delta's fields), validated in one call: a long
    answer makes one for every delta, and building its four models one by one cost half as
    much again."""
    payload = {
        "event_type": "step_progress",
        "step_type": step_type,
        "step_id": step_id,
        "delta": delta,
    }
    # The validator itself: model_validate's keyword handling cost an eighth as much again.
    validator = AgentTurnResponseStreamChunk.__pydantic_validator__
    return validator.validate_python({"event": {"payload": payload}})


def _step_complete(step: Step) -> AgentTurnResponseStreamChunk:
    return _chunk(
        AgentTurnResponseStepCompletePayload(
            step_type=step.step_type, step_id=step.step_id, step_details=step
        )
    )
