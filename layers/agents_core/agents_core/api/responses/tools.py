"""The tools a request offers the model: web search, file search, functions (alone or grouped in
a namespace), MCP servers."""

from typing import Annotated, Any, Literal

from pydantic import Field

from ..common import ApiModel

# --- tools ---------------------------------------------------------------------------------


class OpenAIResponseInputToolWebSearch(ApiModel):
    type: Literal["web_search", "web_search_preview", "web_search_preview_2025_03_11"] = (
        "web_search"
    )
    search_context_size: str | None = "medium"
    # False: cached results only, no live fetch. This deployment has no cache of its own, so
    # the tool is then not offered to the model (docs/architecture.md, "Responses fields").
    external_web_access: bool | None = None
    filters: dict[str, Any] | None = None  # accepted, not applied by the search provider
    user_location: dict[str, Any] | None = None  # accepted, not applied


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
    model_config = ApiModel.model_config | {"populate_by_name": True, "serialize_by_alias": True}

    type: Literal["function"] = "function"
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    # Accepted as OpenAI's API takes them; every function is offered to the model at once and
    # its output is a string (docs/architecture.md, "Responses fields").
    defer_loading: bool | None = None
    allowed_callers: list[str] | None = None
    output_schema: dict[str, Any] | None = None
    async_: bool | None = Field(default=None, alias="async")


#: Between a namespace's name and its function's, in the tool name the chat model sees.
NAMESPACE_SEPARATOR = "__"


class OpenAIResponseInputToolNamespace(ApiModel):
    """Functions grouped under a name (Codex CLI sends its sub-agent tools so). The model sees
    each as `<namespace>__<name>`; its calls come back as `function_call` items with `name` and
    `namespace`."""

    type: Literal["namespace"] = "namespace"
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    description: str = Field(max_length=4096)
    tools: list[OpenAIResponseInputToolFunction] = Field(min_length=1, max_length=128)


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
    | OpenAIResponseInputToolNamespace
    | OpenAIResponseInputToolMCP,
    Field(discriminator="type"),
]
