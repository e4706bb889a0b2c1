"""Tool groups, tools and the tool runtime as Llama Stack v0.2.14 shapes them
(`llama_stack/apis/tools/tools.py`), so `llama-stack-client` parses every answer.

A tool group is an MCP server (provider `model-context-protocol`, with `mcp_endpoint.uri`) or a
built-in group (`builtin::websearch`). Every value that ends up in a DynamoDB key is bounded here.
"""

import json
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from ..errors import InvalidRequest
from .common import URL, ApiModel, InterleavedContent, ToolParameter

MCP_PROVIDER_ID = "model-context-protocol"
PROVIDER_DATA_HEADER = "X-LlamaStack-Provider-Data"
WEB_SEARCH_GROUP = "builtin::websearch"
RAG_GROUP = "builtin::rag"
#: Ids under this prefix are the server's own groups: a caller cannot register one.
BUILTIN_PREFIX = "builtin::"

#: A group id is a key part: no `#` (the key separator), no `/` (the `group/tool` form).
TOOLGROUP_ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,256}$"
MAX_TOOL_NAME = 256
MAX_ENDPOINT_URI = 2048


class McpEndpoint(URL):
    uri: str = Field(min_length=1, max_length=MAX_ENDPOINT_URI)

    @field_validator("uri")
    @classmethod
    def _http(cls, uri: str) -> str:
        from urllib.parse import urlsplit

        parts = urlsplit(uri)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http(s) URL with a host, e.g. https://mcp.example.com/mcp")
        return uri


class RegisterToolGroupRequest(ApiModel):
    toolgroup_id: str = Field(pattern=TOOLGROUP_ID_PATTERN)
    provider_id: str = Field(min_length=1, max_length=256)
    mcp_endpoint: McpEndpoint | None = None
    args: dict[str, Any] | None = None


class ToolGroup(ApiModel):
    identifier: str
    provider_resource_id: str | None = None
    provider_id: str
    type: Literal["tool_group"] = "tool_group"
    mcp_endpoint: URL | None = None
    args: dict[str, Any] | None = None


class Tool(ApiModel):
    identifier: str
    provider_resource_id: str | None = None
    provider_id: str
    type: Literal["tool"] = "tool"
    toolgroup_id: str
    description: str
    parameters: list[ToolParameter]
    metadata: dict[str, Any] | None = None


class RuntimeToolDef(ApiModel):
    """A tool as the runtime lists it (Llama Stack's `ToolDef`, before it is a `Tool`)."""

    name: str
    description: str | None = None
    parameters: list[ToolParameter] | None = None
    metadata: dict[str, Any] | None = None


class ListToolGroupsResponse(ApiModel):
    data: list[ToolGroup]


class ListToolsResponse(ApiModel):
    data: list[Tool]


class ListToolDefsResponse(ApiModel):
    data: list[RuntimeToolDef]


class InvokeToolRequest(ApiModel):
    tool_name: str = Field(min_length=1, max_length=MAX_TOOL_NAME)
    kwargs: dict[str, Any]


class ToolInvocationResult(ApiModel):
    content: InterleavedContent | None = None
    error_message: str | None = None
    error_code: int | None = None
    metadata: dict[str, Any] | None = None


class ProviderData(ApiModel):
    """What this server reads of the `X-LlamaStack-Provider-Data` header: headers to send to
    MCP servers, keyed by endpoint URI (the v0.2.14 MCP provider's `mcp_headers`). Other keys
    are for other providers and are ignored."""

    model_config = ApiModel.model_config | {"extra": "ignore"}

    mcp_headers: dict[str, dict[str, str]] | None = None


def parse_provider_data(header: str | None) -> ProviderData:
    """The `X-LlamaStack-Provider-Data` header the Llama Stack client sends (JSON), as far as
    this server reads it; 400 when it is not a JSON object or `mcp_headers` is malformed."""
    if not header:
        return ProviderData()
    try:
        data = json.loads(header)
    except ValueError as err:
        raise InvalidRequest(f"{PROVIDER_DATA_HEADER} is not JSON: {err}") from err
    if not isinstance(data, dict):
        raise InvalidRequest(f"{PROVIDER_DATA_HEADER} must be a JSON object")
    try:
        return ProviderData.model_validate(data)
    except ValidationError as err:
        raise InvalidRequest(
            f"{PROVIDER_DATA_HEADER}: mcp_headers must map endpoint URIs to header objects"
            f" of strings ({err.error_count()} problems)"
        ) from err
