"""The OpenAPI document as the service answers. FastAPI lists 422 for invalid input, where the
service answers 400 (`web/errors.py`), and lists none of the other errors routes answer; here
each operation names the ones its kind of route can answer, all as `{"detail": ...}`."""

from __future__ import annotations

import copy
import re
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from .common import aliased
from .errors import openai_shaped

_DETAIL = {
    "application/json": {
        "schema": {
            "type": "object",
            "properties": {"detail": {"type": "string"}},
            "required": ["detail"],
        }
    }
}
#: OpenAI's error envelope, on the routes shaped after its API (errors.openai_shaped).
_ENVELOPE = {
    "application/json": {
        "schema": {
            "type": "object",
            "properties": {
                "error": {
                    "type": "object",
                    "properties": {
                        "message": {"type": "string"},
                        "type": {"type": "string"},
                        "param": {"type": ["string", "null"]},
                        "code": {"type": ["string", "null"]},
                    },
                    "required": ["message", "type", "param", "code"],
                }
            },
            "required": ["error"],
        }
    }
}

#: Routes that run a turn, a response or a shield: the model or the shield can fail (502) or run
#: out of time (504).
_RUNS = ("/turn", "/resume", "/responses", "/run-shield", "/moderations")
#: Routes whose state can refuse the change: a busy session, a turn not awaiting input, a
#: conversation changed while a response in it ran, items added too fast.
_CONFLICTS = ("/turn", "/resume", "/responses", "/items")
#: Tool routes that ask MCP servers for their tools: a server can fail (502).
_TOOL_LISTINGS = ("/v1/tools", "/v1/tool-runtime/list-tools")


def statuses(path: str, method: str, operation: dict[str, Any]) -> dict[str, str]:
    """The error statuses an operation can answer, with what each means."""
    out = {"400": "Invalid request (the validation message in `detail`)"}
    if "{" in path:
        out["404"] = "Not found, or another tenant's"
    has_body = "requestBody" in operation
    if has_body:
        out["415"] = "The body was not sent as Content-Type: application/json"
    if path.startswith(("/v1/tools", "/v1/tool-runtime/")):
        out["404"] = "No such tool or tool group, or another tenant's"
    if method == "post" and path in (
        "/v1/agents",
        "/v1/agents/{agent_id}/session",
        "/v1/toolgroups",
    ):
        out["413"] = "Too large to store"
    if method == "post" and path == "/v1/toolgroups":
        out["409"] = "The id is registered with another definition"
    if method == "post" and path in ("/v1/files", "/v1/files/uploads"):
        out["413"] = "Larger than a file may be"
    if method == "post" and path == "/v1/vector_stores":
        out["404"] = "A file of `file_ids` not found, or another tenant's"
    if method in ("post", "delete") and path.startswith("/v1/vector_stores/{"):
        out["409"] = "The vector store or its file is being changed by another request: retry"
    if method == "get" and path.startswith(_TOOL_LISTINGS):
        out["502"] = "An MCP server failed to list its tools"
    if method == "get" and path.endswith(("/turn/{turn_id}", "/session/{session_id}")):
        out["413"] = "A turn too large for one read (web/reads.py)"
    agents_delete = method == "delete" and path.startswith("/v1/agents/")
    if agents_delete or (method == "post" and path.endswith(_CONFLICTS)):
        out["409"] = (
            "The state does not allow it (a turn is running or not awaiting input; a"
            " conversation changed meanwhile)"
        )
    if method == "post" and path == "/v1/openai/v1/responses":
        out["404"] = "previous_response_id or conversation not found, or another tenant's"
        out["413"] = "Too many items for the conversation at once (a response in a conversation)"
    if method == "post" and path.endswith(_RUNS):
        out["502"] = "The model or a shield failed (`detail`, and the run's id)"
        out["504"] = "The model or a shield ran out of time"
    out["503"] = "Storage is unavailable for a moment: retry"
    return out


def install_openapi(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
            for path, operations in schema.get("paths", {}).items():
                for method, operation in operations.items():
                    responses = operation.setdefault("responses", {})
                    responses.pop("422", None)
                    content = _ENVELOPE if openai_shaped(path) else _DETAIL
                    for status, meaning in statuses(path, method, operation).items():
                        responses.setdefault(status, {"description": meaning, "content": content})
            schema["paths"] = _with_aliases(schema.get("paths", {}))
            components = schema.get("components", {}).get("schemas", {})
            for unused in ("HTTPValidationError", "ValidationError"):
                components.pop(unused, None)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi


def _with_aliases(paths: dict[str, Any]) -> dict[str, Any]:
    """The paths, each followed by the alias it is also served at (`app.ServeAliases`), whose
    operations are its own but for their ids, which FastAPI makes of the route's name and
    path."""
    out: dict[str, Any] = {}
    for path, operations in paths.items():
        out[path] = operations
        alias = aliased(path)
        if alias is None:
            continue
        copies = copy.deepcopy(operations)
        for method, operation in copies.items():
            own, alias_id = _id_part(path, method), _id_part(alias, method)
            if operation.get("operationId", "").endswith(own):
                operation["operationId"] = operation["operationId"][: -len(own)] + alias_id
        out[alias] = copies
    return out


def _id_part(path: str, method: str) -> str:
    """What FastAPI's operation ids end with for `path` and `method` (`generate_unique_id`)."""
    return re.sub(r"\W", "_", path) + "_" + method
