"""Shared wire types of the contract: content, messages, tool calls, inference parameters.

Field names, defaults and discriminators follow the Llama Stack v0.2.14 OpenAPI document
(`shared/reference/llama-stack-agents-api.v0.2.14.yaml`). Unknown fields are rejected, as the
contract's `additionalProperties: false` says, so a typo in a request is a 400, not a silent no-op.
"""

from collections.abc import Callable
from enum import StrEnum
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class ApiModel(BaseModel):
    """Base of every API model: unknown fields are an error."""

    # Schemas are built on first use: outside Lambda a process pays only for the models it
    # touches; in Lambda its init builds them all (`build_deferred`).
    model_config = ConfigDict(extra="forbid", protected_namespaces=(), defer_build=True)


#: The TypeAdapters made on first use (`deferred_adapter`), which `build_deferred` also makes.
_ADAPTERS: list[Callable[[], TypeAdapter]] = []


def deferred_adapter(build: Callable[[], TypeAdapter]) -> Callable[[], TypeAdapter]:
    """`build`'s TypeAdapter, made at its first call or by `build_deferred`, whichever comes
    first: importing the module that declares it costs nothing."""
    made = cache(build)
    _ADAPTERS.append(made)
    return made


def build_deferred() -> int:
    """Build the schema of every ApiModel imported so far that still defers it, and the
    TypeAdapters of `deferred_adapter`; how many models were built. What a function's first
    requests would otherwise build (`Services.prime`)."""
    built, seen, todo = 0, set(), [ApiModel]
    while todo:
        for model in todo.pop().__subclasses__():
            if model in seen:
                continue
            seen.add(model)
            todo.append(model)
            # One whose annotations name what is not imported yet stays deferred.
            if not model.__pydantic_complete__ and model.model_rebuild(raise_errors=False):
                built += 1
    for adapter in _ADAPTERS:
        adapter()
    return built


class Order(StrEnum):
    asc = "asc"
    desc = "desc"


class URL(ApiModel):
    uri: str


# --- content -------------------------------------------------------------------------------


class ImageSource(ApiModel):
    url: URL | None = None
    data: str | None = None


class ImageContentItem(ApiModel):
    type: Literal["image"] = "image"
    image: ImageSource


class TextContentItem(ApiModel):
    type: Literal["text"] = "text"
    text: str


InterleavedContentItem = Annotated[ImageContentItem | TextContentItem, Field(discriminator="type")]
InterleavedContent = str | InterleavedContentItem | list[InterleavedContentItem]


class TextDelta(ApiModel):
    type: Literal["text"] = "text"
    text: str


class ImageDelta(ApiModel):
    type: Literal["image"] = "image"
    image: str


class ToolCallParseStatus(StrEnum):
    started = "started"
    in_progress = "in_progress"
    failed = "failed"
    succeeded = "succeeded"


# --- tools ---------------------------------------------------------------------------------


class BuiltinTool(StrEnum):
    brave_search = "brave_search"
    wolfram_alpha = "wolfram_alpha"
    photogen = "photogen"
    code_interpreter = "code_interpreter"


JsonScalar = str | int | float | bool | None
ToolArguments = str | dict[str, JsonScalar | list[JsonScalar] | dict[str, JsonScalar]]


class ToolCall(ApiModel):
    call_id: str
    tool_name: BuiltinTool | str
    arguments: ToolArguments
    arguments_json: str | None = None


class ToolCallDelta(ApiModel):
    type: Literal["tool_call"] = "tool_call"
    tool_call: str | ToolCall
    parse_status: ToolCallParseStatus


ContentDelta = Annotated[TextDelta | ImageDelta | ToolCallDelta, Field(discriminator="type")]


class ToolResponse(ApiModel):
    call_id: str
    tool_name: BuiltinTool | str
    content: InterleavedContent
    metadata: dict[str, Any] | None = None


class ToolParameter(ApiModel):
    model_config = ApiModel.model_config | {"extra": "ignore"}

    name: str
    parameter_type: str
    description: str
    required: bool = True
    default: Any = None


class ToolDef(ApiModel):
    """A client tool. Unknown fields are ignored here: client libraries add their own
    (llama-stack-client 0.2.12 sends `tool_prompt_format`)."""

    model_config = ApiModel.model_config | {"extra": "ignore"}

    name: str
    description: str | None = None
    parameters: list[ToolParameter] | None = None
    metadata: dict[str, Any] | None = None


class ToolChoice(StrEnum):
    auto = "auto"
    required = "required"
    none = "none"


class ToolPromptFormat(StrEnum):
    json = "json"
    function_tag = "function_tag"
    python_list = "python_list"


class SystemMessageBehavior(StrEnum):
    append = "append"
    replace = "replace"


class ToolConfig(ApiModel):
    """How the model may use tools; `tool_choice` may also name one specific tool."""

    tool_choice: ToolChoice | str | None = ToolChoice.auto
    tool_prompt_format: ToolPromptFormat | None = None
    system_message_behavior: SystemMessageBehavior | None = SystemMessageBehavior.append


# --- messages ------------------------------------------------------------------------------


class StopReason(StrEnum):
    end_of_turn = "end_of_turn"
    end_of_message = "end_of_message"
    out_of_tokens = "out_of_tokens"


def _role_required(schema: dict[str, Any]) -> None:
    """`role` has a default, yet a message is told apart by it: a client must send it."""
    schema["required"] = ["role", *schema.get("required", [])]


class UserMessage(ApiModel):
    model_config = ApiModel.model_config | {"json_schema_extra": _role_required}

    role: Literal["user"] = "user"
    content: InterleavedContent
    context: InterleavedContent | None = None


class ToolResponseMessage(ApiModel):
    model_config = ApiModel.model_config | {"json_schema_extra": _role_required}

    role: Literal["tool"] = "tool"
    call_id: str
    content: InterleavedContent


class CompletionMessage(ApiModel):
    model_config = ApiModel.model_config | {"json_schema_extra": _role_required}

    role: Literal["assistant"] = "assistant"
    content: InterleavedContent
    stop_reason: StopReason
    tool_calls: list[ToolCall] | None = Field(default_factory=list)


TurnInputMessage = Annotated[UserMessage | ToolResponseMessage, Field(discriminator="role")]


# --- inference parameters ------------------------------------------------------------------


class GreedySamplingStrategy(ApiModel):
    type: Literal["greedy"] = "greedy"


class TopPSamplingStrategy(ApiModel):
    type: Literal["top_p"] = "top_p"
    temperature: float | None = Field(default=None, gt=0)
    top_p: float | None = 0.95


class TopKSamplingStrategy(ApiModel):
    type: Literal["top_k"] = "top_k"
    top_k: int = Field(ge=1)


SamplingStrategy = Annotated[
    GreedySamplingStrategy | TopPSamplingStrategy | TopKSamplingStrategy,
    Field(discriminator="type"),
]


class SamplingParams(ApiModel):
    strategy: SamplingStrategy = Field(default_factory=GreedySamplingStrategy)
    max_tokens: int | None = Field(default=0, ge=0)
    repetition_penalty: float | None = 1.0
    stop: list[str] | None = None


class JsonSchemaResponseFormat(ApiModel):
    type: Literal["json_schema"] = "json_schema"
    json_schema: dict[str, Any]


class GrammarResponseFormat(ApiModel):
    type: Literal["grammar"] = "grammar"
    bnf: dict[str, Any]


ResponseFormat = Annotated[
    JsonSchemaResponseFormat | GrammarResponseFormat, Field(discriminator="type")
]


# --- safety --------------------------------------------------------------------------------


class ViolationLevel(StrEnum):
    info = "info"
    warn = "warn"
    error = "error"


class SafetyViolation(ApiModel):
    violation_level: ViolationLevel
    user_message: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


# --- pagination ----------------------------------------------------------------------------


class PaginatedResponse(ApiModel):
    data: list[dict[str, Any]]
    has_more: bool
    url: str | None = None
