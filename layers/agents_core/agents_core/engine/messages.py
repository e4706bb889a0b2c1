"""Between the Agents API's messages and steps and the providers' chat messages."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ..api.agents import AgentConfigCommon, Document, InferenceStep, ToolExecutionStep, Turn
from ..api.common import (
    URL,
    CompletionMessage,
    ImageContentItem,
    InterleavedContent,
    TextContentItem,
    ToolCall,
    ToolDef,
    ToolResponseMessage,
    UserMessage,
)
from ..inference.types import ChatMessage, ChatToolCall, ToolSpec

_JSON_TYPES = {"string", "number", "integer", "boolean", "array", "object", "null"}
#: Python type names, as llama-stack-client's @client_tool writes them.
_PYTHON_TYPES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "list": "array",
    "dict": "object",
}


def content_text(content: InterleavedContent | URL | None) -> str:
    """Text of interleaved content; images are represented by a placeholder."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, URL):
        return content.uri
    if isinstance(content, TextContentItem):
        return content.text
    if isinstance(content, ImageContentItem):
        return ""  # images travel as images (content_images)
    return "".join(content_text(item) for item in content)


def content_images(content: InterleavedContent | URL | None) -> list[str]:
    """Image items of interleaved content as URLs (inline data as a data: URL)."""
    if content is None or isinstance(content, str | URL | TextContentItem):
        return []
    if isinstance(content, ImageContentItem):
        if content.image.url is not None:
            return [content.image.url.uri]
        return [f"data:image/png;base64,{content.image.data}"] if content.image.data else []
    return [url for item in content for url in content_images(item)]


def input_messages(
    messages: list[UserMessage | ToolResponseMessage], documents: list[Document] | None = None
) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    for message in messages:
        if isinstance(message, UserMessage):
            text = content_text(message.content)
            if message.context is not None:
                text = f"{text}\n\n{content_text(message.context)}"
            out.append(ChatMessage("user", text, images=content_images(message.content)))
        else:
            out.append(
                ChatMessage("tool", content_text(message.content), tool_call_id=message.call_id)
            )
    for document in documents or []:
        out.append(
            ChatMessage(
                "user", f"Document ({document.mime_type}):\n{content_text(document.content)}"
            )
        )
    return out


def assistant_message(message: CompletionMessage) -> ChatMessage:
    return ChatMessage(
        "assistant",
        content_text(message.content),
        tool_calls=[
            ChatToolCall(c.call_id, str(c.tool_name), c.arguments_json or _arguments_text(c))
            for c in message.tool_calls or []
        ],
    )


def turn_messages(turn: Turn, documents: list[Document] | None = None) -> list[ChatMessage]:
    """Everything a turn adds to the conversation: its input, replies and tool results."""
    out = input_messages(turn.input_messages, documents)
    for step in turn.steps:
        if isinstance(step, InferenceStep):
            out.append(assistant_message(step.model_response))
        elif isinstance(step, ToolExecutionStep):
            for response in step.tool_responses:
                out.append(
                    ChatMessage(
                        "tool", content_text(response.content), tool_call_id=response.call_id
                    )
                )
    return out


def tool_call(call_id: str, name: str, arguments: str) -> ToolCall:
    """A model's call as the API shows it: arguments parsed when they are a JSON object."""
    try:
        parsed: Any = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        parsed = arguments
    if not isinstance(parsed, dict):
        parsed = arguments
    return ToolCall(call_id=call_id, tool_name=name, arguments=parsed, arguments_json=arguments)


def tool_specs(config: AgentConfigCommon) -> list[ToolSpec]:
    return [tool_spec(tool) for tool in config.client_tools or []]


def tool_spec(tool: ToolDef) -> ToolSpec:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in tool.parameters or []:
        kind = param.parameter_type
        kind = kind if kind in _JSON_TYPES else _PYTHON_TYPES.get(kind, "string")
        schema: dict[str, Any] = {"type": kind, "description": param.description}
        if param.default is not None:
            schema["default"] = param.default
        properties[param.name] = schema
        if param.required:
            required.append(param.name)
    return ToolSpec(
        name=tool.name,
        description=tool.description or "",
        parameters={"type": "object", "properties": properties, "required": required},
    )


def _arguments_text(call: ToolCall) -> str:
    return call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)


class FinishedTurns:
    """The chat messages of sessions' finished turns, as this container last sent them to a
    model. The storage port hands a turn its session's history as stored messages (the same
    objects while the store remembers the session); converting them all again at every turn
    cost more than the rest of a long session's turn. Here only the messages not seen before
    are converted, and a provider keeps its encoding with them (`ChatMessage.memo`). Bounded, like
    the store's memory, in sessions and in characters, least recently used first out. Locked:
    `make run`'s queue pollers run the engine on event loops of their own threads."""

    def __init__(self, max_sessions: int = 128, max_chars: int = 16 * 1024 * 1024) -> None:
        self.max_sessions = max_sessions
        self.max_chars = max_chars
        self._sessions: OrderedDict[tuple[str, str], _Converted] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def messages(
        self, tenant: str, session_id: str, history: list[dict[str, Any]]
    ) -> list[ChatMessage]:
        """`history` as ChatMessages of finished turns: those it shares (the same stored
        objects, in the same places) with what the session had here last time, as they were."""
        with self._lock:
            return self._messages((tenant, session_id), history)

    def _messages(self, key: tuple[str, str], history: list[dict[str, Any]]) -> list[ChatMessage]:
        known = self._sessions.pop(key, None) or _Converted([], [], [])
        self._chars -= known.chars
        kept = 0
        for before, now in zip(known.stored, history, strict=False):
            if before is not now:
                break
            kept += 1
        new = history[kept:]
        converted = _Converted(
            list(history),
            known.messages[:kept] + [ChatMessage.from_dict(m, finished=True) for m in new],
            known.sizes[:kept] + [_chars(m) for m in new],
        )
        if converted.chars * 2 <= self.max_chars:  # its text and, about as long, the encoding
            self._sessions[key] = converted
            self._chars += converted.chars
            while len(self._sessions) > self.max_sessions or self._chars * 2 > self.max_chars:
                _, oldest = self._sessions.popitem(last=False)  # the one just put is last
                self._chars -= oldest.chars
        return list(converted.messages)


@dataclass
class _Converted:
    stored: list[dict[str, Any]]
    messages: list[ChatMessage]
    sizes: list[int]  # each message's `_chars`

    def __post_init__(self) -> None:
        self.chars = sum(self.sizes)


def _chars(stored: dict[str, Any]) -> int:
    """About how many characters a stored message holds (its content, images and documents)."""
    size = len(stored.get("content") or "") + 64
    size += sum(len(url) for url in stored.get("images") or ())
    size += sum(len(d.get("data", "")) for d in stored.get("documents") or ())
    return size
