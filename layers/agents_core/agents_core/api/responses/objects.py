"""The response object, its list and delete shapes, and the request that creates one."""

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from ..common import ApiModel
from ..prompts import ResponsePrompt
from .items import MAX_MODEL_ID_LENGTH, OpenAIResponseInput, OpenAIResponseOutput
from .tools import OpenAIResponseInputTool

# --- the response object -------------------------------------------------------------------


class OpenAIResponseTextFormat(ApiModel):
    type: Literal["text", "json_schema", "json_object"]
    name: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    description: str | None = None
    strict: bool | None = None

    # `schema` on the wire both ways (an SDK reads `schema`); `schema_` accepted from old records.
    model_config = ApiModel.model_config | {"populate_by_name": True, "serialize_by_alias": True}


class OpenAIResponseText(ApiModel):
    format: OpenAIResponseTextFormat | None = None


class OpenAIResponseError(ApiModel):
    code: str
    message: str


class OpenAIResponseReasoning(ApiModel):
    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None
    generate_summary: Literal["auto", "concise", "detailed"] | None = None


class ToolChoiceFunction(ApiModel):
    type: Literal["function"] = "function"
    name: str = Field(min_length=1, max_length=256)


class ToolChoiceMcp(ApiModel):
    type: Literal["mcp"] = "mcp"
    server_label: str
    name: str | None = None


class ToolChoiceHosted(ApiModel):
    type: Literal["web_search", "web_search_preview", "file_search"]


ToolChoice = Annotated[
    ToolChoiceFunction | ToolChoiceMcp | ToolChoiceHosted, Field(discriminator="type")
]

#: OpenAI's limits on `metadata`: 16 pairs, keys up to 64 characters, values up to 512.
Metadata = Annotated[
    dict[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=512)]],
    Field(max_length=16),
]

ServiceTier = Literal["auto", "default", "flex", "scale", "priority"]


#: Ids in keys or paths: letters, digits, `_` and `-` (so they cannot inject key separators).
ID = r"^[A-Za-z0-9_-]{1,128}$"


class ConversationReference(ApiModel):
    """`conversation` as an object: `{"id": "conv_..."}`."""

    id: str = Field(pattern=ID)


class OpenAIResponseObject(ApiModel):
    """The response object as the Open Responses specification requires it: every field
    present, the request's settings echoed, the stated defaults where the request set none."""

    created_at: int
    completed_at: int | None = None
    error: OpenAIResponseError | None = None
    id: str
    model: str
    object: Literal["response"] = "response"
    output: list[OpenAIResponseOutput]
    parallel_tool_calls: bool = True
    previous_response_id: str | None = None
    status: str
    temperature: float = 1.0
    text: OpenAIResponseText = Field(
        default_factory=lambda: OpenAIResponseText(format=OpenAIResponseTextFormat(type="text"))
    )
    top_p: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    top_logprobs: int = 0
    truncation: Literal["auto", "disabled"] = "disabled"
    user: str | None = None
    instructions: str | None = None
    incomplete_details: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    tools: list[OpenAIResponseInputTool] = Field(default_factory=list)
    tool_choice: Literal["auto", "none", "required"] | ToolChoice = "auto"
    reasoning: OpenAIResponseReasoning | None = None
    max_output_tokens: int | None = None
    max_tool_calls: int | None = None
    store: bool = True
    background: bool = False
    service_tier: ServiceTier = "default"
    metadata: dict[str, str] = Field(default_factory=dict)
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    prompt: ResponsePrompt | None = None
    conversation: ConversationReference | None = None  # the conversation it continued

    @field_validator("temperature", "top_p", mode="before")
    @classmethod
    def _unset_is_default(cls, value: Any, info: Any) -> Any:
        """Records stored before these were required hold null: read it as the default."""
        return cls.model_fields[info.field_name].default if value is None else value

    @field_validator("truncation", mode="before")
    @classmethod
    def _unset_truncation(cls, value: Any) -> Any:
        return "disabled" if value is None else value

    @field_validator("parallel_tool_calls", mode="before")
    @classmethod
    def _unset_parallel(cls, value: Any) -> Any:
        return True if value is None else value


class OpenAIResponseObjectWithInput(OpenAIResponseObject):
    input: list[OpenAIResponseInput]


class ListOpenAIResponseObject(ApiModel):
    data: list[OpenAIResponseObjectWithInput]
    has_more: bool
    first_id: str | None
    last_id: str | None
    object: Literal["list"] = "list"


class ListOpenAIResponseInputItem(ApiModel):
    data: list[OpenAIResponseInput]
    object: Literal["list"] = "list"
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class OpenAIDeleteResponseObject(ApiModel):
    id: str
    object: Literal["response"] = "response"
    deleted: bool = True


class StreamOptions(ApiModel):
    include_obfuscation: bool | None = None


class ContextManagement(ApiModel):
    """Automatic compaction: past `compact_threshold` tokens (estimated as the context window
    is; unset: 80% of the window), the context before this input is summarized into a
    compaction item, the first of the response's output."""

    type: Literal["compaction"]
    compact_threshold: int | None = Field(default=None, ge=1)


class CreateOpenaiResponseRequest(ApiModel):
    """What `responses.create` sends. Every standard field is accepted; docs/architecture.md
    says which are honoured and how. An unknown field is a 400 naming it."""

    input: str | list[OpenAIResponseInput]
    # Both end up in DynamoDB keys (partition keys hold at most 2,048 bytes): bounded here,
    # so an oversized value is a 400 before any work, never a failed write after the model ran.
    model: str = Field(min_length=1, max_length=MAX_MODEL_ID_LENGTH)
    instructions: str | None = None
    previous_response_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,128}$")
    store: bool | None = True
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    background: bool | None = False
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    max_output_tokens: int | None = Field(default=None, ge=16)
    max_tool_calls: int | None = Field(default=None, ge=1)
    parallel_tool_calls: bool | None = True
    text: OpenAIResponseText | None = None
    tools: list[OpenAIResponseInputTool] | None = None
    tool_choice: Literal["auto", "none", "required"] | ToolChoice | None = "auto"
    truncation: Literal["auto", "disabled"] | None = "disabled"
    reasoning: OpenAIResponseReasoning | None = None
    include: list[str] | None = None
    metadata: Metadata | None = None
    user: str | None = Field(default=None, max_length=512)
    safety_identifier: str | None = Field(default=None, max_length=64)
    prompt_cache_key: str | None = Field(default=None, max_length=1024)
    service_tier: ServiceTier | None = None
    max_infer_iters: int | None = Field(default=10, ge=1)
    # Shield ids checking the input and each answer, as OGX takes them (the SDK: extra_body).
    guardrails: list[Annotated[str, Field(min_length=1, max_length=256)]] | None = Field(
        default=None, max_length=16
    )
    conversation: Annotated[str, Field(pattern=ID)] | ConversationReference | None = None
    # Sent by Codex CLI (its turn's ids); accepted and not stored: it says nothing the
    # response needs, and the table keeps only what a response is.
    client_metadata: dict[str, Annotated[str, Field(max_length=4096)]] | None = Field(
        default=None, max_length=32
    )
    # A stored template (the Prompts API), rendered before `instructions`.
    prompt: ResponsePrompt | None = None
    # 400 when set: send `guardrails` (shield ids) for moderation.
    moderation: dict[str, Any] | None = None
    # `context_management` compacts the context past a threshold (ContextManagement). Accepted
    # and ignored: no prompt cache to steer, no completion windows, no image generation, no
    # access programs.
    context_management: list[ContextManagement] | None = Field(default=None, max_length=4)
    prompt_cache_retention: Literal["in_memory", "24h"] | None = None
    prompt_cache_options: dict[str, Any] | None = None
    background_options: dict[str, Any] | None = None
    image: dict[str, Any] | None = None
    access_programs: Any = None


class CountInputTokensRequest(ApiModel):
    """What `responses.input_tokens.count` sends: a would-be request's input, context and
    tools."""

    model: str | None = Field(default=None, max_length=MAX_MODEL_ID_LENGTH)
    input: str | list[OpenAIResponseInput] | None = None
    instructions: str | None = None
    previous_response_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,128}$")
    conversation: Annotated[str, Field(pattern=ID)] | ConversationReference | None = None
    tools: list[OpenAIResponseInputTool] | None = None
    tool_choice: Literal["auto", "none", "required"] | ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    reasoning: OpenAIResponseReasoning | None = None
    text: OpenAIResponseText | None = None
    truncation: Literal["auto", "disabled"] | None = None
    personality: str | None = Field(default=None, max_length=64)


class InputTokenCount(ApiModel):
    object: Literal["response.input_tokens"] = "response.input_tokens"
    input_tokens: int


class CompactResponseRequest(ApiModel):
    """What `responses.compact` sends: the conversation to compact (a previous response's and
    this input) and the model that summarizes it."""

    model: str = Field(min_length=1, max_length=MAX_MODEL_ID_LENGTH)
    input: str | list[OpenAIResponseInput] | None = None
    instructions: str | None = None
    previous_response_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,128}$")
    # Accepted and ignored, as on responses.create.
    prompt_cache_key: str | None = Field(default=None, max_length=1024)
    prompt_cache_retention: Literal["in_memory", "24h"] | None = None
    prompt_cache_options: dict[str, Any] | None = None
    image: dict[str, Any] | None = None


class CompactedResponse(ApiModel):
    """The conversation's user messages, then one compaction item standing for the rest."""

    id: str
    object: Literal["response.compaction"] = "response.compaction"
    created_at: int
    output: list[OpenAIResponseInput]
    usage: dict[str, Any]
