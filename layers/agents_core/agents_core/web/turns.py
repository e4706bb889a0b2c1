"""Routes of the turns and resume functions: create a turn, resume one (streamed or not)."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response
from fastapi.responses import JSONResponse

from ..api.agents import CreateAgentTurnRequest, ResumeAgentTurnRequest, Turn
from ..engine.turns import TurnFailed, TurnRun
from ..services import Services
from .common import AgentId, SessionId, TurnId, json_response
from .context import get_services, tenant
from .sse import sse_response

Tenant = Annotated[str, Depends(tenant)]
Svc = Annotated[Services, Depends(get_services)]

turns_router = APIRouter(prefix="/v1/agents", tags=["Agents"])
resume_router = APIRouter(prefix="/v1/agents", tags=["Agents"])


@turns_router.post(
    "/{agent_id}/session/{session_id}/turn",
    responses={200: {"model": Turn, "description": "The Turn, or an SSE stream when stream=true"}},
)
async def create_turn(
    agent_id: AgentId, session_id: SessionId, body: CreateAgentTurnRequest, tenant: Tenant, svc: Svc
) -> Response:
    run = await svc.engine.start_turn(tenant, agent_id, session_id, body)
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
) -> Response:
    run = await svc.engine.resume_turn(
        tenant, agent_id, session_id, turn_id, body.tool_responses, bool(body.stream)
    )
    return await _answer(run)


async def _answer(run: TurnRun) -> Response:
    if run.stream:
        return sse_response(run.events(), _frame)
    try:
        return json_response(await run.result())
    except TurnFailed as failed:
        return JSONResponse(
            {"detail": failed.message, "turn_id": failed.turn_id}, status_code=failed.status
        )


def _frame(item: Any) -> str:
    """`data: <chunk>`, or at the end Llama Stack's `data: {"error": ...}`."""
    data = json.dumps(item.as_event()) if isinstance(item, TurnFailed) else item.model_dump_json()
    return f"data: {data}\n\n"


queue_router = APIRouter(tags=["Internal"])


@queue_router.post("/events", include_in_schema=False)
async def resume_from_queue(event: dict[str, Any], svc: Svc) -> dict[str, Any]:
    """SQS batches, as the Lambda Web Adapter passes non-HTTP events (AWS_LWA_PASS_THROUGH_PATH).
    Not routed by API Gateway: only the function's own event source reaches it."""
    from ..resume_queue import ResumeQueueWorker

    return await ResumeQueueWorker(svc).handle(event)
