"""The FastAPI app factory shared by every function and by the local server."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI
from pydantic.warnings import UnsupportedFieldAttributeWarning
from starlette.routing import Match

from ..services import Services
from .common import alias_prefix
from .direct_route import DirectRoute, serve_direct
from .encoding import DecompressBodies
from .errors import install_error_handlers
from .openapi import install_openapi


def create_app(*routers: APIRouter, services: Services, lifespan: Any = None) -> FastAPI:
    """An app serving `routers` over `services`; each function passes its own router(s).

    Their routes join the app's own list, as built when their modules were imported (no prefix,
    tags or dependencies to add). FastAPI's `include_router` would build each route's
    parameters and response fields once more, at the first request any route matches or not
    (the readiness check, within init: 29 ms of CPU at a full core in the responses function),
    and route every later request through a layer of contexts on its way."""
    # FastAPI's body parameters, on models whose schema is built on first use (`defer_build`,
    # for cold starts), trip a false positive of pydantic's: the alias is FastAPI's, and works.
    warnings.filterwarnings(
        "ignore", message="The 'alias' attribute", category=UnsupportedFieldAttributeWarning
    )
    app = App(title="serverless-agents", version="0.1.0", lifespan=lifespan)
    app.state.services = services
    app.add_middleware(DecompressBodies)
    install_error_handlers(app)
    install_openapi(app)
    app.add_middleware(ServeAliases)
    for router in routers:  # each route as its router built it (not `include_router`)
        app.router.routes.extend(router.routes)
    app.direct_routes = [
        r for router in routers for r in router.routes if isinstance(r, DirectRoute)
    ]
    return app


class App(FastAPI):
    """The app, whose runs' POSTs go straight to their DirectRoute: a request one matches is
    served by `direct_route.serve_direct` without passing through the middleware stack and the
    router, some 20 frames deep (each await of the request's task resumes them all: 3-5% of
    a run's instructions, bench/instructions.py). The middleware it passes by are FastAPI's own
    (errors: the app's handlers answer as they would; a body limit the app does not set), the
    aliases (applied here too) and the decompression (a compressed body goes the long way).
    Any other middleware added would be passed by too: `direct_routes` is refused then."""

    direct_routes: list[DirectRoute] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and self.direct_routes:
            routed = ServeAliases.routed(scope)
            for route in self.direct_routes:
                match, child = route.matches(routed)
                if match is Match.FULL:
                    matched = {**routed, **child, "app": self}
                    await serve_direct(self, route, matched, scope, receive, send, super().__call__)
                    return
        await super().__call__(scope, receive, send)

    def build_middleware_stack(self) -> Any:
        added = {m.cls for m in self.user_middleware}
        if self.direct_routes and not added <= {DecompressBodies, ServeAliases}:
            raise ValueError(f"the runs' POSTs would pass by middleware: {added}")
        return super().build_middleware_stack()


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
        await self.app(self.routed(scope) if scope["type"] == "http" else scope, receive, send)

    @staticmethod
    def routed(scope: dict[str, Any]) -> dict[str, Any]:
        """An HTTP request's scope with the path its route is defined at."""
        found = alias_prefix(scope["path"])
        if found is None:
            return scope
        alias, prefix = found  # ASCII both: the raw path begins with the alias as it is
        raw = scope.get("raw_path") or scope["path"].encode()
        return {
            **scope,
            "path": prefix + scope["path"][len(alias) :],
            "raw_path": prefix.encode() + raw[len(alias) :],
        }
