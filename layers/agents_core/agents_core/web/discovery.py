"""Discovery routes: the models this stack can serve, in Llama Stack's shape (`/v1/models`) and
OpenAI's (`/v1/openai/v1/models`), and `/v1/health`."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Response

from ..api.common import ApiModel
from .common import json_response
from .deps import Svc

router = APIRouter(tags=["Models"])


class Model(ApiModel):
    """A model as Llama Stack lists it, with OpenAI's fields besides (`id`, `object`,
    `created`, `owned_by`), so the openai SDK pointed at `/v1` reads this list too."""

    identifier: str
    provider_id: str
    provider_resource_id: str
    model_type: Literal["llm", "embedding"] = "llm"
    metadata: dict[str, Any] = {}
    type: Literal["model"] = "model"
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ListModelsResponse(ApiModel):
    object: Literal["list"] = "list"
    data: list[Model]


class OpenAIModel(ApiModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class OpenAIListModelsResponse(ApiModel):
    object: Literal["list"] = "list"
    data: list[OpenAIModel]


class HealthInfo(ApiModel):
    status: Literal["OK"] = "OK"


@router.get("/v1/models", responses={200: {"model": ListModelsResponse}})
async def list_models(svc: Svc) -> Response:
    entries = await svc.model_catalog.models()
    return json_response(
        ListModelsResponse(
            data=[
                Model(
                    identifier=e.id,
                    provider_id=e.provider_id,
                    provider_resource_id=e.provider_resource_id,
                    model_type=e.model_type,
                    metadata=e.metadata,
                    id=e.id,
                    created=e.created,
                    owned_by=e.owned_by,
                )
                for e in entries
            ]
        )
    )


@router.get("/v1/openai/v1/models", responses={200: {"model": OpenAIListModelsResponse}})
async def list_openai_models(svc: Svc) -> Response:
    entries = await svc.model_catalog.models()
    return json_response(
        OpenAIListModelsResponse(
            data=[OpenAIModel(id=e.id, created=e.created, owned_by=e.owned_by) for e in entries]
        )
    )


@router.get("/v1/health", responses={200: {"model": HealthInfo}})
def health() -> Response:
    """The function answers: nothing else is called (a probe costs no AWS request)."""
    return json_response(HealthInfo())
