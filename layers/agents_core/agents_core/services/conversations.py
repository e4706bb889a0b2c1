"""The Conversations API over its store: ids minted, items made whole (an id, a message's
content as parts), as OpenAI's API returns them.

    service = ConversationService(store)
    conversation = service.create(tenant, CreateConversationRequest(items=[...]))
"""

from __future__ import annotations

import time
from typing import Any

from ..api.conversations import (
    Conversation,
    ConversationItemList,
    ConversationList,
    CreateConversationRequest,
    as_conversation_item,
)
from ..ids import new_id
from ..store.conversations import ConversationStore


def mint(prefix: str) -> str:
    """An id as OpenAI shapes them (`conv_...`, `msg_...`): time-ordered, so lists sort."""
    return f"{prefix}_{new_id().replace('-', '')}"


class ConversationService:
    def __init__(self, store: ConversationStore) -> None:
        self.store = store

    def create(self, tenant: str, request: CreateConversationRequest) -> Conversation:
        conversation = Conversation(
            id=mint("conv"), created_at=int(time.time()), metadata=request.metadata or {}
        )
        items = [as_conversation_item(item, mint) for item in request.items or []]
        self.store.create(tenant, conversation, items)
        return conversation

    def get(self, tenant: str, conversation_id: str) -> Conversation:
        return self.store.get(tenant, conversation_id)

    def update(
        self, tenant: str, conversation_id: str, metadata: dict[str, str] | None
    ) -> Conversation:
        return self.store.update_metadata(tenant, conversation_id, metadata or {})

    def delete(self, tenant: str, conversation_id: str) -> None:
        self.store.delete(tenant, conversation_id)

    def list(self, tenant: str, *, after: str | None, limit: int) -> ConversationList:
        data, has_more = self.store.list(tenant, after=after, limit=limit)
        return ConversationList(
            data=data,
            has_more=has_more,
            first_id=data[0].id if data else None,
            last_id=data[-1].id if data else None,
        )

    def add_items(
        self, tenant: str, conversation_id: str, items: list[Any]
    ) -> ConversationItemList:
        whole = [as_conversation_item(item, mint) for item in items]
        self.store.add_items(tenant, conversation_id, whole)
        return _page(whole, has_more=False)

    def list_items(
        self,
        tenant: str,
        conversation_id: str,
        *,
        after: str | None,
        limit: int,
        descending: bool,
    ) -> ConversationItemList:
        data, has_more = self.store.list_items(
            tenant, conversation_id, after=after, limit=limit, descending=descending
        )
        return _page(data, has_more)

    def get_item(self, tenant: str, conversation_id: str, item_id: str) -> Any:
        return self.store.get_item(tenant, conversation_id, item_id)

    def delete_item(self, tenant: str, conversation_id: str, item_id: str) -> Conversation:
        """OpenAI answers an item's delete with the conversation."""
        self.store.delete_item(tenant, conversation_id, item_id)
        return self.store.get(tenant, conversation_id)


def _page(data: list[Any], has_more: bool) -> ConversationItemList:
    return ConversationItemList(
        data=data,
        has_more=has_more,
        first_id=data[0].id if data else None,
        last_id=data[-1].id if data else None,
    )
