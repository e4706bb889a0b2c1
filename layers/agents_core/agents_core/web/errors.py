"""Error responses: every failure is JSON with the status a client can act on: `{"detail": ...}`
on Llama Stack's routes, as its contract gives it, and OpenAI's envelope `{"error": {"message",
"type", "param", "code"}}` on the routes shaped after OpenAI's API (`openai_shaped`), which its
SDKs read (`code: "unknown_parameter"` with `param` naming a field no spec knows).

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


#: The first path segment (after `/v1/` or `/v1/openai/v1/`) of the routes shaped after
#: OpenAI's API.
OPENAI_ROUTES = frozenset(
    {
        "responses",
        "conversations",
        "files",
        "vector_stores",
        "embeddings",
        "moderations",
        "models",
        "prompts",
    }
)


def openai_shaped(path: str) -> bool:
    for prefix in ("/v1/openai/v1/", "/v1/"):
        if path.startswith(prefix):
            return path[len(prefix) :].split("/", 1)[0] in OPENAI_ROUTES
    return False


def error_type(status: int) -> str:
    """OpenAI's `error.type` for a status."""
    if status == 401:
        return "authentication_error"
    if status == 403:
        return "permission_error"
    if status == 429:
        return "rate_limit_error"
    return "server_error" if status >= 500 else "invalid_request_error"


def error_response(
    request: Request,
    status: int,
    message: str,
    *,
    param: str | None = None,
    code: str | None = None,
) -> JSONResponse:
    """The error in the shape the route's clients read."""
    if not openai_shaped(request.url.path):
        return _detail(status, message)
    error = {"message": message, "type": error_type(status), "param": param, "code": code}
    return JSONResponse({"error": error}, status_code=status)


#: pydantic's error types as OpenAI's codes.
_CODES = {"extra_forbidden": "unknown_parameter", "missing": "missing_required_parameter"}


def _param_and_code(errors: list[Any]) -> tuple[str | None, str | None]:
    """The first problem's field, as OpenAI names it (`tools[4].type`), and its code."""
    if not errors:
        return None, None
    first = errors[0]
    param = ""
    for part in first.get("loc", ()):
        if part == "body":
            continue
        param += f"[{part}]" if isinstance(part, int) else f".{part}" if param else str(part)
    return param or None, _CODES.get(first.get("type", ""), "invalid_value")


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
            return error_response(
                request,
                415,
                f"Send the body as JSON with Content-Type: application/json (got {shown})",
            )
        errors = list(exc.errors())
        param, code = _param_and_code(errors)
        return error_response(request, 400, validation_message(errors), param=param, code=code)

    @app.exception_handler(ServiceError)
    async def _known(request: Request, exc: ServiceError) -> JSONResponse:
        if isinstance(exc, RunFailed):
            return JSONResponse(exc.body(), status_code=exc.status)
        return error_response(request, exc.status, str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        answer = error_response(request, exc.status_code, str(exc.detail))
        if exc.status_code == 405:  # Starlette's own `Allow` names one route's methods only
            answer.headers["Allow"] = ", ".join(allowed_methods(request))
        return answer

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        if status_of(exc) == 503:
            logger.warning("AWS unavailable", extra={"error": str(exc)})
            return error_response(
                request, 503, "Storage is unavailable for a moment; retry the request"
            )
        logger.exception("unhandled error")
        return error_response(request, 500, "Internal server error")
