"""Routes of the turns and resume functions: create a turn, resume one (streamed or not)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Response

from ..api.agents import CreateAgentTurnRequest, ResumeAgentTurnRequest, Turn
from ..engine.turns import TurnRun
from ..errors import RunFailed
from .common import AgentId, SessionId, TurnId, json_response
from .deps import Provider, Svc, Tenant
from .sse import sse_response

turns_router = APIRouter(prefix="/v1/agents", tags=["Agents"])
resume_router = APIRouter(prefix="/v1/agents", tags=["Agents"])


@turns_router.post(
    "/{agent_id}/session/{session_id}/turn",
    responses={200: {"model": Turn, "description": "The Turn, or an SSE stream when stream=true"}},
)
async def create_turn(
    agent_id: AgentId,
    session_id: SessionId,
    body: CreateAgentTurnRequest,
    tenant: Tenant,
    svc: Svc,
    provider_data: Provider,
) -> Response:
    run = await svc.engine.start_turn(tenant, agent_id, session_id, body, provider_data)
    return await _answer(run)


@resume_router.post(
    "/{agent_id}/session/{session_id}/turn/{turn_id}/resume",
    responses={200: {"model": Turn, "description": "The Turn, or an SSE stream when stream=true"}},
)
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
    return await _answer(run)


async def _answer(run: TurnRun) -> Response:
    if run.stream:
        return sse_response(run.events(), _frame)
    return json_response(await run.result())  # RunFailed: the error handler answers


def _frame(item: Any) -> str:
    """`data: <chunk>`, or at the end Llama Stack's `data: {"error": ...}`."""
    if isinstance(item, RunFailed):
        error = {"message": item.message, "status": item.status, **item.ids}
        return f"data: {json.dumps({'error': error})}\n\n"
    return f"data: {item.model_dump_json()}\n\n"


queue_router = APIRouter(tags=["Internal"])


@queue_router.post("/events", include_in_schema=False)
async def resume_from_queue(event: dict[str, Any], svc: Svc) -> dict[str, Any]:
    """SQS batches, as the Lambda Web Adapter passes non-HTTP events (AWS_LWA_PASS_THROUGH_PATH).
    Not routed by API Gateway: only the function's own event source reaches it."""
    from ..services.resume_queue import ResumeQueueWorker

    return await ResumeQueueWorker(svc).handle(event)
