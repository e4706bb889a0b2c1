"""Routes of shields and safety: the Llama Stack shields registry (`/v1/shields`), run-shield
(`/v1/safety/run-shield`) and OpenAI-compatible moderations (`/v1/moderations`, also under
`/v1/openai/v1/`), where `model` names a shield."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from ..api.safety import (
    SHIELD_ID_PATTERN,
    ListShieldsResponse,
    ModerationObject,
    ModerationRequest,
    ModerationTextInput,
    RegisterShieldRequest,
    RunShieldRequest,
    RunShieldResponse,
    Shield,
)
from ..errors import InvalidRequest
from ..services.safety import text_of
from .common import json_response
from .deps import Svc, Tenant

ShieldIdentifier = Annotated[str, Path(pattern=SHIELD_ID_PATTERN)]

shields_router = APIRouter(prefix="/v1/shields", tags=["Shields"])
safety_router = APIRouter(tags=["Safety"])


@shields_router.get("", responses={200: {"model": ListShieldsResponse}})
def list_shields(tenant: Tenant, svc: Svc) -> Response:
    return json_response(ListShieldsResponse(data=svc.safety.list(tenant)))


@shields_router.post("", responses={200: {"model": Shield}})
def register_shield(body: RegisterShieldRequest, tenant: Tenant, svc: Svc) -> Response:
    return json_response(svc.safety.register(tenant, body))


@shields_router.get("/{identifier:path}", responses={200: {"model": Shield}})
def get_shield(identifier: ShieldIdentifier, tenant: Tenant, svc: Svc) -> Response:
    return json_response(svc.safety.get(tenant, identifier))


@shields_router.delete("/{identifier:path}", status_code=204)
def delete_shield(identifier: ShieldIdentifier, tenant: Tenant, svc: Svc) -> Response:
    svc.safety.delete(tenant, identifier)
    return Response(status_code=204)


@safety_router.post("/v1/safety/run-shield", responses={200: {"model": RunShieldResponse}})
async def run_shield(body: RunShieldRequest, tenant: Tenant, svc: Svc) -> Response:
    messages = [{"role": m.role, "content": text_of(m.content)} for m in body.messages]
    violation = await svc.safety.run_shield(tenant, body.shield_id, messages, body.params)
    return json_response(RunShieldResponse(violation=violation))


async def _moderations(body: ModerationRequest, tenant: str, svc) -> Response:
    if body.model is None:
        raise InvalidRequest("model is required: the id of the shield to run (GET /v1/shields)")
    inputs = [body.input] if isinstance(body.input, str) else body.input
    texts = []
    for item in inputs:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, ModerationTextInput):
            texts.append(item.text)
        else:
            raise InvalidRequest("input: images are not supported; send text inputs")
    return json_response(await svc.safety.moderate(tenant, body.model, texts))


@safety_router.post("/v1/moderations", responses={200: {"model": ModerationObject}})
async def create_moderation(body: ModerationRequest, tenant: Tenant, svc: Svc) -> Response:
    return await _moderations(body, tenant, svc)


@safety_router.post("/v1/openai/v1/moderations", responses={200: {"model": ModerationObject}})
async def create_moderation_openai(body: ModerationRequest, tenant: Tenant, svc: Svc) -> Response:
    return await _moderations(body, tenant, svc)
