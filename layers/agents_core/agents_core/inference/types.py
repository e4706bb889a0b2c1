"""The provider interface: a chat request in, a stream of text and tool-call deltas out.

Provider-neutral on purpose: the engine speaks only these types, each provider maps them onto
its own wire format (OpenAI chat completions, Bedrock Converse, the offline model).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..api.common import ResponseFormat, SamplingParams


@dataclass
class ChatToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as models produce it


@dataclass
class ChatDocument:
    """A file the model reads as a document (a PDF, a spreadsheet); text files become message
    text before they get here. Providers that take documents get its bytes."""

    name: str
    media_type: str
    data: str  # base64


@dataclass
class ChatMessage:
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ChatToolCall] = field(default_factory=list)
    tool_call_id: str | None = None  # role "tool": the call this answers
    images: list[str] = field(default_factory=list)  # image URLs or data: URLs, after the text
    documents: list[ChatDocument] = field(default_factory=list)  # after the images
    #: None for a message still being built. A dict for a message of a finished turn, which
    #: never changes and is sent again with every later turn of its session: a provider keeps
    #: what it made of it there (the OpenAI-compatible one: its history's JSON so far).
    memo: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The stored form: role and content, and each other field that is set. Written out
        field by field: `dataclasses.asdict` copies recursively, several times the cost, and
        every message of a history is stored again at each turn's end."""
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls
            ]
        if self.tool_call_id:
            data["tool_call_id"] = self.tool_call_id
        if self.images:
            data["images"] = list(self.images)
        if self.documents:
            data["documents"] = [
                {"name": d.name, "media_type": d.media_type, "data": d.data} for d in self.documents
            ]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, finished: bool = False) -> ChatMessage:
        """A stored message back, its fields set directly (without the generated __init__'s
        defaults); `finished`: a message of a finished turn, which gets a `memo`."""
        calls = data.get("tool_calls")
        documents = data.get("documents")
        message = cls.__new__(cls)
        message.__dict__.update(
            role=data["role"],
            content=data.get("content", ""),
            tool_calls=[ChatToolCall(**c) for c in calls] if calls else [],
            tool_call_id=data.get("tool_call_id"),
            images=data.get("images", []),
            documents=[ChatDocument(**d) for d in documents] if documents else [],
            memo={} if finished else None,
        )
        return message


@dataclass
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON Schema of the arguments object


@dataclass
class ModelOptions:
    """The Responses API's generation settings; each set one overrides `sampling`. A provider
    passes on what its API takes and ignores the rest (docs/architecture.md lists which)."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    top_logprobs: int | None = None
    parallel_tool_calls: bool | None = None
    reasoning_effort: str | None = None
    user: str | None = None  # the caller's end user (`safety_identifier` or `user`)
    prompt_cache_key: str | None = None


@dataclass
class ChatRequest:
    model: str
    messages: list[ChatMessage]
    tools: list[ToolSpec] = field(default_factory=list)
    tool_choice: str = "auto"  # auto | required | none | a tool name
    sampling: SamplingParams | None = None
    response_format: ResponseFormat | None = None
    options: ModelOptions = field(default_factory=ModelOptions)


@dataclass
class Usage:
    input_tokens: int
    output_tokens: int


@dataclass
class TextDelta:
    text: str


@dataclass
class ReasoningDelta:
    """Reasoning text a model streams before its answer (vLLM's and DeepSeek's
    `reasoning_content`, or `reasoning`)."""

    text: str


@dataclass
class ToolCallDelta:
    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass
class Finish:
    reason: Literal["stop", "tool_calls", "length"]
    usage: Usage | None = None


ChatEvent = TextDelta | ReasoningDelta | ToolCallDelta | Finish


class Provider(Protocol):
    name: str

    def check(self, request: ChatRequest) -> None:
        """Raise InvalidRequest for what this provider cannot do, before any call is made. Calls
        raise UpstreamFailed (or UpstreamTimeout) when the model fails."""
        ...

    def stream(self, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        """Deltas as the model produces them, ending with exactly one Finish."""
        ...

    async def complete(self, request: ChatRequest) -> list[ChatEvent]:
        """The same events, for a caller that does not stream (providers may use a cheaper call)."""
        ...


class TokenCounter(Protocol):
    """A provider that counts a request's input tokens itself (Bedrock's CountTokens); the
    others' counts are estimates."""

    async def count_tokens(self, request: ChatRequest) -> int: ...


def model_events(
    provider: Provider, request: ChatRequest, stream: bool
) -> AsyncIterator[ChatEvent]:
    """The model's events: streamed (the provider's own stream, not passed through one more
    generator for every delta), or from one non-streaming call (a client that does not stream
    gains nothing from a streamed model call, and Bedrock's Converse is cheaper)."""
    return provider.stream(request) if stream else _completed(provider, request)


async def _completed(provider: Provider, request: ChatRequest) -> AsyncIterator[ChatEvent]:
    for event in await provider.complete(request):
        yield event
