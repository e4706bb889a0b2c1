"""Routes of the Prompts API (OGX's `/v1/prompts`): versioned prompt templates a response can
be created from (`prompt` on `responses.create`)."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from ..api.prompts import (
    PROMPT_ID,
    CreatePromptRequest,
    ListPromptsResponse,
    Prompt,
    SetDefaultVersionRequest,
    UpdatePromptRequest,
)
from ..ids import new_id
from .common import json_response
from .deps import Svc, Tenant

PromptId = Annotated[str, Path(pattern=PROMPT_ID)]

router = APIRouter(prefix="/v1/prompts", tags=["Prompts"])


def new_prompt_id() -> str:
    """`pmpt_` and 48 hex digits, as OGX shapes them; the first 32 a UUIDv7's, so a tenant's
    prompts list in the order they were made."""
    return f"pmpt_{new_id().replace('-', '')}{secrets.token_hex(8)}"


@router.get("", responses={200: {"model": ListPromptsResponse}})
def list_prompts(tenant: Tenant, svc: Svc) -> Response:
    """Every prompt, at its default version."""
    return json_response(ListPromptsResponse(data=svc.prompts.list(tenant)))


@router.post("", responses={200: {"model": Prompt}})
def create_prompt(body: CreatePromptRequest, tenant: Tenant, svc: Svc) -> Response:
    prompt = Prompt(
        prompt_id=new_prompt_id(),
        version=1,
        prompt=body.prompt,
        variables=body.variables or [],
        is_default=True,
    )
    svc.prompts.create(tenant, prompt)
    return json_response(prompt)


@router.get("/{prompt_id}", responses={200: {"model": Prompt}})
def get_prompt(
    prompt_id: PromptId,
    tenant: Tenant,
    svc: Svc,
    version: Annotated[int | None, Query(ge=1)] = None,
) -> Response:
    """A version of the prompt; its default version without `version`."""
    return json_response(svc.prompts.get(tenant, prompt_id, version))


@router.post("/{prompt_id}", responses={200: {"model": Prompt}})
def update_prompt(
    prompt_id: PromptId, body: UpdatePromptRequest, tenant: Tenant, svc: Svc
) -> Response:
    """A new version after `version`, which must be the latest (409 otherwise: another
    update came first)."""
    prompt = Prompt(
        prompt_id=prompt_id,
        version=body.version + 1,
        prompt=body.prompt,
        variables=body.variables or [],
        is_default=body.set_as_default,
    )
    svc.prompts.add_version(tenant, prompt, after=body.version, make_default=body.set_as_default)
    return json_response(prompt)


@router.post("/{prompt_id}/set-default-version", responses={200: {"model": Prompt}})
def set_default_version(
    prompt_id: PromptId, body: SetDefaultVersionRequest, tenant: Tenant, svc: Svc
) -> Response:
    return json_response(svc.prompts.set_default(tenant, prompt_id, body.version))


@router.get("/{prompt_id}/versions", responses={200: {"model": ListPromptsResponse}})
def list_prompt_versions(prompt_id: PromptId, tenant: Tenant, svc: Svc) -> Response:
    return json_response(ListPromptsResponse(data=svc.prompts.versions(tenant, prompt_id)))


@router.delete("/{prompt_id}", status_code=204)
def delete_prompt(prompt_id: PromptId, tenant: Tenant, svc: Svc) -> Response:
    svc.prompts.delete(tenant, prompt_id)
    return Response(status_code=204)
