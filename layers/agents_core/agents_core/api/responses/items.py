"""The items of a response's input and output: messages and their content, tool calls and
their outputs, MCP listings and approvals, reasoning."""

from typing import Annotated, Any, Literal, Self

from pydantic import Discriminator, Field, Tag, model_validator

from ..common import ApiModel

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
    def _one_source(self) -> Self:
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


def _content_kind(value: Any) -> str:
    """A message's content: its text, or its parts, output parts when the first part is one
    (`output_text`, `refusal`), else input parts. Told, not tried: serializing a union of list
    types in turn made pydantic build an error, with a repr of the parts, for each miss."""
    if isinstance(value, str):
        return "text"
    first = value[0] if isinstance(value, list | tuple) and value else None
    kind = first.get("type") if isinstance(first, dict) else getattr(first, "type", None)
    return "output" if kind in ("output_text", "refusal") else "input"


class OpenAIResponseMessage(ApiModel):
    content: Annotated[
        Annotated[str, Tag("text")]
        | Annotated[list[OpenAIResponseInputMessageContent], Tag("input")]
        | Annotated[list[OpenAIResponseOutputMessageContent], Tag("output")],
        Discriminator(_content_kind),
    ]
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
    namespace: str | None = None  # the namespace tool the function belongs to, if any


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
    # The reasoning as an opaque blob this deployment signed for the caller (with `include:
    # ["reasoning.encrypted_content"]`); one it did not make is a 400 in the input.
    encrypted_content: str | None = Field(default=None, max_length=4 * 1024 * 1024)


class OpenAIResponseCompactionItem(ApiModel):
    """What `/responses/compact` makes of a conversation: an opaque blob holding its summary,
    which stands for it when sent back as input."""

    type: Literal["compaction"] = "compaction"
    id: ItemId | None = None
    encrypted_content: str = Field(max_length=4 * 1024 * 1024)
    created_by: str | None = None


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
    | Annotated[OpenAIResponseCompactionItem, Tag("compaction")]
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
    | OpenAIResponseReasoningItem
    | OpenAIResponseCompactionItem,
    Field(discriminator="type"),
]
