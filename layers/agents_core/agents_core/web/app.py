"""The FastAPI app factory shared by every function and by the local server."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI

from ..services import Services
from .errors import install_error_handlers


def create_app(*routers: APIRouter, services: Services, lifespan: Any = None) -> FastAPI:
    """An app serving `routers` over `services`; each function passes its own router(s)."""
    app = FastAPI(title="serverless-agents", version="0.1.0", lifespan=lifespan)
    app.state.services = services
    install_error_handlers(app)
    for router in routers:
        app.include_router(router)
    return app
