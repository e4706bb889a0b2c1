"""The FastAPI app factory shared by every function and by the local server."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from pydantic.warnings import UnsupportedFieldAttributeWarning

from ..services import Services
from .common import ALIASES
from .encoding import DecompressBodies
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
    app.add_middleware(DecompressBodies)
    install_error_handlers(app)
    install_openapi(app)
    for router in routers:
        app.include_router(router)
        app.include_router(_aliases(router))
    return app


def connecting(services: Services) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """The lifespan of an app uvicorn serves behind the Web Adapter (run.sh): uvicorn runs it
    before it listens, so within Lambda's init, where the services open the connections a
    first run would (`Services.connect`)."""

    @asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        await services.connect()
        yield

    return lifespan


def _aliases(router: APIRouter) -> APIRouter:
    """The router's routes under an aliased prefix (`common.ALIASES`), at the alias: the same
    endpoints, statuses and documentation."""
    aliases = APIRouter()
    for route in router.routes:
        if not isinstance(route, APIRoute):
            continue
        for prefix, alias in ALIASES:
            if route.path == prefix or route.path.startswith(prefix + "/"):
                aliases.add_api_route(
                    alias + route.path[len(prefix) :],
                    route.endpoint,
                    route_class_override=type(route),
                    methods=sorted(route.methods),
                    status_code=route.status_code,
                    responses=route.responses,
                    tags=route.tags,
                    dependencies=route.dependencies,
                    summary=route.summary,
                    description=route.description,
                    response_class=route.response_class,
                    response_model=route.response_model,
                    include_in_schema=route.include_in_schema,
                    name=route.name,
                    openapi_extra=route.openapi_extra,
                )
    return aliases
