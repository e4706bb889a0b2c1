"""Shields and safety wire types: the Llama Stack v0.2.14 Shields and Safety APIs
(`/v1/shields`, `/v1/safety/run-shield`) and OpenAI's moderation objects (`/v1/moderations`).

    Shield(identifier="guard", provider_id="bedrock", provider_resource_id="gr1abc",
           params={"guardrailVersion": "1"})
"""

import json
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from .common import (
    ApiModel,
    CompletionMessage,
    InterleavedContent,
    SafetyViolation,
    ToolResponseMessage,
    UserMessage,
)

__all__ = [
    "MAX_SHIELD_PARAMS_BYTES",
    "SHIELD_ID_PATTERN",
    "ListShieldsResponse",
    "Message",
    "ModerationInput",
    "ModerationObject",
    "ModerationResult",
    "RegisterShieldRequest",
    "RunShieldRequest",
    "RunShieldResponse",
    "SafetyViolation",
    "Shield",
    "ShieldProviderId",
    "SystemMessage",
]

#: Shield ids are keys and URL paths: Llama Stack ids such as `meta-llama/Llama-Guard-3-8B`
#: pass; `#` (the key separator) and anything unbounded do not.
SHIELD_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,255}$"
#: A shield's params as JSON, at most (they are stored with it, and read on every check).
MAX_SHIELD_PARAMS_BYTES = 16 * 1024
#: A run-shield request's messages or a moderation's inputs, at most.
MAX_MESSAGES = 100

ShieldProviderId = Literal["llama-guard", "bedrock", "offline"]


class Shield(ApiModel):
    """A registered shield: the provider that runs it and that provider's own shield (a Llama
    Guard model id, a Bedrock guardrail id, an offline shield name)."""

    identifier: str
    provider_resource_id: str | None = None
    provider_id: str
    type: Literal["shield"] = "shield"
    params: dict[str, Any] | None = None


class ListShieldsResponse(ApiModel):
    data: list[Shield]


class RegisterShieldRequest(ApiModel):
    shield_id: str = Field(pattern=SHIELD_ID_PATTERN)
    provider_shield_id: str | None = Field(default=None, min_length=1, max_length=2048)
    provider_id: ShieldProviderId
    params: dict[str, Any] | None = None

    @field_validator("params")
    @classmethod
    def _bounded(cls, params: dict[str, Any] | None) -> dict[str, Any] | None:
        if params is not None and len(json.dumps(params)) > MAX_SHIELD_PARAMS_BYTES:
            raise ValueError(f"must be at most {MAX_SHIELD_PARAMS_BYTES} bytes of JSON")
        return params


class SystemMessage(ApiModel):
    role: Literal["system"] = "system"
    content: InterleavedContent


Message = Annotated[
    UserMessage | SystemMessage | ToolResponseMessage | CompletionMessage,
    Field(discriminator="role"),
]


class RunShieldRequest(ApiModel):
    shield_id: str = Field(pattern=SHIELD_ID_PATTERN)
    messages: list[Message] = Field(min_length=1, max_length=MAX_MESSAGES)
    #: The contract requires it; its keys override the shield's registered params for this run.
    params: dict[str, Any] = Field(default_factory=dict)


class RunShieldResponse(ApiModel):
    violation: SafetyViolation | None = None


# --- OpenAI moderations --------------------------------------------------------------------


class ModerationTextInput(ApiModel):
    type: Literal["text"] = "text"
    text: str


class ModerationImageInput(ApiModel):
    type: Literal["image_url"] = "image_url"
    image_url: dict[str, Any]


ModerationInput = Annotated[ModerationTextInput | ModerationImageInput, Field(discriminator="type")]


class ModerationRequest(ApiModel):
    input: str | list[str] | list[ModerationInput]
    #: The shield to run (OpenAI's model names; here a shield id, e.g. `offline`).
    model: str | None = Field(default=None, pattern=SHIELD_ID_PATTERN)

    @field_validator("input")
    @classmethod
    def _bounded(cls, value: Any) -> Any:
        if isinstance(value, list) and not 1 <= len(value) <= MAX_MESSAGES:
            raise ValueError(f"must hold between 1 and {MAX_MESSAGES} inputs")
        return value


class ModerationResult(ApiModel):
    """OpenAI's `Moderation` (every category it names, flagged or not), plus the shield's own
    words: `user_message` and `metadata` of its violation, as OGX answers them."""

    flagged: bool
    categories: dict[str, bool]
    category_scores: dict[str, float]
    category_applied_input_types: dict[str, list[str]]
    user_message: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class ModerationObject(ApiModel):
    id: str
    model: str
    results: list[ModerationResult]
