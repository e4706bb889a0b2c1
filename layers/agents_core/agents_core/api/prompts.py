"""The Prompts API (OGX's `/v1/prompts`): versioned prompt templates with `{{ variable }}`
placeholders, and the `prompt` a response is created from."""

import re
from typing import Annotated, Literal, Self

from pydantic import Field, model_validator

from .common import ApiModel

#: `pmpt_` and 48 lowercase hex digits, as OGX mints them.
PROMPT_ID = r"^pmpt_[0-9a-f]{48}$"
#: A placeholder in a template: `{{ name }}`.
PLACEHOLDER = re.compile(r"{{\s*(\w+)\s*}}")

#: A template's text, bounded so that a prompt (one item, with its default's copy) fits.
MAX_PROMPT_CHARS = 100_000
VariableName = Annotated[str, Field(pattern=r"^\w{1,64}$")]


def undeclared(text: str | None, variables: list[str]) -> list[str]:
    return sorted(set(PLACEHOLDER.findall(text or "")) - set(variables))


class Prompt(ApiModel):
    prompt: str | None = None
    version: int = Field(ge=1)
    prompt_id: str = Field(pattern=PROMPT_ID)
    variables: list[str] = Field(default_factory=list)
    is_default: bool = False


class ListPromptsResponse(ApiModel):
    data: list[Prompt]
    object: Literal["list"] = "list"


class _Template(ApiModel):
    prompt: str = Field(max_length=MAX_PROMPT_CHARS)
    variables: list[VariableName] | None = Field(default=None, max_length=64)

    @model_validator(mode="after")
    def _declared(self) -> Self:
        missing = undeclared(self.prompt, self.variables or [])
        if missing:
            raise ValueError(f"the prompt uses variables it does not declare: {missing}")
        return self


class CreatePromptRequest(_Template):
    pass


class UpdatePromptRequest(_Template):
    version: int = Field(ge=1, description="The prompt's latest version, which this one follows")
    set_as_default: bool = True


class SetDefaultVersionRequest(ApiModel):
    version: int = Field(ge=1)


class InputTextVariable(ApiModel):
    type: Literal["input_text"] = "input_text"
    text: str


class ResponsePrompt(ApiModel):
    """`prompt` on `responses.create`: a stored template, its version (the default when none)
    and the values of its variables; the rendered text goes before `instructions`."""

    id: str = Field(pattern=PROMPT_ID)
    version: str | None = Field(default=None, pattern=r"^[1-9][0-9]{0,8}$")
    variables: dict[str, str | InputTextVariable] | None = Field(default=None, max_length=64)
