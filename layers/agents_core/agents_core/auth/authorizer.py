"""API Gateway's Lambda authorizer for Bearer keys, for both event shapes it sends.

The credential is a key of this service or, when the stack names an issuer (JwtIssuer), a JWT
from that issuer (agents_core.auth.tokens); a JWT's tenant gets the tenant's usage plan key from
the table like a key's. TOKEN events carry the `Authorization` header as `authorizationToken`;
REQUEST events carry the headers (in the caller's spelling). Either way the answer allows the
whole API for the key's tenant (`principalId`, and `context.tenant`), because API Gateway caches
it per header value and reuses it for every route; with the API's key source AUTHORIZER,
`usageIdentifierKey` puts the request in the tenant's usage plan. Any failure raises
`Unauthorized`, which API Gateway answers with 401.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..log import logger
from .keys import InvalidKey, Principal
from .store import KeyStore, authenticate
from .tokens import JwtVerifier, jwt_from_header


class Unauthorized(Exception):
    """Raised with exactly this message, API Gateway answers 401 Unauthorized."""

    def __init__(self) -> None:
        super().__init__("Unauthorized")


def authorization_header(event: dict[str, Any]) -> str | None:
    """The Authorization header of a TOKEN or REQUEST authorizer event."""
    if event.get("type") == "TOKEN":
        return event.get("authorizationToken")
    for name, value in (event.get("headers") or {}).items():
        if name.lower() == "authorization":
            return value
    return None


def api_arn(method_arn: str) -> str:
    """`arn:...:{api}/{stage}/*` from `arn:...:{api}/{stage}/{verb}/{path}`: every route of the
    stage, so the cached answer serves the caller's next request to any route."""
    api, stage, *_ = method_arn.split("/")
    if not api.startswith("arn:") or not stage:
        raise ValueError(method_arn)
    return f"{api}/{stage}/*"


def authenticate_caller(
    header: str | None, store: KeyStore, jwts: JwtVerifier | None = None
) -> Principal:
    """The caller of a request with this `Authorization` header: a key's, or (when `jwts` is
    given) a JWT's, with the tenant's usage plan key; else InvalidKey."""
    token = jwt_from_header(header) if jwts else None
    if token is None:
        return authenticate(header, store)
    principal = jwts.authenticate(token)
    usage = store.usage_key(principal.tenant)
    if usage is None:
        logger.warning(
            "Tenant has no usage plan key: API Gateway will refuse it"
            " (scripts/api_keys.py attach <tenant>)",
            tenant=principal.tenant,
        )
        return principal
    return replace(principal, usage_key=usage["usage_key"])


def authorize(
    event: dict[str, Any], store: KeyStore, jwts: JwtVerifier | None = None
) -> dict[str, Any]:
    """The authorizer's answer to one event, or Unauthorized."""
    try:
        resource = api_arn(event.get("methodArn") or "")
        principal = authenticate_caller(authorization_header(event), store, jwts)
    except (InvalidKey, ValueError) as err:
        logger.info("Unauthorized", reason=str(err), type=event.get("type"))
        raise Unauthorized() from None
    answer: dict[str, Any] = {
        "principalId": principal.tenant,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": resource}
            ],
        },
        "context": {"tenant": principal.tenant, "key_id": principal.key_id},
    }
    if principal.usage_key:
        answer["usageIdentifierKey"] = principal.usage_key
    logger.info("Authorized", tenant=principal.tenant, key_id=principal.key_id)
    return answer
