"""The turn engine: inference and tool steps in a loop until the model answers or must wait.

A turn runs while it holds its session's lock (`store.turns`). Each model call is an inference
step; tool calls to the agent's client tools pause the turn (`turn_awaiting_input`) until the
client resumes it with their results, which become a tool-execution step before the loop goes
on. Calls to tools nobody serves are answered with an error result so the model can recover.
Every step is stored as it completes; the turn's end (paused, completed, failed) is written
together with the lock's release. A provider error ends the turn as failed, never
half-written.

    run = await engine.start_turn(tenant, agent_id, session_id, request)  # 404/409/400 here
    async for chunk in run.events(): ...  # or: turn = await run.result()
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .. import aws, metrics
from ..api.agents import (
    AgentConfig,
    AgentTurnResponseEvent,
    AgentTurnResponseStepCompletePayload,
    AgentTurnResponseStepProgressPayload,
    AgentTurnResponseStepStartPayload,
    AgentTurnResponseStreamChunk,
    AgentTurnResponseTurnAwaitingInputPayload,
    AgentTurnResponseTurnCompletePayload,
    AgentTurnResponseTurnStartPayload,
    CreateAgentTurnRequest,
    InferenceStep,
    Step,
    ToolExecutionStep,
    Turn,
)
from ..api.common import (
    CompletionMessage,
    StopReason,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolConfig,
    ToolResponse,
)
from ..ids import new_id
from ..inference.router import ModelRouter
from ..inference.types import (
    ChatMessage,
    ChatRequest,
    Finish,
    Provider,
    ProviderError,
    model_events,
)
from ..inference.types import TextDelta as ModelText
from ..inference.types import ToolCallDelta as ModelToolCall
from ..lifecycle import TurnEventPublisher
from ..store import Conflict
from ..store.agents import AgentStore
from ..store.turns import (
    AWAITING_INPUT,
    COMPLETED,
    FAILED,
    RUNNING,
    SessionLock,
    TurnState,
    TurnStore,
)
from ..web.log import logger
from . import messages as convert
from .errors import InvalidRequest


@dataclass
class TurnFailed(Exception):
    """How a failed turn ended: the status to answer a non-streaming caller with, and why.
    `resumable`: the turn was put back to awaiting input (a queued resume, retried later)."""

    status: int
    message: str
    turn_id: str
    resumable: bool = False

    def as_event(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "status": self.status, "turn_id": self.turn_id}}


def _now() -> datetime:
    return datetime.now(UTC)


def _chunk(payload: Any) -> AgentTurnResponseStreamChunk:
    return AgentTurnResponseStreamChunk(event=AgentTurnResponseEvent(payload=payload))


_TURN_METRIC = {
    AWAITING_INPUT: "TurnsAwaitingInput",
    COMPLETED: "TurnsCompleted",
    FAILED: "TurnsFailed",
}

_PENDING_OUTPUT = CompletionMessage(content="", stop_reason=StopReason.end_of_message)


@dataclass
class TurnRun:
    """One started (or resumed) turn, holding its session's lock until it pauses or ends."""

    engine: TurnEngine
    agent_id: str
    lock: SessionLock
    turn: Turn
    state: TurnState
    provider: Provider
    request: ChatRequest
    client_tools: set[str]
    max_iterations: int
    stream: bool
    prelude: list[Step] = field(default_factory=list)
    recorded: asyncio.Task | None = None  # the write of the running turn, if not yet awaited
    record_first: bool = False  # it must land before the turn's end is written (see store)
    #: For a queued resume: the paused turn to go back to if the model fails (SQS retries).
    revert_to: tuple[Turn, TurnState] | None = None
    written_steps: list[str] = field(default_factory=list)

    async def _keep_lease(self) -> None:
        """Renew the session lock's lease while the turn runs, so a turn whose Lambda died
        frees its session within one lease (TURN_LEASE_SECONDS), however long turns may run."""
        turns = self.engine.turns
        while True:
            await asyncio.sleep(turns.lease_seconds / 4)
            try:
                if not await asyncio.to_thread(turns.extend_lease, self.lock):
                    return  # the turn lost its session; its end will say so
            except Exception:  # a missed renewal is not fatal: the lease has three more
                logger.warning("could not renew the lease", extra={"turn_id": self.turn.turn_id})

    async def _record_landed(self) -> None:
        """Wait for the running turn's record. Its loss only hides a running turn from readers:
        the turn's end is written whole either way."""
        if self.recorded is None:
            return
        task, self.recorded = self.recorded, None
        try:
            await task
        except Exception:
            logger.exception("could not record running turn", extra={"turn_id": self.turn.turn_id})

    async def _write_end(
        self, history: list[dict[str, Any]] | None = None, steps: tuple[Step, ...] = ()
    ) -> None:
        """Write the turn's end (paused, completed, failed) and release or park the lock."""
        if self.record_first:
            await self._record_landed()
        try:
            await asyncio.to_thread(
                self.engine.turns.end_turn, self.lock, self.turn, self.state, history, steps
            )
        finally:
            await self._record_landed()

    async def result(self) -> Turn:
        """Run to the end without streaming: the Turn, or TurnFailed (raised once the run has
        finished, its lifecycle event published)."""
        final: Turn | None = None
        failed: TurnFailed | None = None
        async for item in self.events():
            if isinstance(item, TurnFailed):
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

    async def events(self) -> AsyncIterator[AgentTurnResponseStreamChunk | TurnFailed]:
        """The turn's stream: turn_start, steps, then turn_complete / turn_awaiting_input, or a
        TurnFailed as the last item."""
        yield _chunk(AgentTurnResponseTurnStartPayload(turn_id=self.turn.turn_id))
        lease = asyncio.create_task(self._keep_lease())
        try:
            for step in self.prelude:
                yield _chunk(
                    AgentTurnResponseStepStartPayload(
                        step_type=step.step_type, step_id=step.step_id
                    )
                )
                yield _step_complete(step)
            while True:
                if self.state.iterations >= self.max_iterations:
                    yield await self._complete(self._last_output(StopReason.out_of_tokens))
                    await self._announce()
                    return
                self.state.iterations += 1
                step = None
                async for item in self._infer():
                    if isinstance(item, InferenceStep):
                        step = item
                    else:
                        yield item
                assert step is not None
                calls = step.model_response.tool_calls or []
                if not calls:  # the answer: its step is written with the turn's end
                    done = await self._complete(step.model_response, step)
                    yield _step_complete(step)
                    yield done
                    await self._announce()
                    return
                await self._save_step(step)
                yield _step_complete(step)
                unserved = [c for c in calls if c.tool_name not in self.client_tools]
                if unserved:
                    tool_step = self._unknown_tools_step(unserved)
                    yield _chunk(
                        AgentTurnResponseStepStartPayload(
                            step_type="tool_execution", step_id=tool_step.step_id
                        )
                    )
                    await self._save_step(tool_step)
                    yield _step_complete(tool_step)
                pending = [c for c in calls if c.tool_name in self.client_tools]
                if pending:
                    yield await self._pause(step.model_response, pending)
                    await self._announce()
                    return
        except ProviderError as err:
            if self.revert_to is not None:
                yield await self._revert(err)
                return
            yield await self._fail(err.status, str(err))
        except Conflict as err:  # ran past its lease: another turn has the session now
            logger.warning("turn lost its session", extra={"turn_id": self.turn.turn_id})
            self.state.status, self.state.error = FAILED, str(err)
            yield TurnFailed(409, str(err), self.turn.turn_id)
        except Exception as err:  # an AWS fault or a bug: the turn still ends, as failed
            if aws.unavailable(err):
                logger.warning("turn failed: AWS unavailable", extra={"turn_id": self.turn.turn_id})
                yield await self._fail(503, f"storage unavailable: {err}")
            else:
                logger.exception("turn failed", extra={"turn_id": self.turn.turn_id})
                yield await self._fail(500, f"internal error: {type(err).__name__}")
        finally:
            lease.cancel()
        await self._announce()

    async def _infer(self) -> AsyncIterator[Any]:
        step_id = new_id()
        started = _now()
        yield _chunk(AgentTurnResponseStepStartPayload(step_type="inference", step_id=step_id))
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish = Finish("stop")
        async for event in model_events(self.provider, self.request, self.stream):
            if isinstance(event, ModelText):
                text.append(event.text)
                yield _progress(step_id, TextDelta(text=event.text))
            elif isinstance(event, ModelToolCall):
                call = calls.setdefault(event.index, {"id": "", "name": "", "arguments": ""})
                call["id"] = event.id or call["id"]
                call["name"] = event.name or call["name"]
                call["arguments"] += event.arguments
                if event.arguments:
                    yield _progress(
                        step_id,
                        ToolCallDelta(tool_call=event.arguments, parse_status="in_progress"),
                    )
            elif isinstance(event, Finish):
                finish = event
        tool_calls = [
            convert.tool_call(c["id"] or new_id(), c["name"], c["arguments"])
            for _, c in sorted(calls.items())
        ]
        for call in tool_calls:
            yield _progress(step_id, ToolCallDelta(tool_call=call, parse_status="succeeded"))
        stop = (
            StopReason.out_of_tokens
            if finish.reason == "length"
            else StopReason.end_of_message
            if tool_calls
            else StopReason.end_of_turn
        )
        message = CompletionMessage(content="".join(text), stop_reason=stop, tool_calls=tool_calls)
        self.request.messages.append(convert.assistant_message(message))
        yield InferenceStep(
            turn_id=self.turn.turn_id,
            step_id=step_id,
            started_at=started,
            completed_at=_now(),
            model_response=message,
        )

    def _unknown_tools_step(self, calls: list[ToolCall]) -> ToolExecutionStep:
        responses = [
            ToolResponse(
                call_id=c.call_id,
                tool_name=c.tool_name,
                content=f"Unknown tool `{c.tool_name}` was called.",
            )
            for c in calls
        ]
        for response in responses:
            self.request.messages.append(
                ChatMessage("tool", str(response.content), tool_call_id=response.call_id)
            )
        now = _now()
        return ToolExecutionStep(
            turn_id=self.turn.turn_id,
            step_id=new_id(),
            started_at=now,
            completed_at=now,
            tool_calls=calls,
            tool_responses=responses,
        )

    async def _save_step(self, step: Step) -> None:
        await asyncio.to_thread(self.engine.turns.save_step, self.lock, step)
        self.written_steps.append(step.step_id)
        self.turn.steps.append(step)

    async def _revert(self, err: ProviderError) -> TurnFailed:
        """Undo this continuation: its steps go, the turn awaits the same tool results again."""
        paused_turn, paused_state = self.revert_to
        await asyncio.to_thread(
            self.engine.turns.revert, self.lock, paused_turn, paused_state, self.written_steps
        )
        self.turn, self.state = paused_turn, paused_state
        return TurnFailed(err.status, str(err), self.turn.turn_id, resumable=True)

    async def _announce(self) -> None:
        """Count the turn's new state (paused, completed, failed) and publish it on the bus."""
        status = self.state.status
        metrics.count(_TURN_METRIC[status])
        publisher = self.engine.publisher
        if publisher is None:
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
        elif status == COMPLETED:
            detail["output_message"] = self.turn.output_message.model_dump(mode="json")
        else:
            detail["error"] = self.state.error
        await asyncio.to_thread(publisher.publish, status, detail)

    def _last_output(self, stop: StopReason) -> CompletionMessage:
        for step in reversed(self.turn.steps):
            if isinstance(step, InferenceStep):
                return step.model_response.model_copy(update={"stop_reason": stop})
        return CompletionMessage(content="", stop_reason=stop)

    async def _complete(
        self, output: CompletionMessage, last_step: Step | None = None
    ) -> AgentTurnResponseStreamChunk:
        steps = (last_step,) if last_step is not None else ()
        self.turn.steps.extend(steps)
        self.turn.output_message = output
        self.turn.completed_at = _now()
        self.state.status = COMPLETED
        self.state.pending_calls = []
        await self._write_end([m.to_dict() for m in convert.turn_messages(self.turn)], steps)
        return _chunk(AgentTurnResponseTurnCompletePayload(turn=self.turn))

    async def _pause(
        self, output: CompletionMessage, pending: list[ToolCall]
    ) -> AgentTurnResponseStreamChunk:
        self.turn.output_message = output.model_copy(update={"tool_calls": pending})
        self.state.status = AWAITING_INPUT
        self.state.pending_calls = pending
        await self._write_end()
        return _chunk(AgentTurnResponseTurnAwaitingInputPayload(turn=self.turn))

    async def _fail(self, status: int, message: str) -> TurnFailed:
        self.state.status = FAILED
        self.state.error = message
        self.turn.completed_at = _now()
        try:
            await self._write_end()
        except Exception:  # the lease expires on its own; the client still learns why
            logger.exception("could not record failed turn", extra={"turn_id": self.turn.turn_id})
        return TurnFailed(status, message, self.turn.turn_id)


class TurnEngine:
    def __init__(
        self,
        agents: AgentStore,
        turns: TurnStore,
        models: ModelRouter,
        publisher: TurnEventPublisher | None = None,
    ) -> None:
        self.agents = agents
        self.turns = turns
        self.models = models
        self.publisher = publisher

    async def start_turn(
        self, tenant: str, agent_id: str, session_id: str, body: CreateAgentTurnRequest
    ) -> TurnRun:
        turn = Turn(
            turn_id=new_id(),
            session_id=session_id,
            input_messages=body.messages,
            steps=[],
            output_message=_PENDING_OUTPUT,
            started_at=_now(),
        )
        state = TurnState(RUNNING)
        # The lock and the agent (a warm container has it) in one round trip; then, under the
        # lock, the history, unless the session has none or this container remembers it.
        locked, agent = await asyncio.gather(
            asyncio.to_thread(
                self.turns.lock_for_new_turn, tenant, agent_id, session_id, turn.turn_id, turn
            ),
            asyncio.to_thread(self.agents.agent_for_turn, tenant, agent_id),
            return_exceptions=True,
        )
        if isinstance(locked, BaseException):
            raise locked
        lock = locked
        try:
            if isinstance(agent, BaseException):
                raise agent
            messages = self.turns.remembered_history(tenant, session_id, lock.previous_turn)
            if messages is None:
                messages = await asyncio.to_thread(
                    self.turns.history, tenant, session_id, lock.previous_turn
                )
            new = convert.input_messages(body.messages, body.documents)
            run = self._run(
                lock,
                agent_id,
                turn,
                state,
                agent.agent_config,
                messages,
                new,
                body,
                bool(body.stream),
            )
            record = None if lock.recorded else self.turns.running_record(lock, turn, state)
        except BaseException:
            await asyncio.to_thread(self.turns.release, lock)
            raise
        if record is not None:  # too large to travel with the lock: written while the model works
            run.recorded = asyncio.create_task(asyncio.to_thread(self.turns.put_running, record))
            run.record_first = record.in_parts
        return run

    async def resume_turn(
        self,
        tenant: str,
        agent_id: str,
        session_id: str,
        turn_id: str,
        tool_responses: list[ToolResponse],
        stream: bool,
        *,
        queued: bool = False,
    ) -> TurnRun:
        """Continue a paused turn. `queued` (a resume from the queue): a model failure puts the
        turn back to awaiting input, so the message can be retried, instead of failing it.

        Nothing is written until the transaction that takes the session back and stores the
        tool results; a refused resume (404, 409, 400) changes nothing."""
        paused, agent = await _all(
            asyncio.to_thread(self.turns.read_paused, tenant, agent_id, session_id, turn_id),
            asyncio.to_thread(self.agents.agent_for_turn, tenant, agent_id),
        )
        turn, state = paused.turn, paused.state
        if state.status != AWAITING_INPUT:
            raise Conflict(f"Turn {turn_id} is not awaiting input (it is {state.status})")
        _check_responses(state.pending_calls, tool_responses)
        # The paused turn holds the session, so no turn can finish meanwhile: the history read
        # now is the history under the lock.
        history = self.turns.remembered_history(tenant, session_id, paused.last_turn)
        if history is None:
            history = await asyncio.to_thread(
                self.turns.history, tenant, session_id, paused.last_turn
            )
        now = _now()
        by_id = {r.call_id: r for r in tool_responses}
        step = ToolExecutionStep(
            turn_id=turn_id,
            step_id=new_id(),
            started_at=now,
            completed_at=now,
            tool_calls=state.pending_calls,
            tool_responses=[by_id[c.call_id] for c in state.pending_calls],
        )
        lock = await asyncio.to_thread(self.turns.lock_for_resume, paused, agent_id, step)
        paused_turn, paused_state = turn.model_copy(deep=True), TurnState(**vars(state))
        try:
            turn.steps.append(step)
            state.status, state.pending_calls = RUNNING, []
            turn.output_message = _PENDING_OUTPUT
            current = convert.turn_messages(turn)
            run = self._run(
                lock, agent_id, turn, state, agent.agent_config, history, current, None, stream
            )
            run.prelude = [step]
            run.written_steps.append(step.step_id)
            if queued:
                run.revert_to = (paused_turn, paused_state)
            return run
        except BaseException:
            # The resume did not start: the turn goes back to awaiting input, unchanged.
            await asyncio.to_thread(
                self.turns.revert, lock, paused_turn, paused_state, [step.step_id]
            )
            raise

    def _run(
        self,
        lock: SessionLock,
        agent_id: str,
        turn: Turn,
        state: TurnState,
        config: AgentConfig,
        history: list[dict[str, Any]],
        current: list[ChatMessage],
        body: CreateAgentTurnRequest | None,
        stream: bool,
    ) -> TurnRun:
        if config.toolgroups or (body is not None and body.toolgroups):
            raise InvalidRequest(
                "toolgroups are not available on this deployment; use client_tools"
            )
        tool_config = (body.tool_config if body is not None else None) or config.tool_config
        tool_config = tool_config or ToolConfig()
        tools = convert.tool_specs(config)
        instructions = (body.instructions if body is not None else None) or config.instructions
        system = _system_prompt(instructions, tool_config, tools)
        provider, model_id = self.models.resolve(config.model)
        messages = [ChatMessage("system", system)] if system else []
        messages += [ChatMessage.from_dict(m) for m in history] + current
        request = ChatRequest(
            model=model_id,
            messages=messages,
            tools=tools,
            tool_choice=str(tool_config.tool_choice or "auto"),
            sampling=config.sampling_params,
            response_format=config.response_format,
        )
        provider.check(request)  # UnsupportedRequest: 400 before anything runs
        return TurnRun(
            engine=self,
            agent_id=agent_id,
            lock=lock,
            turn=turn,
            state=state,
            provider=provider,
            request=request,
            client_tools={t.name for t in config.client_tools or []},
            max_iterations=config.max_infer_iters or 10,
            stream=stream,
        )


def _system_prompt(instructions: str, tool_config: ToolConfig, tools: list[Any]) -> str:
    """`append` (the default) sends the instructions as the system message; `replace` lets the
    instructions place the tool definitions with `{{function_definitions}}`."""
    if (
        tool_config.system_message_behavior == "replace"
        and "{{function_definitions}}" in instructions
    ):
        import json

        definitions = json.dumps(
            [
                {"name": t.name, "description": t.description, "parameters": t.parameters}
                for t in tools
            ]
        )
        return instructions.replace("{{function_definitions}}", definitions)
    return instructions


def _check_responses(pending: list[ToolCall], responses: list[ToolResponse]) -> None:
    want = sorted(c.call_id for c in pending)
    got = sorted(r.call_id for r in responses)
    if want != got:
        raise InvalidRequest(
            f"tool_responses must answer exactly the pending calls {want}; got {got}"
        )


def _progress(step_id: str, delta: Any) -> AgentTurnResponseStreamChunk:
    return _chunk(
        AgentTurnResponseStepProgressPayload(step_type="inference", step_id=step_id, delta=delta)
    )


def _step_complete(step: Step) -> AgentTurnResponseStreamChunk:
    return _chunk(
        AgentTurnResponseStepCompletePayload(
            step_type=step.step_type, step_id=step.step_id, step_details=step
        )
    )


async def _all(*calls: Any) -> list[Any]:
    """Await every call (none is left running behind an error), then raise the first error."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results
