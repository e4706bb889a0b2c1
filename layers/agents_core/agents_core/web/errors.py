"""Error responses: every failure is JSON `{"detail": ...}` with the status a client can act on.

The status of an error comes from its kind (`agents_core.errors`): 400 bad input (with the
validation message), 404 missing or another tenant's, 409 state conflict, 413 too large to
store, 502/504 the model failed or timed out, 503 AWS unavailable (retry later). Anything
unexpected is logged and answered 500 without details.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import compile_path

from ..errors import RunFailed, ServiceError, status_of
from ..log import logger


def validation_message(errors: list[Any]) -> str:
    """One readable line per problem, e.g. `agent_config.model: Field required`."""
    parts = []
    for error in errors:
        if error.get("type") == "json_invalid":
            parts.append(f"Request body is not valid JSON: {error.get('ctx', {}).get('error', '')}")
            continue
        loc = [str(p) for p in error.get("loc", ()) if p not in ("body",)]
        msg = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
        parts.append(f"{'.'.join(loc)}: {msg}" if loc else msg)
    return "; ".join(parts) or "Invalid request"


def _detail(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status)


def allowed_methods(request: Request) -> list[str]:
    """Every method the documented routes take at the request's path (HEAD wherever GET is).
    A path that is a route of its own (`/v1/files/uploads`) is not also a `{file_id}`."""
    paths = request.app.openapi()["paths"]
    exact = paths.get(request.url.path)
    matching = (
        [exact]
        if exact
        else [
            operations
            for path, operations in paths.items()
            if compile_path(path)[0].match(request.url.path)
        ]
    )
    methods = {method.upper() for operations in matching for method in operations}
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        has_body = request.headers.get("content-length", "0") != "0" or (
            "transfer-encoding" in request.headers
        )
        if has_body and media_type != "application/json":
            # FastAPI reads a body as JSON only under that type (`curl -d` sends a form type).
            shown = media_type or "none"
            return _detail(
                415, f"Send the body as JSON with Content-Type: application/json (got {shown})"
            )
        return _detail(400, validation_message(list(exc.errors())))

    @app.exception_handler(ServiceError)
    async def _known(_: Request, exc: ServiceError) -> JSONResponse:
        if isinstance(exc, RunFailed):
            return JSONResponse(exc.body(), status_code=exc.status)
        return _detail(exc.status, str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        answer = _detail(exc.status_code, str(exc.detail))
        if exc.status_code == 405:  # Starlette's own `Allow` names one route's methods only
            answer.headers["Allow"] = ", ".join(allowed_methods(request))
        return answer

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        if status_of(exc) == 503:
            logger.warning("AWS unavailable", extra={"error": str(exc)})
            return _detail(503, "Storage is unavailable for a moment; retry the request")
        logger.exception("unhandled error")
        return _detail(500, "Internal server error")
