"""What the engine needs to run tools on the server: a port, like its storage.

The services implement it over the tool runtime (MCP servers, web search, the outbound guard)
and the tenant's registered tool groups; engine tests hand in a fake. Both faces use it: the
Agents face asks for an agent's tool groups, the Responses face for a request's MCP servers and
web search.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..inference.types import ToolSpec
from .loop import ServerTool


@dataclass
class ServerToolset:
    """Tools a run may call on the server: what the model is shown, and who answers each."""

    specs: list[ToolSpec] = field(default_factory=list)
    tools: dict[str, ServerTool] = field(default_factory=dict)

    def add(self, spec: ToolSpec, tool: ServerTool) -> None:
        self.specs.append(spec)
        self.tools[spec.name] = tool


@dataclass(frozen=True)
class McpEndpoint:
    """An MCP server a caller names (a Responses `mcp` tool): its URL, the headers to send it
    (the caller's credentials for it) and its label in output items."""

    url: str
    label: str
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FileHit:
    """A chunk of a file that a search of the tenant's vector stores found."""

    file_id: str
    filename: str
    score: float
    text: str
    attributes: Mapping[str, Any] = field(default_factory=dict)


class ToolRuntime(Protocol):
    async def check_url(self, url: str) -> None:
        """Refuse (InvalidRequest) a URL the server must not call for a caller."""
        ...

    async def mcp_tools(self, endpoint: McpEndpoint) -> list[ToolSpec]:
        """The server's tools (cached briefly); raises when it cannot be listed."""
        ...

    def mcp_tool(self, endpoint: McpEndpoint, name: str) -> ServerTool: ...

    def web_search(self) -> tuple[ToolSpec, ServerTool]: ...

    async def file_search(
        self,
        tenant: str,
        vector_store_ids: Sequence[str],
        query: str,
        max_results: int,
        filters: Mapping[str, Any] | None = None,
        score_threshold: float | None = None,
    ) -> list[FileHit]:
        """The best chunks for `query` across the tenant's stores, best first; NotFound for a
        store the tenant does not have."""
        ...

    async def fetch(self, url: str, max_bytes: int) -> tuple[bytes, str]:
        """A document a caller names by URL (`input_file`), through the outbound guard: its
        bytes and media type; InvalidRequest for a refused URL, TooLarge past `max_bytes`."""
        ...

    async def toolgroups(
        self, tenant: str, groups: Sequence[Any], provider_data: Any
    ) -> ServerToolset:
        """The tools of an agent's `toolgroups` (names or `{name, args}`); InvalidRequest for a
        group the tenant has not registered. `provider_data`: what the Llama Stack client sent
        in its provider-data header (`mcp_headers` per endpoint), passed through as it came."""
        ...
