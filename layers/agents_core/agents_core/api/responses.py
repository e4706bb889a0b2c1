"""OpenAI Responses API models: inputs, outputs, the response object, list shapes, stream events.

The contract's schemas, plus the stream events the official `openai` SDK expects that the
contract omits (`response.in_progress`, `response.content_part.*`, `response.failed`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from .common import ApiModel

#: Model ids are keys of the by-model index; the longest Bedrock inference-profile ARNs are ~150.
MAX_MODEL_ID_LENGTH = 256
#: An item's id, a client's or ours: conversations index items by it (a DynamoDB key, which may
#: be neither empty nor over 1,024 bytes) and serve it back under this path segment.
ItemId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,128}$")]
#: The id of an approval request is the model's call id, whatever characters the model used:
#: bounded for the index key only (at most 1,024 bytes in UTF-8).
CallItemId = Annotated[str, Field(min_length=1, max_length=256)]

# --- message content -----------------------------------------------------------------------


class OpenAIResponseInputMessageContentText(ApiModel):
    text: str
    type: Literal["input_text"] = "input_text"


class OpenAIResponseInputMessageContentImage(ApiModel):
    detail: Literal["low", "high", "auto"] = "auto"
    type: Literal["input_image"] = "input_image"
    image_url: str | None = None


class OpenAIResponseInputMessageContentFile(ApiModel):
    """A file given as input: its bytes (`file_data`, a data: URL or plain base64, with
    `filename`), a URL the server fetches, or a `file_id` of the Files API."""

    type: Literal["input_file"] = "input_file"
    file_data: str | None = None
    file_url: str | None = Field(default=None, max_length=2048)
    file_id: str | None = Field(default=None, max_length=256)
    filename: str | None = Field(default=None, max_length=256)

    @model_validator(mode="after")
    def _one_source(self) -> OpenAIResponseInputMessageContentFile:
        given = [self.file_data, self.file_url, self.file_id]
        if sum(value is not None for value in given) != 1:
            raise ValueError("an input_file needs exactly one of file_data, file_url, file_id")
        return self


OpenAIResponseInputMessageContent = Annotated[
    OpenAIResponseInputMessageContentText
    | OpenAIResponseInputMessageContentImage
    | OpenAIResponseInputMessageContentFile,
    Field(discriminator="type"),
]


class OpenAIResponseAnnotationFileCitation(ApiModel):
    type: Literal["file_citation"] = "file_citation"
    file_id: str
    filename: str
    index: int


class OpenAIResponseAnnotationCitation(ApiModel):
    type: Literal["url_citation"] = "url_citation"
    end_index: int
    start_index: int
    title: str
    url: str


class OpenAIResponseAnnotationContainerFileCitation(ApiModel):
    type: Literal["container_file_citation"] = "container_file_citation"
    container_id: str
    end_index: int
    file_id: str
    filename: str
    start_index: int


class OpenAIResponseAnnotationFilePath(ApiModel):
    type: Literal["file_path"] = "file_path"
    file_id: str
    index: int


OpenAIResponseAnnotations = Annotated[
    OpenAIResponseAnnotationFileCitation
    | OpenAIResponseAnnotationCitation
    | OpenAIResponseAnnotationContainerFileCitation
    | OpenAIResponseAnnotationFilePath,
    Field(discriminator="type"),
]


class OpenAIResponseOutputMessageContentOutputText(ApiModel):
    text: str
    type: Literal["output_text"] = "output_text"
    annotations: list[OpenAIResponseAnnotations] = Field(default_factory=list)
    logprobs: list[dict[str, Any]] = Field(default_factory=list)  # none are returned yet


# --- items ---------------------------------------------------------------------------------


class OpenAIResponseContentPartRefusal(ApiModel):
    """What a response says when a guardrail blocked it (its shield's message)."""

    type: Literal["refusal"] = "refusal"
    refusal: str


OpenAIResponseOutputMessageContent = Annotated[
    OpenAIResponseOutputMessageContentOutputText | OpenAIResponseContentPartRefusal,
    Field(discriminator="type"),
]


class OpenAIResponseMessage(ApiModel):
    content: (
        str | list[OpenAIResponseInputMessageContent] | list[OpenAIResponseOutputMessageContent]
    )
    role: Literal["system", "developer", "user", "assistant"]
    type: Literal["message"] = "message"
    id: ItemId | None = None
    status: str | None = None


class WebSearchAction(ApiModel):
    type: Literal["search"] = "search"
    query: str | None = None
    sources: list[dict[str, Any]] | None = None


class OpenAIResponseOutputMessageWebSearchToolCall(ApiModel):
    id: ItemId
    status: str
    type: Literal["web_search_call"] = "web_search_call"
    action: WebSearchAction | None = None


class OpenAIResponseOutputMessageFileSearchToolCall(ApiModel):
    id: ItemId
    queries: list[str]
    status: str
    type: Literal["file_search_call"] = "file_search_call"
    results: list[dict[str, Any]] | None = None


class OpenAIResponseOutputMessageFunctionToolCall(ApiModel):
    call_id: str
    name: str
    arguments: str
    type: Literal["function_call"] = "function_call"
    id: ItemId | None = None
    status: str | None = None


class OpenAIResponseInputFunctionToolCallOutput(ApiModel):
    call_id: str
    output: str
    type: Literal["function_call_output"] = "function_call_output"
    id: ItemId | None = None
    status: str | None = None


class MCPListToolsTool(ApiModel):
    input_schema: dict[str, Any]
    name: str
    description: str | None = None
    annotations: dict[str, Any] | None = None


class McpToolExecutionError(ApiModel):
    """Why an MCP call failed, as OpenAI types it: the content the tool or its server sent."""

    type: Literal["mcp_tool_execution_error"] = "mcp_tool_execution_error"
    content: list[dict[str, Any]]


class OpenAIResponseOutputMessageMCPCall(ApiModel):
    id: ItemId
    type: Literal["mcp_call"] = "mcp_call"
    arguments: str
    name: str
    server_label: str
    error: McpToolExecutionError | str | None = None
    output: str | None = None
    status: Literal["in_progress", "completed", "incomplete", "calling", "failed"] | None = None
    approval_request_id: str | None = None


class OpenAIResponseOutputMessageMCPListTools(ApiModel):
    id: ItemId
    type: Literal["mcp_list_tools"] = "mcp_list_tools"
    server_label: str
    tools: list[MCPListToolsTool]
    error: str | None = None


class OpenAIResponseMCPApprovalRequest(ApiModel):
    """A call to an MCP tool that waits for the caller's approval; its id is the call's id."""

    id: CallItemId
    type: Literal["mcp_approval_request"] = "mcp_approval_request"
    arguments: str
    name: str
    server_label: str


class OpenAIResponseMCPApprovalResponse(ApiModel):
    type: Literal["mcp_approval_response"] = "mcp_approval_response"
    approval_request_id: str = Field(min_length=1, max_length=256)
    approve: bool
    id: ItemId | None = None
    reason: str | None = None


class OpenAIResponseReasoningText(ApiModel):
    type: Literal["reasoning_text"] = "reasoning_text"
    text: str


class OpenAIResponseReasoningItem(ApiModel):
    """The reasoning a model returned before its answer (models that stream it)."""

    id: ItemId
    type: Literal["reasoning"] = "reasoning"
    summary: list[dict[str, Any]] = Field(default_factory=list)
    content: list[OpenAIResponseReasoningText] = Field(default_factory=list)
    status: str | None = None


def _item_type(value: Any) -> str:
    """OpenAI accepts `{"role": ..., "content": ...}` without a type: that is a message."""
    if isinstance(value, dict):
        return value.get("type", "message")
    return getattr(value, "type", "message")


OpenAIResponseInput = Annotated[
    Annotated[OpenAIResponseOutputMessageWebSearchToolCall, Tag("web_search_call")]
    | Annotated[OpenAIResponseOutputMessageFileSearchToolCall, Tag("file_search_call")]
    | Annotated[OpenAIResponseOutputMessageFunctionToolCall, Tag("function_call")]
    | Annotated[OpenAIResponseInputFunctionToolCallOutput, Tag("function_call_output")]
    | Annotated[OpenAIResponseOutputMessageMCPCall, Tag("mcp_call")]
    | Annotated[OpenAIResponseOutputMessageMCPListTools, Tag("mcp_list_tools")]
    | Annotated[OpenAIResponseMCPApprovalRequest, Tag("mcp_approval_request")]
    | Annotated[OpenAIResponseMCPApprovalResponse, Tag("mcp_approval_response")]
    | Annotated[OpenAIResponseReasoningItem, Tag("reasoning")]
    | Annotated[OpenAIResponseMessage, Tag("message")],
    Discriminator(_item_type),
]

OpenAIResponseOutput = Annotated[
    OpenAIResponseMessage
    | OpenAIResponseOutputMessageWebSearchToolCall
    | OpenAIResponseOutputMessageFileSearchToolCall
    | OpenAIResponseOutputMessageFunctionToolCall
    | OpenAIResponseOutputMessageMCPCall
    | OpenAIResponseOutputMessageMCPListTools
    | OpenAIResponseMCPApprovalRequest
    | OpenAIResponseReasoningItem,
    Field(discriminator="type"),
]


# --- tools ---------------------------------------------------------------------------------


class OpenAIResponseInputToolWebSearch(ApiModel):
    type: Literal["web_search", "web_search_preview", "web_search_preview_2025_03_11"] = (
        "web_search"
    )
    search_context_size: str | None = "medium"


class SearchRankingOptions(ApiModel):
    ranker: str | None = None
    score_threshold: float | None = 0.0


class OpenAIResponseInputToolFileSearch(ApiModel):
    type: Literal["file_search"] = "file_search"
    vector_store_ids: list[str]
    filters: dict[str, Any] | None = None
    max_num_results: int | None = Field(default=10, ge=1, le=50)
    ranking_options: SearchRankingOptions | None = None


class OpenAIResponseInputToolFunction(ApiModel):
    type: Literal["function"] = "function"
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class McpToolFilter(ApiModel):
    tool_names: list[str] | None = None
    read_only: bool | None = None


class ApprovalFilter(ApiModel):
    """Per-tool approval: OpenAI's `{"never": {"tool_names": [...]}}`, or Llama Stack's lists."""

    always: list[str] | McpToolFilter | None = None
    never: list[str] | McpToolFilter | None = None


class OpenAIResponseInputToolMCP(ApiModel):
    type: Literal["mcp"] = "mcp"
    server_label: str = Field(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9_.-]+$")
    server_url: str = Field(min_length=1, max_length=2048)
    server_description: str | None = None
    headers: dict[str, str] | None = None
    authorization: str | None = None  # sent as `Authorization: Bearer <it>`
    # OpenAI's default: a call waits for approval unless the request says otherwise.
    require_approval: Literal["always", "never"] | ApprovalFilter = "always"
    allowed_tools: list[str] | McpToolFilter | None = None


OpenAIResponseInputTool = Annotated[
    OpenAIResponseInputToolWebSearch
    | OpenAIResponseInputToolFileSearch
    | OpenAIResponseInputToolFunction
    | OpenAIResponseInputToolMCP,
    Field(discriminator="type"),
]


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


#: Ids in keys or paths: letters, digits, `_` and `-` (so they cannot inject key separators).
ID = r"^[A-Za-z0-9_-]{1,128}$"


class ConversationReference(ApiModel):
    """`conversation` as an object: `{"id": "conv_..."}`."""

    id: str = Field(pattern=ID)


class StreamOptions(ApiModel):
    include_obfuscation: bool | None = None


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


# --- stream events -------------------------------------------------------------------------


class StreamEvent(ApiModel):
    sequence_number: int


class ResponseCreated(StreamEvent):
    type: Literal["response.created"] = "response.created"
    response: OpenAIResponseObject


class ResponseInProgress(StreamEvent):
    type: Literal["response.in_progress"] = "response.in_progress"
    response: OpenAIResponseObject


class ResponseCompleted(StreamEvent):
    type: Literal["response.completed"] = "response.completed"
    response: OpenAIResponseObject


class ResponseFailed(StreamEvent):
    type: Literal["response.failed"] = "response.failed"
    response: OpenAIResponseObject


class ResponseIncomplete(StreamEvent):
    type: Literal["response.incomplete"] = "response.incomplete"
    response: OpenAIResponseObject


class ResponseQueued(StreamEvent):
    type: Literal["response.queued"] = "response.queued"
    response: OpenAIResponseObject


class ResponseCancelled(StreamEvent):
    """The last event of a cancelled background response. OpenAI's API has no stream event for
    a cancellation; this one follows the naming of the others (status `cancelled`)."""

    type: Literal["response.cancelled"] = "response.cancelled"
    response: OpenAIResponseObject


class OutputItemAdded(StreamEvent):
    type: Literal["response.output_item.added"] = "response.output_item.added"
    response_id: str | None = None
    item: OpenAIResponseOutput
    output_index: int


class OutputItemDone(StreamEvent):
    type: Literal["response.output_item.done"] = "response.output_item.done"
    response_id: str | None = None
    item: OpenAIResponseOutput
    output_index: int


class ContentPartAdded(StreamEvent):
    type: Literal["response.content_part.added"] = "response.content_part.added"
    item_id: str
    output_index: int
    content_index: int
    part: OpenAIResponseOutputMessageContent


class ContentPartDone(StreamEvent):
    type: Literal["response.content_part.done"] = "response.content_part.done"
    item_id: str
    output_index: int
    content_index: int
    part: OpenAIResponseOutputMessageContent


class OutputTextDelta(StreamEvent):
    type: Literal["response.output_text.delta"] = "response.output_text.delta"
    item_id: str
    output_index: int
    content_index: int
    delta: str
    logprobs: list[dict[str, Any]] = Field(default_factory=list)


class OutputTextAnnotationAdded(StreamEvent):
    type: Literal["response.output_text.annotation.added"] = "response.output_text.annotation.added"
    item_id: str
    output_index: int
    content_index: int
    annotation_index: int
    annotation: OpenAIResponseAnnotations


class OutputTextDone(StreamEvent):
    type: Literal["response.output_text.done"] = "response.output_text.done"
    item_id: str
    output_index: int
    content_index: int
    text: str
    logprobs: list[dict[str, Any]] = Field(default_factory=list)


class ReasoningTextDelta(StreamEvent):
    type: Literal["response.reasoning_text.delta"] = "response.reasoning_text.delta"
    item_id: str
    output_index: int
    content_index: int
    delta: str


class ReasoningTextDone(StreamEvent):
    type: Literal["response.reasoning_text.done"] = "response.reasoning_text.done"
    item_id: str
    output_index: int
    content_index: int
    text: str


class RefusalDelta(StreamEvent):
    type: Literal["response.refusal.delta"] = "response.refusal.delta"
    item_id: str
    output_index: int
    content_index: int
    delta: str


class RefusalDone(StreamEvent):
    type: Literal["response.refusal.done"] = "response.refusal.done"
    item_id: str
    output_index: int
    content_index: int
    refusal: str


class FunctionCallArgumentsDelta(StreamEvent):
    type: Literal["response.function_call_arguments.delta"] = (
        "response.function_call_arguments.delta"
    )
    item_id: str
    output_index: int
    delta: str


class FunctionCallArgumentsDone(StreamEvent):
    type: Literal["response.function_call_arguments.done"] = "response.function_call_arguments.done"
    item_id: str
    output_index: int
    arguments: str


class WebSearchCallInProgress(StreamEvent):
    type: Literal["response.web_search_call.in_progress"] = "response.web_search_call.in_progress"
    item_id: str
    output_index: int


class WebSearchCallSearching(StreamEvent):
    type: Literal["response.web_search_call.searching"] = "response.web_search_call.searching"
    item_id: str
    output_index: int


class WebSearchCallCompleted(StreamEvent):
    type: Literal["response.web_search_call.completed"] = "response.web_search_call.completed"
    item_id: str
    output_index: int


class FileSearchCallInProgress(StreamEvent):
    type: Literal["response.file_search_call.in_progress"] = "response.file_search_call.in_progress"
    item_id: str
    output_index: int


class FileSearchCallSearching(StreamEvent):
    type: Literal["response.file_search_call.searching"] = "response.file_search_call.searching"
    item_id: str
    output_index: int


class FileSearchCallCompleted(StreamEvent):
    type: Literal["response.file_search_call.completed"] = "response.file_search_call.completed"
    item_id: str
    output_index: int


class McpListToolsInProgress(StreamEvent):
    type: Literal["response.mcp_list_tools.in_progress"] = "response.mcp_list_tools.in_progress"
    item_id: str
    output_index: int


class McpListToolsFailed(StreamEvent):
    type: Literal["response.mcp_list_tools.failed"] = "response.mcp_list_tools.failed"
    item_id: str
    output_index: int


class McpListToolsCompleted(StreamEvent):
    type: Literal["response.mcp_list_tools.completed"] = "response.mcp_list_tools.completed"
    item_id: str
    output_index: int


class McpCallArgumentsDelta(StreamEvent):
    type: Literal["response.mcp_call_arguments.delta"] = "response.mcp_call_arguments.delta"
    item_id: str
    output_index: int
    delta: str


class McpCallArgumentsDone(StreamEvent):
    type: Literal["response.mcp_call_arguments.done"] = "response.mcp_call_arguments.done"
    item_id: str
    output_index: int
    arguments: str


class McpCallInProgress(StreamEvent):
    type: Literal["response.mcp_call.in_progress"] = "response.mcp_call.in_progress"
    item_id: str
    output_index: int


class McpCallFailed(StreamEvent):
    type: Literal["response.mcp_call.failed"] = "response.mcp_call.failed"
    item_id: str
    output_index: int


class McpCallCompleted(StreamEvent):
    type: Literal["response.mcp_call.completed"] = "response.mcp_call.completed"
    item_id: str
    output_index: int


OpenAIResponseObjectStream = Annotated[
    ResponseCreated
    | ResponseInProgress
    | OutputItemAdded
    | OutputItemDone
    | ContentPartAdded
    | ContentPartDone
    | OutputTextDelta
    | OutputTextDone
    | ReasoningTextDelta
    | ReasoningTextDone
    | RefusalDelta
    | RefusalDone
    | FunctionCallArgumentsDelta
    | FunctionCallArgumentsDone
    | WebSearchCallInProgress
    | WebSearchCallSearching
    | WebSearchCallCompleted
    | OutputTextAnnotationAdded
    | FileSearchCallInProgress
    | FileSearchCallSearching
    | FileSearchCallCompleted
    | McpListToolsInProgress
    | McpListToolsFailed
    | McpListToolsCompleted
    | McpCallArgumentsDelta
    | McpCallArgumentsDone
    | McpCallInProgress
    | McpCallFailed
    | McpCallCompleted
    | ResponseCompleted
    | ResponseFailed
    | ResponseIncomplete
    | ResponseQueued
    | ResponseCancelled,
    Field(discriminator="type"),
]
