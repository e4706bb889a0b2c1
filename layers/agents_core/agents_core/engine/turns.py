"""The Agents API face of the agent loop: turns and steps.

A turn runs while it holds its session's lock. Each model call is an inference step; calls to
the agent's client tools pause the turn (`turn_awaiting_input`) until the client resumes it with
their results, which become a tool-execution step before the loop goes on; calls answered here
(the tools of the agent's tool groups, run in parallel; unknown tools, with an error result)
are a tool-execution step too. Every step is stored as it
completes; the turn's end (paused, completed, failed) is stored together with the lock's
release. A failure ends the turn as failed, never half-written.

    run = await engine.start_turn(tenant, agent_id, session_id, request)  # 404/409/400 here
    async for chunk in run.events(): ...  # or: turn = await run.result()
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from ..api.agents import AgentConfig, CreateAgentTurnRequest, ToolExecutionStep, Turn
from ..api.common import CompletionMessage, StopReason, ToolCall, ToolConfig, ToolResponse
from ..domain import AWAITING_INPUT, RUNNING, SessionLock, TurnState
from ..errors import Conflict, InvalidRequest, Unauthenticated
from ..ids import new_id
from ..inference.router import ModelRouter
from ..inference.types import ChatMessage, ChatRequest
from ..lifecycle import TurnEventPublisher
from . import loop as L
from . import messages as convert
from .server_tools import ServerToolset, ToolRuntime
from .shields import ShieldService, shields_for
from .storage import TurnStorage
from .trace import SpanExporter
from .turn_run import TurnRun

__all__ = ["TurnEngine", "TurnRun"]

_PENDING_OUTPUT = CompletionMessage(content="", stop_reason=StopReason.end_of_message)


class TurnEngine:
    """Starts and resumes turns: reads what a turn needs, takes its session, and hands the
    agent loop to a TurnRun."""

    def __init__(
        self,
        storage: TurnStorage,
        models: ModelRouter,
        publisher: TurnEventPublisher | None = None,
        limits: L.Limits = L.Limits(),
        tools: ToolRuntime | None = None,
        shields: ShieldService | None = None,
        exporter: SpanExporter | None = None,
    ) -> None:
        self.exporter = exporter  # runs' spans go there too (OTLP), when configured
        self.storage = storage
        self.models = models
        self.publisher = publisher
        self.limits = limits
        self.tools = tools  # None: no server-side tools (toolgroups are refused)
        self.shields = shields  # None: no shields (agents naming some are refused)
        self.finished_turns = convert.FinishedTurns()

    async def start_turn(
        self,
        tenant: str,
        agent_id: str,
        session_id: str,
        body: CreateAgentTurnRequest,
        provider_data: Any = None,
    ) -> TurnRun:
        turn = Turn(
            turn_id=new_id(),
            session_id=session_id,
            input_messages=body.messages,
            steps=[],
            output_message=_PENDING_OUTPUT,
            started_at=L.now(),
        )
        state = TurnState(RUNNING)
        # The lock and the agent (a warm container has it) in one round trip; then, under the
        # lock, the history, unless the session has none or this container remembers it.
        locked, agent = await self._with_agent(
            tenant, agent_id, self.storage.lock_session(tenant, agent_id, turn)
        )
        if isinstance(locked, BaseException):
            raise locked
        lock = locked
        try:
            if isinstance(agent, BaseException):
                raise agent
            history = await self.storage.history(tenant, session_id, lock.previous_turn)
            loop = await self._loop(
                tenant,
                session_id,
                agent.agent_config,
                history,
                convert.input_messages(body.messages, body.documents),
                body=body,
                stream=bool(body.stream),
                provider_data=provider_data,
            )
            await self.storage.turn_started(lock, turn)
        except BaseException:
            await self.storage.release(lock)
            raise
        return self._run(agent_id, lock, turn, state, loop)

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
        provider_data: Any = None,
        resume_token: str | None = None,
        should_suspend: Callable[[], bool] | None = None,
    ) -> TurnRun:
        """Continue a paused turn. `queued` (a resume from the queue): `resume_token` must be
        the one issued at the turn's last pause (else Unauthenticated, nothing changed), and a
        model failure puts the turn back to awaiting input, so the message can be retried,
        instead of failing it. `should_suspend` (a queued resume): asked before each model call
        but the first; when it says so, the turn is parked at that step boundary, awaiting no
        call (`TurnRun.continuation_token`), for its continuation in another invocation: a
        resume with no tool responses.

        Nothing is written until the storage takes the session back and stores the tool
        results at once; a refused resume (404, 409, 400) changes nothing."""
        paused, agent = _raised(
            await self._with_agent(
                tenant, agent_id, self.storage.read_paused(tenant, agent_id, session_id, turn_id)
            )
        )
        turn, state = paused.turn, paused.state
        if queued and not state.resume_token_matches(resume_token):
            raise Unauthenticated(f"Resume token does not match turn {turn_id}")
        if state.status != AWAITING_INPUT:
            raise Conflict(f"Turn {turn_id} is not awaiting input (it is {state.status})")
        _check_responses(state.pending_calls, tool_responses)
        # The paused turn holds the session, so no turn can finish meanwhile: the history read
        # now is the history under the lock.
        history = await self.storage.history(tenant, session_id, paused.last_turn)
        now = L.now()
        by_id = {r.call_id: r for r in tool_responses}
        step = None
        if state.pending_calls:  # none: a turn parked for time goes on where it was
            step = ToolExecutionStep(
                turn_id=turn_id,
                step_id=new_id(),
                started_at=now,
                completed_at=now,
                tool_calls=state.pending_calls,
                tool_responses=[by_id[c.call_id] for c in state.pending_calls],
            )
        lock = await self.storage.lock_for_resume(paused, agent_id, step)
        # The run only appends to the turn's steps and replaces its output and end time (its
        # messages and steps are never changed in place): a copy with a list of its own keeps
        # the paused turn for a revert, where a deep copy cost a resume about 0.2 ms of CPU.
        paused_turn = turn.model_copy(update={"steps": list(turn.steps)})
        paused_state = TurnState(**vars(state))
        written = [step] if step is not None else []
        try:
            turn.steps.extend(written)
            state.status, state.pending_calls = RUNNING, []
            turn.output_message = _PENDING_OUTPUT
            loop = await self._loop(
                tenant,
                session_id,
                agent.agent_config,
                history,
                convert.turn_messages(turn),
                stream=stream,
                provider_data=provider_data,
                iterations=state.iterations,
                tool_calls=state.tool_calls,
                should_suspend=should_suspend,
            )
        except BaseException:
            # The resume did not start: the turn goes back to awaiting input, unchanged.
            await self.storage.revert(lock, paused_turn, paused_state, [s.step_id for s in written])
            raise
        revert_to = (paused_turn, paused_state) if queued else None
        prelude = tuple(written)
        return self._run(agent_id, lock, turn, state, loop, prelude=prelude, revert_to=revert_to)

    async def _with_agent(self, tenant: str, agent_id: str, call: Any) -> list[Any]:
        """[what `call` returns, the agent], each the error it raised instead, as gather's
        `return_exceptions` gives them: the agent read beside the call, in the same round trip,
        unless the storage has it at hand (then no task is made for either)."""
        agent = self.storage.remembered_agent(tenant, agent_id)
        if agent is None:
            reading = self.storage.agent(tenant, agent_id)
            return await asyncio.gather(call, reading, return_exceptions=True)
        try:
            return [await call, agent]
        except Exception as err:
            return [err, agent]

    def _run(
        self,
        agent_id: str,
        lock: SessionLock,
        turn: Turn,
        state: TurnState,
        loop: L.AgentLoop,
        **more: Any,
    ) -> TurnRun:
        return TurnRun(
            storage=self.storage,
            publisher=self.publisher,
            agent_id=agent_id,
            lock=lock,
            turn=turn,
            state=state,
            loop=loop,
            exporter=self.exporter,
            **more,
        )

    async def _loop(
        self,
        tenant: str,
        session_id: str,
        config: AgentConfig,
        history: list[dict[str, Any]],
        current: list[ChatMessage],
        *,
        stream: bool,
        body: CreateAgentTurnRequest | None = None,
        iterations: int = 0,
        tool_calls: int = 0,
        provider_data: Any = None,
        should_suspend: Callable[[], bool] | None = None,
    ) -> L.AgentLoop:
        """The agent loop for a turn: the agent's model, instructions, client tools and tool
        groups, the session's history, then this turn's messages so far. 400 before anything
        runs for what the model cannot do."""
        server = await self._toolgroups(tenant, config, body, provider_data)
        new_input = [{"role": m.role, "content": m.content} for m in current]
        shields = await shields_for(
            self.shields,
            tenant,
            (config.input_shields or []) if body is not None else [],  # a resume adds no input
            config.output_shields or [],
            new_input,
        )
        tool_config = (body.tool_config if body is not None else None) or config.tool_config
        tool_config = tool_config or ToolConfig()
        tools = convert.tool_specs(config) + server.specs
        instructions = (body.instructions if body is not None else None) or config.instructions
        system = _system_prompt(instructions, tool_config, tools)
        provider, model_id = self.models.resolve(config.model)
        messages = [ChatMessage("system", system)] if system else []
        messages += self.finished_turns.messages(tenant, session_id, history) + current
        request = ChatRequest(
            model=model_id,
            messages=messages,
            tools=tools,
            tool_choice=str(tool_config.tool_choice or "auto"),
            sampling=config.sampling_params,
            response_format=config.response_format,
        )
        provider.check(request)
        return L.AgentLoop(
            provider,
            request,
            L.Tools(
                client=frozenset(t.name for t in config.client_tools or []), server=server.tools
            ),
            max_iterations=config.max_infer_iters or 10,
            iterations=iterations,
            tool_calls=tool_calls,
            limits=self.limits,
            stream=stream,
            shields=shields,
            should_suspend=should_suspend,
        )

    async def _toolgroups(
        self,
        tenant: str,
        config: AgentConfig,
        body: CreateAgentTurnRequest | None,
        provider_data: Any,
    ) -> ServerToolset:
        """The server-side tools of the agent's tool groups, and of the turn's if it names its
        own (they replace the agent's for this turn, as in Llama Stack)."""
        groups = (body.toolgroups if body is not None else None) or config.toolgroups or []
        if not groups:
            return ServerToolset()
        if self.tools is None:
            raise InvalidRequest("toolgroups are not available on this deployment")
        server = await self.tools.toolgroups(tenant, groups, provider_data)
        clash = {t.name for t in config.client_tools or []} & set(server.tools)
        if clash:
            raise InvalidRequest(f"client tools and tool groups both define {sorted(clash)}")
        return server


def _system_prompt(instructions: str, tool_config: ToolConfig, tools: list[Any]) -> str:
    """`append` (the default) sends the instructions as the system message; `replace` lets the
    instructions place the tool definitions with `{{function_definitions}}`."""
    if (
        tool_config.system_message_behavior == "replace"
        and "{{function_definitions}}" in instructions
    ):
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


def _raised(results: list[Any]) -> list[Any]:
    """`results` (as gather's `return_exceptions` gives them), or the first error among them."""
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results
