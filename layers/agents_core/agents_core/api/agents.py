"""Agents API models: agent config, sessions, turns, steps and the turn stream events."""

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, Self

from pydantic import Field, model_validator

from .common import (
    URL,
    ApiModel,
    CompletionMessage,
    ContentDelta,
    InterleavedContent,
    ResponseFormat,
    SafetyViolation,
    SamplingParams,
    ToolCall,
    ToolChoice,
    ToolConfig,
    ToolDef,
    ToolPromptFormat,
    ToolResponse,
    TurnInputMessage,
)


class Attachment(ApiModel):
    content: InterleavedContent | URL
    mime_type: str


class Document(ApiModel):
    content: InterleavedContent | URL
    mime_type: str


# --- steps ---------------------------------------------------------------------------------


class StepType(StrEnum):
    inference = "inference"
    tool_execution = "tool_execution"
    shield_call = "shield_call"
    memory_retrieval = "memory_retrieval"


class StepCommon(ApiModel):
    turn_id: str
    step_id: str
    started_at: datetime | None = None
    completed_at: datetime | None = None


class InferenceStep(StepCommon):
    step_type: Literal["inference"] = "inference"
    model_response: CompletionMessage


class ToolExecutionStep(StepCommon):
    step_type: Literal["tool_execution"] = "tool_execution"
    tool_calls: list[ToolCall]
    tool_responses: list[ToolResponse]


class ShieldCallStep(StepCommon):
    step_type: Literal["shield_call"] = "shield_call"
    violation: SafetyViolation | None = None


class MemoryRetrievalStep(StepCommon):
    step_type: Literal["memory_retrieval"] = "memory_retrieval"
    vector_db_ids: str
    inserted_context: InterleavedContent


Step = Annotated[
    InferenceStep | ToolExecutionStep | ShieldCallStep | MemoryRetrievalStep,
    Field(discriminator="step_type"),
]


class AgentStepResponse(ApiModel):
    step: Step


# --- turns and sessions --------------------------------------------------------------------


class Turn(ApiModel):
    turn_id: str
    session_id: str
    input_messages: list[TurnInputMessage]
    steps: list[Step]
    output_message: CompletionMessage
    output_attachments: list[Attachment] | None = Field(default_factory=list)
    started_at: datetime
    completed_at: datetime | None = None


class Session(ApiModel):
    session_id: str
    session_name: str
    turns: list[Turn]
    started_at: datetime


class SessionPage(Session):
    """A session read as it is answered: `has_more` (this service's extension) is there, and
    true, only when later turns were left for `?starting_after=<the last turn_id>`."""

    has_more: bool | None = None


# --- agents --------------------------------------------------------------------------------


class AgentToolGroupWithArgs(ApiModel):
    name: str
    args: dict[str, Any]


AgentToolGroup = str | AgentToolGroupWithArgs


class AgentConfigCommon(ApiModel):
    sampling_params: SamplingParams | None = Field(default_factory=SamplingParams)
    input_shields: list[str] | None = Field(default_factory=list)
    output_shields: list[str] | None = Field(default_factory=list)
    toolgroups: list[AgentToolGroup] | None = Field(default_factory=list)
    client_tools: list[ToolDef] | None = Field(default_factory=list)
    tool_choice: ToolChoice | None = Field(default=None, description="Deprecated: use tool_config.")
    tool_prompt_format: ToolPromptFormat | None = Field(
        default=None, description="Deprecated: use tool_config."
    )
    tool_config: ToolConfig | None = None
    max_infer_iters: int | None = Field(default=10, ge=1)

    @model_validator(mode="after")
    def _fold_deprecated_tool_fields(self) -> Self:
        """The deprecated top-level fields may only repeat `tool_config`, never contradict it."""
        if self.tool_config is not None:
            if self.tool_choice and self.tool_config.tool_choice != self.tool_choice:
                raise ValueError(
                    "tool_choice is deprecated. Use tool_choice in tool_config instead."
                )
            if (
                self.tool_prompt_format
                and self.tool_config.tool_prompt_format != self.tool_prompt_format
            ):
                raise ValueError(
                    "tool_prompt_format is deprecated. "
                    "Use tool_prompt_format in tool_config instead."
                )
        else:
            params: dict[str, Any] = {}
            if self.tool_choice:
                params["tool_choice"] = self.tool_choice
            if self.tool_prompt_format:
                params["tool_prompt_format"] = self.tool_prompt_format
            self.tool_config = ToolConfig(**params)
        return self


class AgentConfig(AgentConfigCommon):
    model: str = Field(min_length=1)
    instructions: str
    name: str | None = None
    enable_session_persistence: bool | None = False
    response_format: ResponseFormat | None = None


class Agent(ApiModel):
    agent_id: str
    agent_config: AgentConfig
    created_at: datetime


class AgentConfigOverridablePerTurn(AgentConfigCommon):
    instructions: str | None = None


# --- requests and responses of the routes --------------------------------------------------


class CreateAgentRequest(ApiModel):
    agent_config: AgentConfig


class AgentCreateResponse(ApiModel):
    agent_id: str


class CreateAgentSessionRequest(ApiModel):
    session_name: str


class AgentSessionCreateResponse(ApiModel):
    session_id: str


class CreateAgentTurnRequest(ApiModel):
    messages: list[TurnInputMessage] = Field(min_length=1)
    #: Extension: this turn's system instructions instead of the agent's.
    instructions: str | None = None
    stream: bool | None = False
    documents: list[Document] | None = None
    toolgroups: list[AgentToolGroup] | None = None
    tool_config: ToolConfig | None = None


class ResumeAgentTurnRequest(ApiModel):
    tool_responses: list[ToolResponse]
    stream: bool | None = False


class AgentTurnResumeRequest(ResumeAgentTurnRequest):
    """A resume addressed by ids in the body: the resume queue's message format."""

    agent_id: str
    session_id: str
    turn_id: str


# --- the turn stream -----------------------------------------------------------------------


class AgentTurnResponseEventType(StrEnum):
    step_start = "step_start"
    step_complete = "step_complete"
    step_progress = "step_progress"
    turn_start = "turn_start"
    turn_complete = "turn_complete"
    turn_awaiting_input = "turn_awaiting_input"


class AgentTurnResponseStepStartPayload(ApiModel):
    event_type: Literal["step_start"] = "step_start"
    step_type: StepType
    step_id: str
    metadata: dict[str, Any] | None = Field(default_factory=dict)


class AgentTurnResponseStepProgressPayload(ApiModel):
    event_type: Literal["step_progress"] = "step_progress"
    step_type: StepType
    step_id: str
    delta: ContentDelta


class AgentTurnResponseStepCompletePayload(ApiModel):
    event_type: Literal["step_complete"] = "step_complete"
    step_type: StepType
    step_id: str
    step_details: Step


class AgentTurnResponseTurnStartPayload(ApiModel):
    event_type: Literal["turn_start"] = "turn_start"
    turn_id: str


class AgentTurnResponseTurnCompletePayload(ApiModel):
    event_type: Literal["turn_complete"] = "turn_complete"
    turn: Turn


class AgentTurnResponseTurnAwaitingInputPayload(ApiModel):
    event_type: Literal["turn_awaiting_input"] = "turn_awaiting_input"
    turn: Turn


AgentTurnResponseEventPayload = Annotated[
    AgentTurnResponseStepStartPayload
    | AgentTurnResponseStepProgressPayload
    | AgentTurnResponseStepCompletePayload
    | AgentTurnResponseTurnStartPayload
    | AgentTurnResponseTurnCompletePayload
    | AgentTurnResponseTurnAwaitingInputPayload,
    Field(discriminator="event_type"),
]


class AgentTurnResponseEvent(ApiModel):
    payload: AgentTurnResponseEventPayload


class AgentTurnResponseStreamChunk(ApiModel):
    event: AgentTurnResponseEvent
