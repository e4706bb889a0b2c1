"""The route of a run's POST (create a turn, resume one, create a response), whose usual request
skips FastAPI's per-request solving of its parameters.

For every request FastAPI inspects each parameter's annotation, validates the path and the body
through its model fields (the body parsed by `json` first), and calls each dependency through
the same machinery: some 6% of the instructions a streamed turn's function executes
(bench/instructions.py). A DirectRoute works out at startup where each argument comes from;
for a request whose path parameters are valid and whose JSON body validates, it builds them
itself (the body by pydantic's JSON parser, in one pass; each dependency called as it is). Every
other request (a body that does not validate, another content type, an invalid id, a header a
dependency reads) goes to FastAPI's own handler, so what it answers is FastAPI's, as is the
route's OpenAPI entry.

The app (`web.app.App`) hands a request a DirectRoute matches to `serve_direct`, past the
middleware stack and the router; what the route does not take by itself goes through them.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from .encoding import replayed

_JSON_TYPES = ("application/json",)


class DirectRoute(APIRoute):
    """An APIRoute whose endpoint takes path parameters, one JSON body model and dependencies
    that are coroutines of the request (and of optional headers), and answers a Response."""

    def get_route_handler(self) -> Callable[[Request], Awaitable[Response]]:
        standard = super().get_route_handler()
        self.arguments = _Arguments(self)

        async def handler(request: Request) -> Response:
            args = await self.arguments.of(request)
            if args is None:
                return await standard(request)
            return await self.answer(args)

        return handler

    async def answer(self, args: dict[str, Any]) -> Response:
        """The endpoint's answer to the arguments `arguments.of` built."""
        assert self.dependant.call is not None
        response = await self.dependant.call(**args)
        if not isinstance(response, Response):
            raise TypeError(f"{self.path}: a DirectRoute's endpoint answers a Response")
        return response


async def serve_direct(
    app: FastAPI,
    route: DirectRoute,
    matched: dict[str, Any],
    scope: dict[str, Any],
    receive: Any,
    send: Any,
    stack: Callable[[Any, Any, Any], Awaitable[None]],
) -> None:
    """Answer a request that `route` matched (`matched`: the scope with its path parameters)
    as the app would, without the app's middleware and routing (`web.app.App`): its arguments
    built here, an exception answered by the app's handler of it. A request a DirectRoute
    does not take by itself (a compressed body, one that does not validate) goes through the
    app's `stack` as it came, its body handed on."""
    if any(name == b"content-encoding" for name, _ in scope["headers"]):
        await stack(scope, receive, send)  # the app's middleware decompresses it first
        return
    body = await _body(receive)
    if body is None:
        return  # the client went before its body had come: nobody to answer
    request = Request(matched, replayed(body, receive))
    try:
        args = await route.arguments.of(request)
        if args is None:
            await stack(scope, replayed(body, receive), send)
            return
        response = await route.answer(args)
    except Exception as exc:
        await _handled(app, request, exc, send)
        return
    await response(matched, request.receive, send)


class _Arguments:
    """Where a DirectRoute's endpoint's arguments come from; `of(request)` builds them, or
    gives None where FastAPI's handler must (anything but a valid request)."""

    def __init__(self, route: APIRoute) -> None:
        dependant = route.dependant
        _refuse_unless(
            not (dependant.query_params or dependant.header_params or dependant.cookie_params)
            and _plain(dependant),
            route,
            "takes query, header or cookie parameters, or FastAPI's special ones",
        )
        self.path = [(field.name, field) for field in dependant.path_params]
        self.body: tuple[str, type[BaseModel]] | None = None
        if route.body_field is not None:
            model = route.body_field.field_info.annotation
            _refuse_unless(
                len(dependant.body_params) == 1
                and isinstance(model, type)
                and issubclass(model, BaseModel),
                route,
                "has a body that is not one pydantic model",
            )
            self.body = (route.body_field.name, model)
        self.dependencies = []
        for sub in dependant.dependencies:
            _refuse_unless(
                inspect.iscoroutinefunction(sub.call)
                and not (sub.dependencies or sub.path_params or sub.query_params)
                and not (sub.cookie_params or sub.body_params)
                and _plain(sub)
                and all(not header.field_info.is_required() for header in sub.header_params),
                route,
                f"depends on {sub.call!r}, which is not a coroutine of the request",
            )
            headers = [header.field_info.alias or header.name for header in sub.header_params]
            self.dependencies.append((sub.name, sub.call, sub.request_param_name, headers))

    async def of(self, request: Request) -> dict[str, Any] | None:
        args: dict[str, Any] = {}
        for name, field in self.path:
            value, errors = field.validate(request.path_params[name], {}, loc=("path", name))
            if errors:
                return None
            args[name] = value
        if self.body is not None:
            content_type = request.headers.get("content-type", "")
            if content_type.partition(";")[0].strip().lower() not in _JSON_TYPES:
                return None
            try:
                body = await request.body()
            except Exception:  # noqa: BLE001 - the client went mid-body: FastAPI answers it
                return None
            name, model = self.body
            try:
                args[name] = model.model_validate_json(body)
            except ValidationError:
                return None
        for name, call, request_name, headers in self.dependencies:
            if any(h in request.headers or h.replace("_", "-") in request.headers for h in headers):
                return None  # FastAPI validates it, and calls the dependency with it
            args[name] = await call(**({request_name: request} if request_name else {}))
        return args


async def _body(receive: Any) -> bytes | None:
    """The request's whole body; None when the client went first."""
    parts = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts)


async def _handled(app: FastAPI, request: Request, exc: Exception, send: Any) -> None:
    """`exc` answered as the app's middleware answers it: by the handler of an HTTPException's
    status or of its nearest class, else by the app's handler of every error, which answers
    and raises it again for the server to log; raised unanswered without one."""
    handlers = app.exception_handlers
    handler = None
    if isinstance(exc, StarletteHTTPException) and exc.status_code != 500:
        handler = handlers.get(exc.status_code)
    if handler is None:
        classes = (c for c in type(exc).__mro__ if c is not Exception and c in handlers)
        handler = next((handlers[c] for c in classes), None)
    unexpected = handler is None
    if unexpected:
        handler = handlers.get(500) or handlers.get(Exception)
        if handler is None:
            raise exc
    response = handler(request, exc)
    if inspect.isawaitable(response):
        response = await response
    await response(request.scope, request.receive, send)
    if unexpected:
        raise exc


def _plain(dependant: Any) -> bool:
    """Takes none of FastAPI's special parameters but the request, and is not a security scope."""
    return not (
        dependant.websocket_param_name
        or dependant.http_connection_param_name
        or dependant.response_param_name
        or dependant.background_tasks_param_name
        or dependant.security_scopes_param_name
        or dependant.own_oauth_scopes
    )


def _refuse_unless(condition: bool, route: APIRoute, why: str) -> None:
    if not condition:
        raise ValueError(f"{route.path}: not a DirectRoute's endpoint: it {why}")
