"""Per-request context: the caller's tenant, the store, the correlation id.

The tenant is read from API Gateway's request context, never from anything the caller sends:
the authorizer's principal id, else the IAM caller, else the API key id. Without any of them
(local use) the tenant is `default`.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request

from ..services import Services

DEFAULT_TENANT = "default"


def tenant_from_event(event: dict[str, Any] | None) -> str:
    ctx = (event or {}).get("requestContext") or {}
    authorizer = ctx.get("authorizer") or {}
    identity = ctx.get("identity") or {}
    for candidate in (
        authorizer.get("principalId"),
        identity.get("userArn") or identity.get("caller"),
        identity.get("apiKeyId"),
    ):
        if candidate:
            return str(candidate)
    return DEFAULT_TENANT


def request_id_from_event(event: dict[str, Any] | None) -> str | None:
    return ((event or {}).get("requestContext") or {}).get("requestId")


def tenant(request: Request) -> str:
    """FastAPI dependency: the tenant of this request (Mangum puts the event in the scope)."""
    return tenant_from_event(request.scope.get("aws.event"))


def get_services(request: Request) -> Services:
    """FastAPI dependency: the stores and engine the app was built with."""
    return request.app.state.services
