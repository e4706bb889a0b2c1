"""OpenAI Conversations API models, as the official `openai` SDK types them
(`openai.types.conversations`): a conversation is an id, a creation time and metadata; its items
are Responses API items (`api.responses.OpenAIResponseInput`), each with an id.
"""

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from .common import ApiModel
from .responses import (
    OpenAIResponseInput,
    OpenAIResponseInputMessageContentText,
    OpenAIResponseMessage,
    OpenAIResponseOutputMessageContentOutputText,
)

#: OpenAI's limits: 16 pairs, keys up to 64 characters, values up to 512.
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512
#: Items one create call may add, as OpenAI limits it.
MAX_ITEMS_PER_CALL = 20


def _check_metadata(value: dict[str, str] | None) -> dict[str, str] | None:
    if value is None:
        return None
    if len(value) > MAX_METADATA_PAIRS:
        raise ValueError(f"metadata has {len(value)} pairs; at most {MAX_METADATA_PAIRS} allowed")
    for key, text in value.items():
        if len(key) > MAX_METADATA_KEY:
            raise ValueError(f"metadata key {key[:20]!r}... is longer than {MAX_METADATA_KEY}")
        if len(text) > MAX_METADATA_VALUE:
            raise ValueError(f"metadata value of {key!r} is longer than {MAX_METADATA_VALUE}")
    return value


#: Set of up to 16 string pairs attached to an object (400 beyond OpenAI's limits).
Metadata = Annotated[dict[str, str] | None, AfterValidator(_check_metadata)]


class Conversation(ApiModel):
    id: str
    object: Literal["conversation"] = "conversation"
    created_at: int
    metadata: dict[str, str] = Field(default_factory=dict)


class ConversationDeletedResource(ApiModel):
    id: str
    object: Literal["conversation.deleted"] = "conversation.deleted"
    deleted: bool = True


class CreateConversationRequest(ApiModel):
    items: list[OpenAIResponseInput] | None = Field(default=None, max_length=MAX_ITEMS_PER_CALL)
    metadata: Metadata = None


class UpdateConversationRequest(ApiModel):
    metadata: Metadata


class AddItemsRequest(ApiModel):
    items: list[OpenAIResponseInput] = Field(min_length=1, max_length=MAX_ITEMS_PER_CALL)


class ConversationItemList(ApiModel):
    object: Literal["list"] = "list"
    data: list[OpenAIResponseInput]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class ConversationList(ApiModel):
    """`GET /v1/conversations` (beyond OpenAI's API): a tenant's conversations, newest first."""

    object: Literal["list"] = "list"
    data: list[Conversation]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


_PREFIXES = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "mcp_approval_response": "mcpr",
}


def as_conversation_item(item: Any, new_id: Any) -> Any:
    """An item as a conversation keeps it, the way the SDK reads items back: an id (minted
    with `new_id(prefix)` when missing), and a message's content as a list of parts with a
    status. Items that already have all of it are returned unchanged."""
    update: dict[str, Any] = {}
    if getattr(item, "id", None) is None:
        update["id"] = new_id(_PREFIXES.get(item.type, "item"))
    if isinstance(item, OpenAIResponseMessage):
        if isinstance(item.content, str):
            part = (
                OpenAIResponseOutputMessageContentOutputText(text=item.content)
                if item.role == "assistant"
                else OpenAIResponseInputMessageContentText(text=item.content)
            )
            update["content"] = [part]
        if item.status is None:
            update["status"] = "completed"
    return item.model_copy(update=update) if update else item
