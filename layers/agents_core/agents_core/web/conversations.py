"""Routes of the OpenAI Conversations API under /v1/conversations (and, as every OpenAI route
here, under /v1/openai/v1: `web/common.py` ALIASES). `GET /v1/conversations`, a tenant's
conversations newest first, is beyond OpenAI's API."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Response

from ..api.common import Order
from ..api.conversations import (
    AddItemsRequest,
    Conversation,
    ConversationDeletedResource,
    ConversationItemList,
    ConversationList,
    CreateConversationRequest,
    UpdateConversationRequest,
)
from .common import ID_PATTERN, json_response
from .deps import Svc, Tenant

ConversationId = Annotated[str, Path(pattern=ID_PATTERN)]
ItemId = Annotated[str, Path(pattern=ID_PATTERN)]

#: OpenAI's `include` values: accepted; items come back whole as stored, so each is honoured
#: where the item has the field (web search sources, input image URLs) and empty otherwise.
Includable = Literal[
    "web_search_call.action.sources",
    "web_search_call.results",
    "code_interpreter_call.outputs",
    "computer_call_output.output.image_url",
    "file_search_call.results",
    "message.input_image.image_url",
    "message.output_text.logprobs",
    "reasoning.encrypted_content",
]
Include = Annotated[list[Includable] | None, Query()]

router = APIRouter(prefix="/v1/conversations", tags=["Conversations"])


@router.post("", responses={200: {"model": Conversation}})
def create_conversation(body: CreateConversationRequest, tenant: Tenant, svc: Svc) -> Response:
    return json_response(svc.conversations.create(tenant, body))


@router.get("", responses={200: {"model": ConversationList}})
def list_conversations(
    tenant: Tenant,
    svc: Svc,
    after: Annotated[str | None, Query(pattern=ID_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> Response:
    """Newest first; `after` is the last id of the previous page."""
    return json_response(svc.conversations.list(tenant, after=after, limit=limit))


@router.get("/{conversation_id}", responses={200: {"model": Conversation}})
def get_conversation(conversation_id: ConversationId, tenant: Tenant, svc: Svc) -> Response:
    return json_response(svc.conversations.get(tenant, conversation_id))


@router.post("/{conversation_id}", responses={200: {"model": Conversation}})
def update_conversation(
    conversation_id: ConversationId, body: UpdateConversationRequest, tenant: Tenant, svc: Svc
) -> Response:
    return json_response(svc.conversations.update(tenant, conversation_id, body.metadata))


@router.delete("/{conversation_id}", responses={200: {"model": ConversationDeletedResource}})
def delete_conversation(conversation_id: ConversationId, tenant: Tenant, svc: Svc) -> Response:
    svc.conversations.delete(tenant, conversation_id)
    return json_response(ConversationDeletedResource(id=conversation_id))


@router.post("/{conversation_id}/items", responses={200: {"model": ConversationItemList}})
def add_items(
    conversation_id: ConversationId,
    body: AddItemsRequest,
    tenant: Tenant,
    svc: Svc,
    include: Include = None,
) -> Response:
    return json_response(svc.conversations.add_items(tenant, conversation_id, body.items))


@router.get("/{conversation_id}/items", responses={200: {"model": ConversationItemList}})
def list_items(
    conversation_id: ConversationId,
    tenant: Tenant,
    svc: Svc,
    after: Annotated[str | None, Query(pattern=ID_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    order: Order = Order.desc,
    include: Include = None,
) -> Response:
    """Items in `order` (newest first by default); `after` is an item id (exclusive)."""
    page = svc.conversations.list_items(
        tenant, conversation_id, after=after, limit=limit, descending=order == Order.desc
    )
    return json_response(page)


@router.get("/{conversation_id}/items/{item_id}", responses={200: {"model": dict[str, Any]}})
def get_item(
    conversation_id: ConversationId,
    item_id: ItemId,
    tenant: Tenant,
    svc: Svc,
    include: Include = None,
) -> Response:
    return json_response(svc.conversations.get_item(tenant, conversation_id, item_id))


@router.delete("/{conversation_id}/items/{item_id}", responses={200: {"model": Conversation}})
def delete_item(
    conversation_id: ConversationId, item_id: ItemId, tenant: Tenant, svc: Svc
) -> Response:
    """OpenAI answers with the conversation."""
    return json_response(svc.conversations.delete_item(tenant, conversation_id, item_id))
