"""Routes of the responses function: the OpenAI Responses API under /v1/openai/v1/responses."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response

from ..api.common import Order
from ..api.responses import (
    MAX_MODEL_ID_LENGTH,
    CreateOpenaiResponseRequest,
    ListOpenAIResponseInputItem,
    ListOpenAIResponseObject,
    OpenAIDeleteResponseObject,
    OpenAIResponseObject,
)
from .common import ID_PATTERN, json_response
from .deps import Svc, Tenant
from .sse import sse_response

ResponseId = Annotated[str, Path(pattern=ID_PATTERN)]

router = APIRouter(prefix="/v1/openai/v1/responses", tags=["Responses"])


@router.post("", responses={200: {"model": OpenAIResponseObject}})
async def create_response(body: CreateOpenaiResponseRequest, tenant: Tenant, svc: Svc) -> Response:
    if body.background:  # answered at once, `queued`; the background worker runs it
        queued = await svc.background.submit(tenant, body)
        return json_response(queued)
    run = await svc.responses_engine.start(tenant, body)
    if run.stream:
        return sse_response(run.events(), _frame)
    return json_response(await run.result())  # RunFailed: the error handler answers


def _frame(event: Any) -> str:
    return f"event: {event.type}\ndata: {event.model_dump_json()}\n\n"


@router.get("", responses={200: {"model": ListOpenAIResponseObject}})
def list_responses(
    tenant: Tenant,
    svc: Svc,
    after: Annotated[str | None, Query(pattern=ID_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    model: Annotated[str | None, Query(max_length=MAX_MODEL_ID_LENGTH)] = None,
    order: Order = Order.desc,
) -> Response:
    data, has_more = svc.responses.list(
        tenant, after=after, limit=limit, model=model, descending=order == Order.desc
    )
    return json_response(
        ListOpenAIResponseObject(
            data=data,
            has_more=has_more,
            first_id=data[0].id if data else None,
            last_id=data[-1].id if data else None,
        )
    )


@router.get("/{response_id}", responses={200: {"model": OpenAIResponseObject}})
def get_response(response_id: ResponseId, tenant: Tenant, svc: Svc) -> Response:
    stored = svc.responses.get(tenant, response_id)
    return json_response(OpenAIResponseObject.model_validate(stored.model_dump(exclude={"input"})))


@router.post("/{response_id}/cancel", responses={200: {"model": OpenAIResponseObject}})
def cancel_response(response_id: ResponseId, tenant: Tenant, svc: Svc) -> Response:
    """Cancel a background response: queued, it never runs; running, it stops at its next
    event boundary and keeps what it produced. A finished one is answered as it is; a
    response not created with `background: true` is a 400."""
    cancelled = svc.responses.cancel(tenant, response_id)
    return json_response(
        OpenAIResponseObject.model_validate(cancelled.model_dump(exclude={"input"}))
    )


@router.get("/{response_id}/input_items", responses={200: {"model": ListOpenAIResponseInputItem}})
def list_input_items(
    response_id: ResponseId,
    tenant: Tenant,
    svc: Svc,
    after: str | None = None,
    before: str | None = None,
    include: Annotated[list[str] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    order: Order = Order.desc,
) -> Response:
    """Items in `order`; `after` / `before` name item ids bounding the page (exclusive)."""
    items = list(svc.responses.get(tenant, response_id).input)
    if order == Order.desc:
        items.reverse()
    ids = [item.id for item in items]
    start, end = 0, len(items)
    if after is not None:
        start = ids.index(after) + 1 if after in ids else len(items)
    if before is not None:
        end = ids.index(before) if before in ids else 0
    page = items[start:end]
    data = page[:limit]
    return json_response(
        ListOpenAIResponseInputItem(
            data=data,
            has_more=len(page) > limit,
            first_id=data[0].id if data else None,
            last_id=data[-1].id if data else None,
        )
    )


@router.delete("/{response_id}", responses={200: {"model": OpenAIDeleteResponseObject}})
def delete_response(response_id: ResponseId, tenant: Tenant, svc: Svc) -> Response:
    svc.responses.delete(tenant, response_id)
    return json_response(OpenAIDeleteResponseObject(id=response_id))
