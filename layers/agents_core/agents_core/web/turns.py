"""Routes of the turns and resume functions: create a turn, resume one (streamed or not)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Response
from fastapi.responses import JSONResponse, StreamingResponse

from ..api.agents import CreateAgentTurnRequest, ResumeAgentTurnRequest, Turn
from ..engine.turns import TurnFailed, TurnRun
from ..services import Services
from .common import AgentId, SessionId, TurnId, json_response
from .context import get_services, tenant

Tenant = Annotated[str, Depends(tenant)]
Svc = Annotated[Services, Depends(get_services)]

turns_router = APIRouter(prefix="/v1/agents", tags=["Agents"])
resume_router = APIRouter(prefix="/v1/agents", tags=["Agents"])

_running: set[asyncio.Task] = set()


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
        return StreamingResponse(
            _sse(run),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    try:
        return json_response(await run.result())
    except TurnFailed as failed:
        return JSONResponse(
            {"detail": failed.message, "turn_id": failed.turn_id}, status_code=failed.status
        )


async def _sse(run: TurnRun) -> AsyncIterator[bytes]:
    """`data: <chunk>` per event. The turn runs in its own task: a client that goes away does
    not stop it, and can fetch the turn by the id `turn_start` gave it."""
    queue: asyncio.Queue = asyncio.Queue()

    async def pump() -> None:
        try:
            async for item in run.events():
                await queue.put(item)
        finally:
            await queue.put(None)

    task = asyncio.create_task(pump())
    _running.add(task)
    task.add_done_callback(_running.discard)
    while (item := await queue.get()) is not None:
        if isinstance(item, TurnFailed):
            data = json.dumps(item.as_event())
        else:
            data = item.model_dump_json()
        yield f"data: {data}\n\n".encode()
