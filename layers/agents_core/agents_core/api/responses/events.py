"""The stream events of a response, as the official `openai` SDK expects them (the contract
omits `response.in_progress`, `response.content_part.*` and `response.failed`)."""

from typing import Annotated, Any, Literal

from pydantic import Field

from ..common import ApiModel
from .items import (
    OpenAIResponseAnnotations,
    OpenAIResponseOutput,
    OpenAIResponseOutputMessageContent,
)
from .objects import OpenAIResponseObject

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
