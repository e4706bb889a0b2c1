"""Routes of the agents function: agents and sessions (turns and steps read from the turns
function, which streams its answers)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel

from ..api.agents import (
    Agent,
    AgentCreateResponse,
    AgentSessionCreateResponse,
    CreateAgentRequest,
    CreateAgentSessionRequest,
    SessionPage,
)
from ..api.common import PaginatedResponse
from .common import ID_PATTERN, AgentId, SessionId, json_response
from .deps import Svc, Tenant
from .reads import session_response

MAX_PAGE = 1000
DEFAULT_PAGE = 100
#: Offset pages read the items they skip; past this, a caller should filter rather than page.
MAX_START_INDEX = 100_000

router = APIRouter(prefix="/v1/agents", tags=["Agents"])

StartIndex = Annotated[int, Query(ge=0, le=MAX_START_INDEX)]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE)]


def page_response(items: list[BaseModel], has_more: bool) -> Response:
    data = [item.model_dump(mode="json") for item in items]
    return json_response(PaginatedResponse(data=data, has_more=has_more))


@router.post("", responses={200: {"model": AgentCreateResponse}})
def create_agent(body: CreateAgentRequest, tenant: Tenant, svc: Svc) -> Response:
    agent = svc.agents.create_agent(tenant, body.agent_config)
    return json_response(AgentCreateResponse(agent_id=agent.agent_id))


@router.get("", responses={200: {"model": PaginatedResponse}})
def list_agents(
    tenant: Tenant, svc: Svc, start_index: StartIndex = 0, limit: Limit = DEFAULT_PAGE
) -> Response:
    agents, has_more = svc.agents.list_agents(tenant, start_index, limit)
    return page_response(agents, has_more)


@router.get("/{agent_id}", responses={200: {"model": Agent}})
def get_agent(agent_id: AgentId, tenant: Tenant, svc: Svc) -> Response:
    return json_response(svc.agents.get_agent(tenant, agent_id))


@router.delete("/{agent_id}", status_code=204)
def delete_agent(agent_id: AgentId, tenant: Tenant, svc: Svc) -> Response:
    svc.agents.delete_agent(tenant, agent_id)
    return Response(status_code=204)


@router.post("/{agent_id}/session", responses={200: {"model": AgentSessionCreateResponse}})
def create_session(
    agent_id: AgentId, body: CreateAgentSessionRequest, tenant: Tenant, svc: Svc
) -> Response:
    session = svc.agents.create_session(tenant, agent_id, body.session_name)
    return json_response(AgentSessionCreateResponse(session_id=session.session_id))


@router.get("/{agent_id}/sessions", responses={200: {"model": PaginatedResponse}})
def list_sessions(
    agent_id: AgentId,
    tenant: Tenant,
    svc: Svc,
    start_index: StartIndex = 0,
    limit: Limit = DEFAULT_PAGE,
) -> Response:
    sessions, has_more = svc.agents.list_sessions(tenant, agent_id, start_index, limit)
    return page_response(sessions, has_more)


@router.get("/{agent_id}/session/{session_id}", responses={200: {"model": SessionPage}})
def get_session(
    agent_id: AgentId,
    session_id: SessionId,
    tenant: Tenant,
    svc: Svc,
    turn_ids: Annotated[list[str] | None, Query()] = None,
    limit: Annotated[int | None, Query(ge=1, le=MAX_PAGE)] = None,
    starting_after: Annotated[str | None, Query(pattern=ID_PATTERN)] = None,
) -> Response:
    """Extension: `limit` turns at most, those after the turn `starting_after`. An answer cut
    short (by `limit` or by the size a read answers) says `"has_more": true`."""
    # Clients send `turn_ids=a&turn_ids=b` or, like llama-stack-client, `turn_ids=a,b`.
    wanted = [t for value in turn_ids or [] for t in value.split(",") if t] or None
    max_bytes = svc.settings.max_read_bytes
    page = svc.agents.session_page(
        tenant,
        agent_id,
        session_id,
        turn_ids=wanted,
        starting_after=starting_after,
        limit=limit,
        max_bytes=max_bytes,
    )
    return session_response(page, max_bytes)


@router.delete("/{agent_id}/session/{session_id}", status_code=204)
def delete_session(agent_id: AgentId, session_id: SessionId, tenant: Tenant, svc: Svc) -> Response:
    svc.agents.delete_session(tenant, agent_id, session_id)
    return Response(status_code=204)
