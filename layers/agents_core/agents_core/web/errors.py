"""Error responses: every failure is JSON `{"detail": ...}` with the status a client can act on.

400 bad input (with the validation message), 404 missing or another tenant's, 409 state
conflict, 413 too large to store, 503 AWS unavailable (retry later). Anything unexpected is
logged and answered 500 without details.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import aws
from ..engine.errors import InvalidRequest
from ..inference.types import UnsupportedRequest
from ..store import Conflict, InvalidInput, NotFound, TooLarge
from .log import logger


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


#: Errors the stores and engines raise on purpose, and the status each means to a client.
STATUS_OF = {
    InvalidInput: 400,
    InvalidRequest: 400,
    UnsupportedRequest: 400,
    NotFound: 404,
    Conflict: 409,
    TooLarge: 413,
}


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _detail(400, validation_message(list(exc.errors())))

    async def _known(_: Request, exc: Exception) -> JSONResponse:
        return _detail(STATUS_OF[type(exc)], str(exc))

    for error in STATUS_OF:
        app.add_exception_handler(error, _known)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _detail(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        if aws.unavailable(exc):
            logger.warning("AWS unavailable", extra={"error": str(exc)})
            return _detail(503, "Storage is unavailable for a moment; retry the request")
        logger.exception("unhandled error")
        return _detail(500, "Internal server error")
