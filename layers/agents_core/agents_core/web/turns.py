"""Routes of the turns and resume functions: create a turn, resume one (streamed or not), read a
turn or a step (streamed: either may pass a buffered Lambda's 6 MB), and rejoin a turn's stream
(an extension of the v0.2.14 contract)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Response

from ..api.agents import (
    AgentStepResponse,
    CreateAgentTurnRequest,
    ResumeAgentTurnRequest,
    Turn,
)
from ..api.traces import Trace
from ..domain import AWAITING_INPUT, RUNNING
from ..engine.turn_run import TurnRun
from ..errors import InvalidRequest, NotFound
from ..services import Services
from ..services.streams import Frame, StreamKey, turn_frame
from .common import (
    AgentId,
    LastEventId,
    SessionId,
    StartingAfter,
    StepId,
    TurnId,
    json_response,
    rejoin_point,
    trace_response,
)
from .deps import Provider, Svc, Tenant
from .direct_route import DirectRoute
from .reads import turn_response
from .sse import STREAM_DOC, follow_response, sse_response

turns_router = APIRouter(prefix="/v1/agents", tags=["Agents"])
#: A run's POSTs skip FastAPI's per-request solving of their parameters (DirectRoute).
resume_router = APIRouter(prefix="/v1/agents", tags=["Agents"], route_class=DirectRoute)
_RUN_ANSWER = {200: {"model": Turn, "description": "The Turn, or an SSE stream when stream=true"}}


async def create_turn(
    agent_id: AgentId,
    session_id: SessionId,
    body: CreateAgentTurnRequest,
    tenant: Tenant,
    svc: Svc,
    provider_data: Provider,
) -> Response:
    run = await svc.engine.start_turn(tenant, agent_id, session_id, body, provider_data)
    return await _answer(run, svc)


turns_router.add_api_route(
    "/{agent_id}/session/{session_id}/turn",
    create_turn,
    methods=["POST"],
    responses=_RUN_ANSWER,
    route_class_override=DirectRoute,
)


@resume_router.post("/{agent_id}/session/{session_id}/turn/{turn_id}/resume", responses=_RUN_ANSWER)
async def resume_turn(
    agent_id: AgentId,
    session_id: SessionId,
    turn_id: TurnId,
    body: ResumeAgentTurnRequest,
    tenant: Tenant,
    svc: Svc,
    provider_data: Provider,
) -> Response:
    run = await svc.engine.resume_turn(
        tenant,
        agent_id,
        session_id,
        turn_id,
        body.tool_responses,
        bool(body.stream),
        provider_data=provider_data,
    )
    if not body.stream:
        return await _answer(run, svc)
    # A resumed turn's stream goes on with the turn's numbering.
    stream = StreamKey.turn(session_id, turn_id)
    start = await svc.streams.continues_at(tenant, stream, run.first_event, {"turn_id": turn_id})
    return await _answer(run, svc, start)


async def _answer(run: TurnRun, svc: Services, start: int | None = 0) -> Response:
    """`start`: the index of the stream's first event; None: not recorded."""
    if run.stream:
        tenant, turn = run.lock.tenant, run.turn
        recorder = (
            svc.streams.recorder(tenant, StreamKey.turn(turn.session_id, turn.turn_id))
            if start is not None
            else None
        )
        return sse_response(
            _frames(run.events(plain_text=True), start or 0),
            recorder,
            ended=lambda: run.state.status != AWAITING_INPUT,  # a paused turn's stream goes on
        )
    return json_response(await run.result())  # RunFailed: the error handler answers


async def _frames(items: AsyncIterator[Any], start: int) -> AsyncIterator[Frame]:
    seq = start
    async for item in items:
        yield turn_frame(seq, item)
        seq += 1


@turns_router.get(
    "/{agent_id}/session/{session_id}/turn/{turn_id}", responses={200: {"model": Turn}}
)
async def get_turn(
    agent_id: AgentId, session_id: SessionId, turn_id: TurnId, tenant: Tenant, svc: Svc
) -> Response:
    """Served by the streaming turns function: its answer is streamed, so a turn larger than a
    buffered Lambda's 6 MB reads whole (up to MAX_STREAMED_READ_BYTES)."""
    turn = await asyncio.to_thread(svc.turns.get_turn, tenant, agent_id, session_id, turn_id)
    return turn_response(turn, svc.settings.max_streamed_read_bytes)


@turns_router.get(
    "/{agent_id}/session/{session_id}/turn/{turn_id}/trace", responses={200: {"model": Trace}}
)
def get_turn_trace(
    agent_id: AgentId, session_id: SessionId, turn_id: TurnId, tenant: Tenant, svc: Svc
) -> Response:
    """The turn's trace (an extension of the v0.2.14 contract): a span per run (its start, each
    resume), with a child per model call, tool call and shield check. A run's spans are stored
    as it pauses or ends: `complete` is false while one runs."""
    _, state = svc.turns.get_turn_state(tenant, agent_id, session_id, turn_id)
    return trace_response(turn_id, state.trace, complete=state.status != RUNNING)


@turns_router.get(
    "/{agent_id}/session/{session_id}/turn/{turn_id}/step/{step_id}",
    responses={200: {"model": AgentStepResponse}},
)
async def get_step(
    agent_id: AgentId,
    session_id: SessionId,
    turn_id: TurnId,
    step_id: StepId,
    tenant: Tenant,
    svc: Svc,
) -> Response:
    """Streamed like the turn read: one step (a model's long answer) may pass 6 MB too."""
    step = await asyncio.to_thread(
        svc.turns.get_step, tenant, agent_id, session_id, turn_id, step_id
    )
    return json_response(AgentStepResponse(step=step))


@turns_router.get(
    "/{agent_id}/session/{session_id}/turn/{turn_id}/stream",
    responses={200: STREAM_DOC},
    response_class=Response,
)
async def rejoin_turn_stream(
    agent_id: AgentId,
    session_id: SessionId,
    turn_id: TurnId,
    tenant: Tenant,
    svc: Svc,
    starting_after: StartingAfter = None,
    last_event_id: LastEventId = None,
) -> Response:
    """The turn's stream (`data: <AgentTurnResponseStreamChunk>` with `id:` lines) after the
    event index `starting_after` (or `Last-Event-ID`, which wins), replayed from the store and
    followed to the turn's end or pause. An extension of the v0.2.14 contract."""
    after = rejoin_point(starting_after, last_event_id)
    stream = StreamKey.turn(session_id, turn_id)
    store = svc.streams.store

    async def running() -> bool:
        return await asyncio.to_thread(store.turn_running, tenant, agent_id, session_id, turn_id)

    async def alive() -> bool:
        try:
            return await running()
        except NotFound:  # the session was deleted
            return False

    is_running, last = await asyncio.gather(running(), svc.streams.last_sequence(tenant, stream))
    if last < 0 and not is_running:
        await asyncio.to_thread(svc.turns.get_turn, tenant, agent_id, session_id, turn_id)
        raise InvalidRequest(
            f"Turn {turn_id} has no stored stream (it was not streamed, or its events are past"
            " their retention): read it with GET .../turn/{turn_id}"
        )
    return follow_response(svc.streams.follow(tenant, stream, after, alive=alive))


queue_router = APIRouter(tags=["Internal"])


@queue_router.post("/events", include_in_schema=False)
async def resume_from_queue(
    event: dict[str, Any],
    svc: Svc,
    lambda_context: Annotated[str | None, Header(alias="x-amzn-lambda-context")] = None,
) -> dict[str, Any]:
    """SQS batches, as the Lambda Web Adapter passes non-HTTP events (AWS_LWA_PASS_THROUGH_PATH).
    Not routed by API Gateway: only the function's own event source reaches it. The adapter
    sends the invocation's context along: its deadline bounds the turns resumed here."""
    from ..services.resume_queue import ResumeQueueWorker

    return await ResumeQueueWorker(svc).handle(event, invocation_deadline(lambda_context))


def invocation_deadline(lambda_context: str | None) -> float | None:
    """The invocation's end (epoch seconds) from the Web Adapter's `x-amzn-lambda-context`
    (the Lambda runtime's context as JSON, its `deadline` in epoch milliseconds)."""
    try:
        context = json.loads(lambda_context or "{}")
        deadline = context.get("deadline") or context.get("deadline_ms")
        return int(deadline) / 1000 if deadline else None
    except (ValueError, TypeError, AttributeError):
        return None
