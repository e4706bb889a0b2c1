"""The FastAPI app factory shared by every function and by the local server."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI
from pydantic.warnings import UnsupportedFieldAttributeWarning

from ..services import Services
from .common import alias_prefix
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
    app.add_middleware(ServeAliases)
    for router in routers:
        app.include_router(router)
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


class ServeAliases:
    """ASGI middleware: a request under an alias prefix (`common.ALIASES`) is routed as the
    path its route is defined at. Registering each route again under its alias had FastAPI
    build its parameters' fields once more at init (the responses function's init: 3,181 ->
    3,090 M instructions). The OpenAPI document lists the aliases (`web/openapi.py`)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and (found := alias_prefix(scope["path"])) is not None:
            alias, prefix = found  # ASCII both: the raw path begins with the alias as it is
            raw = scope.get("raw_path") or scope["path"].encode()
            scope = {
                **scope,
                "path": prefix + scope["path"][len(alias) :],
                "raw_path": prefix.encode() + raw[len(alias) :],
            }
        await self.app(scope, receive, send)
