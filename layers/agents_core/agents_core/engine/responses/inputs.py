"""A response's input: the request's items as the loop's chat messages, with their files read,
approval answers placed after the calls they answer, and the whole fitted to the context window.
"""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
from collections.abc import Iterator
from typing import Any

from ...api.responses import (
    NAMESPACE_SEPARATOR,
    OpenAIResponseCompactionItem,
    OpenAIResponseInputFunctionToolCallOutput,
    OpenAIResponseInputMessageContentFile,
    OpenAIResponseInputMessageContentImage,
    OpenAIResponseInputMessageContentText,
    OpenAIResponseMCPApprovalRequest,
    OpenAIResponseMCPApprovalResponse,
    OpenAIResponseMessage,
    OpenAIResponseOutputMessageFunctionToolCall,
    OpenAIResponseOutputMessageMCPCall,
    OpenAIResponseReasoningItem,
)
from ...errors import Conflict, InvalidRequest, TooLarge
from ...ids import item_id
from ...inference.types import ChatDocument, ChatMessage, ChatToolCall, ToolSpec
from ...seal import Sealer, Unsealable
from ..server_tools import ToolRuntime
from .tools import Approval


def fit(conversation: list[ChatMessage], truncation: str, context_tokens: int) -> list[ChatMessage]:
    """The conversation within the context window (`estimated_tokens`): `auto` drops the
    oldest messages (and results left without their call); `disabled` refuses a conversation
    that does not fit."""
    tokens = estimated_tokens
    if tokens(conversation) <= context_tokens:
        return conversation
    if truncation != "auto":
        raise InvalidRequest(
            f"The input is about {tokens(conversation)} tokens, more than the context window of"
            f" {context_tokens}; send truncation: auto to drop the oldest items"
        )
    kept = list(conversation)
    while kept and tokens(kept) > context_tokens:
        kept.pop(0)
        while kept and kept[0].role == "tool":
            kept.pop(0)
    if not kept:
        raise InvalidRequest(
            f"The last input item alone is more than the context window of {context_tokens} tokens"
        )
    return kept


#: How a compaction item's summary reaches the model, in place of the turns it stands for.
COMPACTED_PREFIX = "A summary of the earlier conversation, which was compacted:"


def estimated_tokens(messages: list[ChatMessage], tools: list[ToolSpec] | None = None) -> int:
    """The tokens of `messages` (and the tools offered with them) at 4 characters a token: the
    estimate the context window is kept by, for every provider."""
    chars = sum(
        len(m.content) + sum(len(c.arguments) + len(c.name) for c in m.tool_calls) for m in messages
    )
    chars += sum(
        len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in tools or []
    )
    return chars // 4 + 1


def approvals(conversation: list[ChatMessage], items: list[Any]) -> list[Approval]:
    """The input's approval answers, each placed in the conversation as the result of the call
    it answers (right after that call's other results); 400 for an answer to no waiting call."""
    approvals = []
    for answer in items:
        if not isinstance(answer, OpenAIResponseMCPApprovalResponse):
            continue
        found = _waiting_call(conversation, answer.approval_request_id)
        if found is None:
            raise InvalidRequest(
                f"approval_request_id {answer.approval_request_id} names no call waiting for"
                " approval in this conversation"
            )
        position, call = found
        result = ChatMessage("tool", "", tool_call_id=call.id)
        conversation.insert(position, result)
        approvals.append(Approval(answer, call, result))
    return approvals


def _waiting_call(conversation: list[ChatMessage], call_id: str) -> tuple[int, ChatToolCall] | None:
    """The call with this id that has no result yet, and where its result goes."""
    if any(m.role == "tool" and m.tool_call_id == call_id for m in conversation):
        return None
    for index, message in enumerate(conversation):
        for call in message.tool_calls:
            if call.id == call_id:
                position = index + 1
                while position < len(conversation) and conversation[position].role == "tool":
                    position += 1
                return position, call
    return None


def refuse_answered_again(stored: list[ChatMessage], new_input: list[ChatMessage]) -> None:
    """A function call is answered once: an output for a call the conversation (or the chain of
    responses) already answered is a 409. Two clients racing to answer it in one conversation
    then have one winner; branches from one response each answer it once."""
    answered = {m.tool_call_id for m in stored if m.role == "tool"}
    again = [m.tool_call_id for m in new_input if m.role == "tool" and m.tool_call_id in answered]
    if again:
        raise Conflict(f"function call {again[0]} was already answered in this conversation")


def answer_forgotten_calls(conversation: list[ChatMessage]) -> None:
    """A call the conversation never answered (an approval request followed by a new question)
    gets a result saying so: chat models refuse a call without one."""
    answered = {m.tool_call_id for m in conversation if m.role == "tool"}
    index = 0
    while index < len(conversation):
        calls = [c for c in conversation[index].tool_calls if c.id not in answered]
        position = index + 1
        while position < len(conversation) and conversation[position].role == "tool":
            position += 1
        if calls and position < len(conversation):  # at the end: the input answers it later
            for call in calls:
                note = f"No result: the call to `{call.name}` was not run."
                conversation.insert(position, ChatMessage("tool", note, tool_call_id=call.id))
                answered.add(call.id)
        index += 1


def input_items(value: str | list[Any]) -> list[Any]:
    """The request's input as stored items, each with an id (as OpenAI lists them)."""
    if isinstance(value, str):
        value = [
            OpenAIResponseMessage(
                role="user", content=[OpenAIResponseInputMessageContentText(text=value)]
            )
        ]
    items = []
    for item in value:
        if getattr(item, "id", None) is None:
            prefix = {"message": "msg", "function_call": "fc", "function_call_output": "fco"}
            item = item.model_copy(update={"id": item_id(prefix.get(item.type, "item"))})
        items.append(item)
    return items


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.text for part in content if hasattr(part, "text"))


def _content_images(content: Any) -> list[str]:
    if isinstance(content, str):
        return []
    return [
        part.image_url
        for part in content
        if isinstance(part, OpenAIResponseInputMessageContentImage) and part.image_url
    ]


#: The largest file a request may give as input (API Gateway carries 10 MB at most).
MAX_FILE_BYTES = 8 * 1024 * 1024
_TEXT_TYPES = {"application/json", "application/xml", "application/yaml", "application/x-yaml"}


def _file_parts(items: list[Any]) -> Iterator[OpenAIResponseInputMessageContentFile]:
    for item in items:
        if isinstance(item, OpenAIResponseMessage) and not isinstance(item.content, str):
            for part in item.content:
                if isinstance(part, OpenAIResponseInputMessageContentFile):
                    yield part


def _decode_file_data(data: str, name: str) -> tuple[bytes, str]:
    """A data: URL's bytes and media type, or plain base64's with the type its name says."""
    media_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
    if data.startswith("data:"):
        header, _, data = data.partition(",")
        media_type = header[5:].split(";")[0] or media_type
    if len(data) > MAX_FILE_BYTES * 4 // 3 + 4:
        raise TooLarge(f"input_file {name} is larger than {MAX_FILE_BYTES} bytes")
    try:
        return base64.b64decode(data, validate=True), media_type
    except (binascii.Error, ValueError):
        raise InvalidRequest(f"input_file {name}: file_data is not base64") from None


def _file_content(name: str, media_type: str, raw: bytes) -> str | ChatDocument:
    """A text file as text every model reads; anything else as a document for the providers
    that take documents (the others refuse it with a 400)."""
    if media_type.startswith("text/") or media_type in _TEXT_TYPES:
        try:
            return f"[file {name}]\n{raw.decode()}"
        except UnicodeDecodeError:
            raise InvalidRequest(f"input_file {name} is not UTF-8 text") from None
    return ChatDocument(name, media_type, base64.b64encode(raw).decode())


def opened_blobs(items: list[Any], tenant: str, sealer: Sealer | None) -> dict[int, str]:
    """The summary in each compaction item, by the item's id(); every blob (a reasoning
    item's `encrypted_content` too) checked to be this deployment's, for this caller: 400
    otherwise."""
    summaries: dict[int, str] = {}
    for item in items:
        kind = {
            OpenAIResponseReasoningItem: "reasoning",
            OpenAIResponseCompactionItem: "compaction",
        }.get(type(item))
        blob = getattr(item, "encrypted_content", None)
        if kind is None or not blob:
            continue
        try:
            if sealer is None:
                raise Unsealable("this deployment reads no blobs")
            payload = sealer.open(tenant, kind, blob)
        except Unsealable as err:
            raise InvalidRequest(
                f"input {kind} item {item.id}: its encrypted_content is not one this deployment"
                f" made for this caller ({err})"
            ) from None
        if kind == "compaction":
            summaries[id(item)] = str(payload.get("summary", ""))
    return summaries


def input_messages(
    items: list[Any],
    files: dict[int, str | ChatDocument] | None = None,
    summaries: dict[int, str] | None = None,
) -> list[ChatMessage]:
    """The input items as chat messages; `files`: each input_file part's content, read
    beforehand (`read_files`); `summaries`: each compaction item's (`opened_blobs`), which
    stands for the conversation it compacted. Reasoning items are not sent to the model
    (chat models take none back)."""
    files = files or {}
    summaries = summaries or {}
    messages: list[ChatMessage] = []
    for item in items:
        if id(item) in summaries:  # it stands for what came before, but the user's words
            messages = [
                m
                for m in messages
                if m.role == "user" and not m.content.startswith(COMPACTED_PREFIX)
            ]
            text = f"{COMPACTED_PREFIX}\n{summaries[id(item)]}"
            messages.append(ChatMessage("user", text))
        elif isinstance(item, OpenAIResponseMessage):
            role = {"developer": "system"}.get(item.role, item.role)
            text, images = _content_text(item.content), _content_images(item.content)
            message = ChatMessage(role, text, images=images)
            for part in item.content if not isinstance(item.content, str) else []:
                content = files.get(id(part))
                if isinstance(content, ChatDocument):
                    message.documents.append(content)
                elif content is not None:
                    message.content = "\n\n".join(filter(None, [message.content, content]))
            messages.append(message)
        elif isinstance(item, OpenAIResponseOutputMessageFunctionToolCall):
            name = item.name
            if item.namespace:
                name = f"{item.namespace}{NAMESPACE_SEPARATOR}{name}"
            call = ChatToolCall(item.call_id, name, item.arguments)
            if messages and messages[-1].role == "assistant":
                messages[-1].tool_calls.append(call)
            else:
                messages.append(ChatMessage("assistant", "", tool_calls=[call]))
        elif isinstance(item, OpenAIResponseInputFunctionToolCallOutput):
            messages.append(ChatMessage("tool", item.output, tool_call_id=item.call_id))
        elif isinstance(item, OpenAIResponseMCPApprovalRequest):
            call = ChatToolCall(item.id, item.name, item.arguments)
            messages.append(ChatMessage("assistant", "", tool_calls=[call]))
        elif isinstance(item, OpenAIResponseOutputMessageMCPCall):
            call = ChatToolCall(item.id, item.name, item.arguments)
            messages.append(ChatMessage("assistant", "", tool_calls=[call]))
            output = item.output if item.output is not None else str(item.error or "")
            messages.append(ChatMessage("tool", output, tool_call_id=item.id))
    return messages


async def read_files(
    runtime: ToolRuntime | None, items: list[Any]
) -> dict[int, str | ChatDocument]:
    """The content of each input_file part, by the part's id(): its data decoded, or its URL
    fetched through the outbound guard; 400 (413) for what cannot be read."""
    files: dict[int, str | ChatDocument] = {}
    for part in _file_parts(items):
        if part.file_id is not None:
            raise InvalidRequest(
                "input_file file_id needs the Files API, which this deployment does not"
                " serve yet; send file_data or file_url"
            )
        if part.file_url is not None:
            if runtime is None:
                raise InvalidRequest("input_file file_url is not available; send file_data")
            name = part.filename or part.file_url.rsplit("/", 1)[-1] or "file"
            raw, media_type = await runtime.fetch(part.file_url, MAX_FILE_BYTES)
        else:
            name = part.filename or "file"
            raw, media_type = _decode_file_data(part.file_data or "", name)
        files[id(part)] = _file_content(name, media_type, raw)
    return files
