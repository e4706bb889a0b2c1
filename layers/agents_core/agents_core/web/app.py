"""The FastAPI app factory shared by every function and by the local server."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI

from ..store import AgentStore
from .errors import install_error_handlers


def create_app(*routers: APIRouter, agent_store: AgentStore) -> FastAPI:
    """An app serving `routers` over `agent_store`; functions pass their own router(s)."""
    app = FastAPI(title="serverless-agents", version="0.1.0")
    app.state.agent_store = agent_store
    install_error_handlers(app)
    for router in routers:
        app.include_router(router)
    return app
