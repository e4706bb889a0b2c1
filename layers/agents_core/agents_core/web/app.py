"""The FastAPI app factory shared by every function and by the local server."""

from __future__ import annotations

import warnings
from typing import Any

from fastapi import APIRouter, FastAPI
from pydantic.warnings import UnsupportedFieldAttributeWarning

from ..services import Services
from .errors import install_error_handlers
from .openapi import install_openapi


def create_app(*routers: APIRouter, services: Services, lifespan: Any = None) -> FastAPI:
    """An app serving `routers` over `services`; each function passes its own router(s)."""
    # FastAPI's body parameters, on models whose schema is built on first use (`defer_build`,
    # for cold starts), trip a false positive of pydantic's: the alias is FastAPI's, and works.
    warnings.filterwarnings(
        "ignore", message="The 'alias' attribute", category=UnsupportedFieldAttributeWarning
    )
    app = FastAPI(title="serverless-agents", version="0.1.0", lifespan=lifespan)
    app.state.services = services
    install_error_handlers(app)
    install_openapi(app)
    for router in routers:
        app.include_router(router)
    return app
