"""Per-request context: the caller's tenant, the services, the correlation id.

The tenant is read from API Gateway's request context, never from anything the caller sends: the
authorizer's principal id (the deployed API's Bearer-key authorizer, functions/authorizer), else
the IAM caller, else the API key id. Without any of them (local use) the tenant is `default`,
or, under `LOCAL_AUTH=keys`, the tenant of the request's Bearer key (or of a JWT from
`JWT_ISSUER`), checked by the same code as the authorizer's. Buffered functions get the context
in the event Mangum puts in the ASGI scope; streaming functions get it from the Lambda Web
Adapter in the `x-amzn-request-context` header, which is trusted only inside Lambda (there the
adapter sets it, replacing anything a caller sent; locally a caller could forge it).
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import Request

from .. import aws, json_text
from ..errors import Unauthenticated
from ..log import logger
from ..services import Services
from ..settings import DEFAULT_TENANT

WEB_ADAPTER_HEADER = "x-amzn-request-context"


def tenant_from_event(event: dict[str, Any] | None) -> str | None:
    """The caller API Gateway vouches for, or None."""
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
    return None


def request_event(request: Request) -> dict[str, Any] | None:
    """The API Gateway event (or just its request context) this request came with, if any."""
    event = request.scope.get("aws.event")
    if event is not None:
        return event
    header = request.headers.get(WEB_ADAPTER_HEADER)
    if header and request.app.state.services.settings.trust_request_context_header:
        try:
            return {"requestContext": json_text.loads(header)}
        except ValueError:
            return None
    return None


async def tenant(request: Request) -> str:
    """FastAPI dependency: the tenant of this request. Also tags the request's log lines with
    API Gateway's request id. A coroutine, as every dependency here: FastAPI runs a plain
    function in a worker thread, a hop that costs more than the function."""
    event = request_event(request)
    request_id = ((event or {}).get("requestContext") or {}).get("requestId")
    if request_id:
        logger.set_correlation_id(request_id)
    caller = tenant_from_event(event)
    if caller is not None:
        return caller
    if request.app.state.services.settings.local_auth == "keys":
        return await asyncio.to_thread(key_tenant, request)
    if request.app.state.services.settings.require_caller:  # never fall open to a shared tenant
        raise Unauthenticated("No caller identity in the request context")
    return DEFAULT_TENANT


def key_tenant(request: Request) -> str:
    """The tenant of the request's `Authorization: Bearer <key>`, or of a JWT from JWT_ISSUER
    (the local server's stand-in for the API's authorizer), else 401."""
    from ..auth import InvalidKey, KeyStore
    from ..auth.authorizer import authenticate_caller
    from ..auth.tokens import verifier

    services = request.app.state.services
    store = KeyStore(services.dynamodb or aws.client("dynamodb"), services.settings.table_name)
    header = request.headers.get("authorization")
    try:
        return authenticate_caller(header, store, verifier(services.settings)).tenant
    except InvalidKey as err:
        logger.info("Unauthorized", reason=str(err))
        raise Unauthenticated("Send a valid key: Authorization: Bearer <key>") from None


async def get_services(request: Request) -> Services:
    """FastAPI dependency: the stores and engine the app was built with."""
    return request.app.state.services
