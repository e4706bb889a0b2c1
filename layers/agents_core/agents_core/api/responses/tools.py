"""The tools a request offers the model: web search, file search, functions, MCP servers."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from ..common import ApiModel

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
