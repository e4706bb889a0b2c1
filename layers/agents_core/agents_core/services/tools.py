"""Tool groups: the registry (built-in groups every tenant has, MCP servers a tenant registers),
the tools they offer, and calls to them, over the tool runtime (`agents_core.tools`).

A registered MCP group stores its endpoint only; its tools are listed from the server when asked,
through the runtime's short per-container cache, so what `GET /v1/tools` shows, what
`/v1/tool-runtime/invoke` finds and what an agent's model is offered are the same, current list.

    svc = ToolGroupService(ToolGroupStore(dynamodb, table), settings)
    await svc.register("default", RegisterToolGroupRequest(...), ProviderData())
    tools = await svc.resolve("default", agent.agent_config.toolgroups, provider_data)
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..api.agents import AgentToolGroupWithArgs
from ..api.common import URL, ToolParameter
from ..api.tools import (
    BUILTIN_PREFIX,
    MAX_TOOL_NAME,
    MCP_PROVIDER_ID,
    RAG_GROUP,
    TOOLGROUP_ID_PATTERN,
    WEB_SEARCH_GROUP,
    ProviderData,
    RegisterToolGroupRequest,
    RuntimeToolDef,
    Tool,
    ToolGroup,
    ToolInvocationResult,
)
from ..errors import InvalidRequest, NotFound, UpstreamFailed
from ..log import logger
from ..settings import Settings

if TYPE_CHECKING:
    from ..store.toolgroups import ToolGroupStore
    from ..tools import ToolDefinition

#: Registered groups per tenant: every listing of all tools asks each of them.
MAX_TOOLGROUPS = 100
#: Provider ids Llama Stack's run configs give `builtin::websearch`; registering the group under
#: one of them (as scripts written for Llama Stack do) is accepted as a no-op.
LLAMA_STACK_WEB_SEARCH_PROVIDERS = ("tavily-search", "brave-search", "bing-search")


def mcp_headers_for(provider_data: ProviderData | None, uri: str) -> dict[str, str]:
    """The headers the caller gave for this MCP endpoint. URIs match on host and path, as in
    Llama Stack's MCP provider, so `http://h/mcp` and `https://h/mcp?x=1` share headers."""

    def canonical(value: str) -> str:
        parts = urlsplit(value)
        return f"{parts.netloc}/{parts.path}"

    headers: dict[str, str] = {}
    mcp_headers = provider_data.mcp_headers if provider_data is not None else None
    for endpoint, values in (mcp_headers or {}).items():
        if canonical(endpoint) == canonical(uri):
            headers.update(values)
    return headers


def tool_parameters(schema: dict[str, Any]) -> list[ToolParameter]:
    """A JSON schema's top-level properties as Llama Stack's flat parameter list."""
    required = schema.get("required")
    required = set(required) if isinstance(required, list) else set()
    properties = schema.get("properties")
    out = []
    for name, prop in (properties if isinstance(properties, dict) else {}).items():
        prop = prop if isinstance(prop, dict) else {}
        kind = prop.get("type", "string")
        if isinstance(kind, list):  # e.g. ["string", "null"]
            kind = next((k for k in kind if k != "null"), "string")
        out.append(
            ToolParameter(
                name=name,
                parameter_type=str(kind),
                description=str(prop.get("description", "")),
                required=name in required,
                default=prop.get("default"),
            )
        )
    return out


def split_tool_ref(ref: str) -> tuple[str, str | None]:
    """`group` or `group/tool` (Llama Stack's form naming one tool of a group)."""
    group, _, tool = ref.partition("/")
    if not re.fullmatch(TOOLGROUP_ID_PATTERN, group) or len(tool) > MAX_TOOL_NAME:
        raise InvalidRequest(f"{ref[:300]!r} is not a tool group id (or `group/tool`)")
    return group, tool or None


@dataclass(frozen=True)
class GroupTool:
    """A server-side tool an agent may call: what the model is offered (`definition`) and what
    runs a call (`tool.call(arguments_json) -> str`, raising `ToolFailed`). A group's `args`
    from the agent config are merged over the model's arguments, as Llama Stack does."""

    toolgroup_id: str
    definition: ToolDefinition
    tool: Any
    args: dict[str, Any] = field(default_factory=dict)

    async def call(self, arguments: str) -> str:
        if self.args:
            from ..tools import parse_arguments  # ToolFailed for arguments that are not an object

            arguments = json.dumps({**parse_arguments(arguments), **self.args})
        return await self.tool.call(arguments)


class ToolGroupService:
    def __init__(self, store: ToolGroupStore, settings: Settings, file_search: Any = None) -> None:
        self._store = store
        self._settings = settings
        #: `search(tenant, vector_store_ids, query, max_results)` for `builtin::rag`; without
        #: it (no vector stores here) the group does not exist.
        self._file_search = file_search

    # --- the runtime -------------------------------------------------------------------------

    @cached_property
    def guard(self):
        """The outbound guard every URL called for a caller goes through."""
        from ..tools import OutboundGuard

        return OutboundGuard(allow=self._settings.outbound_allow)

    @cached_property
    def web_search(self):
        """The configured web search provider (offline when none is configured)."""
        from ..tools import web_search_provider

        return web_search_provider(self._settings)

    @property
    def web_search_provider_id(self) -> str:
        """Like Llama Stack's `tavily-search`: the configured provider's name and `-search`."""
        return f"{self._settings.web_search_provider}-search"

    def _builtin_groups(self) -> dict[str, ToolGroup]:
        groups = {
            WEB_SEARCH_GROUP: ToolGroup(
                identifier=WEB_SEARCH_GROUP,
                provider_resource_id=WEB_SEARCH_GROUP,
                provider_id=self.web_search_provider_id,
            )
        }
        if self._file_search is not None:  # Llama Stack's provider id for it
            groups[RAG_GROUP] = ToolGroup(
                identifier=RAG_GROUP, provider_resource_id=RAG_GROUP, provider_id="rag-runtime"
            )
        return groups

    def _server(self, group: ToolGroup, provider_data: ProviderData):
        from ..tools import McpServer

        assert group.mcp_endpoint is not None
        uri = group.mcp_endpoint.uri
        return McpServer(uri, headers=mcp_headers_for(provider_data, uri), label=group.identifier)

    async def _definitions(
        self, group: ToolGroup, provider_data: ProviderData
    ) -> list[ToolDefinition]:
        """The group's tools as the runtime defines them (an MCP server's: listed, cached)."""
        from ..tools import KNOWLEDGE_SEARCH, WEB_SEARCH, ToolFailed, list_mcp_tools

        if group.identifier == WEB_SEARCH_GROUP:
            return [WEB_SEARCH]
        if group.identifier == RAG_GROUP:
            return [KNOWLEDGE_SEARCH]
        try:
            return await list_mcp_tools(
                self._server(group, provider_data),
                guard=self.guard,
                timeout=self._settings.mcp_call_timeout_seconds,
                cache_seconds=self._settings.mcp_list_cache_seconds,
            )
        except ToolFailed as err:
            raise UpstreamFailed(
                f"The MCP server of tool group {group.identifier} failed to list its tools: {err}"
            ) from err

    def _runner(
        self,
        tenant: str,
        group: ToolGroup,
        definition: ToolDefinition,
        provider_data: ProviderData,
    ):
        """What runs one tool of the group: the runtime's adapter for it."""
        from ..tools import KnowledgeSearchTool, McpTool, WebSearchTool

        if group.identifier == WEB_SEARCH_GROUP:
            return WebSearchTool(self.web_search, max_bytes=self._settings.tool_result_max_bytes)
        if group.identifier == RAG_GROUP:
            return KnowledgeSearchTool(
                self._file_search, tenant, max_bytes=self._settings.tool_result_max_bytes
            )
        return McpTool(
            self._server(group, provider_data),
            definition,
            guard=self.guard,
            timeout=self._settings.mcp_call_timeout_seconds,
            max_bytes=self._settings.tool_result_max_bytes,
        )

    # --- the registry ------------------------------------------------------------------------

    async def register(
        self, tenant: str, body: RegisterToolGroupRequest, provider_data: ProviderData
    ) -> ToolGroup:
        """Built-in ids answer the built-in group (a no-op). An MCP server's URL is checked by
        the outbound guard and its tools listed once (the server must answer) before the group
        is stored; a failure at any point stores nothing."""
        builtin = self._builtin_groups()
        if body.toolgroup_id.startswith(BUILTIN_PREFIX):
            group = builtin.get(body.toolgroup_id)
            if group is None:
                raise InvalidRequest(
                    f"No built-in tool group {body.toolgroup_id}; this server has"
                    f" {', '.join(builtin)}, always registered"
                )
            accepted = (group.provider_id, *LLAMA_STACK_WEB_SEARCH_PROVIDERS)
            if body.provider_id not in accepted or body.mcp_endpoint is not None:
                raise InvalidRequest(
                    f"{body.toolgroup_id} is always registered, with provider"
                    f" {group.provider_id} and no mcp_endpoint"
                )
            return group
        if body.provider_id != MCP_PROVIDER_ID:
            raise InvalidRequest(
                f"Unknown provider_id {body.provider_id!r}: an MCP server is registered with"
                f" provider_id {MCP_PROVIDER_ID!r} and mcp_endpoint; built-in groups"
                f" ({', '.join(builtin)}) need no registration"
            )
        if body.mcp_endpoint is None:
            raise InvalidRequest(f"mcp_endpoint (its uri) is required for {MCP_PROVIDER_ID}")
        group = ToolGroup(
            identifier=body.toolgroup_id,
            provider_resource_id=body.toolgroup_id,
            provider_id=MCP_PROVIDER_ID,
            mcp_endpoint=URL(uri=body.mcp_endpoint.uri),
            args=body.args,
        )
        registered = await asyncio.to_thread(self._store.list, tenant)
        if all(g.identifier != group.identifier for g in registered):
            # A new id (a taken one is answered by the store: same definition or 409).
            if len(registered) >= MAX_TOOLGROUPS:
                raise InvalidRequest(f"A tenant may register {MAX_TOOLGROUPS} tool groups at most")
            try:  # through the outbound guard (400 for a URL it refuses)
                await self._definitions(group, provider_data)
            except UpstreamFailed as err:
                raise InvalidRequest(
                    f"Cannot register {group.identifier}: the MCP server at"
                    f" {body.mcp_endpoint.uri} did not list its tools ({err.__cause__})"
                ) from err
        return await asyncio.to_thread(self._store.register, tenant, group)

    async def get(self, tenant: str, toolgroup_id: str) -> ToolGroup:
        builtin = self._builtin_groups().get(toolgroup_id)
        if builtin is not None:
            return builtin
        if toolgroup_id.startswith(BUILTIN_PREFIX):
            raise NotFound(f"Tool group {toolgroup_id} not found")
        return await asyncio.to_thread(self._store.get, tenant, toolgroup_id)

    async def list_groups(self, tenant: str) -> list[ToolGroup]:
        """The built-in groups, then the registered ones by id."""
        registered = await asyncio.to_thread(self._store.list, tenant)
        return [*self._builtin_groups().values(), *registered]

    async def unregister(self, tenant: str, toolgroup_id: str) -> None:
        if toolgroup_id in self._builtin_groups():
            raise InvalidRequest(f"{toolgroup_id} is built in: it cannot be unregistered")
        await asyncio.to_thread(self._store.unregister, tenant, toolgroup_id)

    # --- tools ---------------------------------------------------------------------------------

    async def list_tools(
        self, tenant: str, toolgroup_id: str | None, provider_data: ProviderData
    ) -> list[Tool]:
        """The tools of one group (`group` or `group/tool` names the group), or of all."""
        if toolgroup_id is not None:
            group_id, _ = split_tool_ref(toolgroup_id)
            groups = [await self.get(tenant, group_id)]
        else:
            groups = await self.list_groups(tenant)
        listed = await asyncio.gather(*(self._definitions(g, provider_data) for g in groups))
        return [self._tool(g, d) for g, defs in zip(groups, listed, strict=True) for d in defs]

    async def get_tool(self, tenant: str, tool_name: str, provider_data: ProviderData) -> Tool:
        group, definition = await self._find(tenant, tool_name, provider_data)
        return self._tool(group, definition)

    async def list_runtime_tools(
        self,
        tenant: str,
        tool_group_id: str | None,
        mcp_endpoint: str | None,
        provider_data: ProviderData,
    ) -> list[RuntimeToolDef]:
        """Llama Stack's runtime listing: an `mcp_endpoint` is listed directly (through the
        guard; nothing is registered), else the named group's tools, else every group's."""
        if mcp_endpoint is not None:
            group = ToolGroup(
                identifier=tool_group_id or "mcp",
                provider_id=MCP_PROVIDER_ID,
                mcp_endpoint=URL(uri=mcp_endpoint),
            )
            tools = [self._tool(group, d) for d in await self._definitions(group, provider_data)]
        else:
            tools = await self.list_tools(tenant, tool_group_id, provider_data)
        return [
            RuntimeToolDef(
                name=t.identifier,
                description=t.description,
                parameters=t.parameters,
                metadata=t.metadata,
            )
            for t in tools
        ]

    async def invoke(
        self, tenant: str, tool_name: str, kwargs: dict[str, Any], provider_data: ProviderData
    ) -> ToolInvocationResult:
        """Run one tool. A tool that fails answers its error as the result (error_code 1, the
        message also as content, which is what an agent's model is shown), not an HTTP error."""
        from ..tools import ToolFailed

        group, definition = await self._find(tenant, tool_name, provider_data)
        runner = self._runner(tenant, group, definition, provider_data)
        try:
            text = await runner.call(json.dumps(kwargs))
        except ToolFailed as err:
            message = str(err) or "the tool failed"
            return ToolInvocationResult(content=message, error_message=message, error_code=1)
        return ToolInvocationResult(content=text)

    async def _find(
        self, tenant: str, tool_name: str, provider_data: ProviderData
    ) -> tuple[ToolGroup, ToolDefinition]:
        """The group and definition of a tool by name (or `group/tool`): built-in groups first,
        then registered groups by id. A group whose server fails is passed over (and named in
        the 404 when no other group has the tool)."""
        if "/" in tool_name:
            group_id, name = split_tool_ref(tool_name)
            groups = [await self.get(tenant, group_id)]
        else:
            if len(tool_name) > MAX_TOOL_NAME:
                raise InvalidRequest(f"A tool name has {MAX_TOOL_NAME} characters at most")
            name = tool_name
            groups = await self.list_groups(tenant)
        listed = await asyncio.gather(
            *(self._definitions(g, provider_data) for g in groups), return_exceptions=True
        )
        failed = []
        for group, defs in zip(groups, listed, strict=True):
            if isinstance(defs, BaseException):
                if not isinstance(defs, UpstreamFailed | InvalidRequest):
                    raise defs
                failed.append(group.identifier)
                logger.warning("tool group unavailable", extra={"error": str(defs)})
                continue
            definition = next((d for d in defs if d.name == name), None)
            if definition is not None:
                return group, definition
        unavailable = f" (unavailable now: {', '.join(failed)})" if failed else ""
        raise NotFound(f"Tool {tool_name} not found{unavailable}")

    def _tool(self, group: ToolGroup, definition: ToolDefinition) -> Tool:
        metadata = {"endpoint": group.mcp_endpoint.uri} if group.mcp_endpoint else None
        return Tool(
            identifier=definition.name,
            provider_resource_id=definition.name,
            provider_id=group.provider_id,
            toolgroup_id=group.identifier,
            description=definition.description or "",
            parameters=tool_parameters(definition.parameters),
            metadata=metadata,
        )

    # --- for the agent loop ----------------------------------------------------------------------

    async def resolve(
        self,
        tenant: str,
        toolgroups: list[str | AgentToolGroupWithArgs],
        provider_data: ProviderData,
    ) -> list[GroupTool]:
        """An agent's (or turn's) `toolgroups` as the server-side tools its model is offered,
        in the order named. 400 for a group that is not there, a `group/tool` the group lacks,
        or a tool name offered twice (Llama Stack refuses those too)."""
        refs = []
        for entry in toolgroups:
            name, args = (entry, {}) if isinstance(entry, str) else (entry.name, entry.args)
            refs.append((*split_tool_ref(name), args))
        if not refs:
            return []
        builtin = self._builtin_groups()
        registered = {}
        if any(group_id not in builtin for group_id, _, _ in refs):
            stored = await asyncio.to_thread(self._store.list, tenant)
            registered = {g.identifier: g for g in stored}
        groups = []
        for group_id, _, _ in refs:
            group = builtin.get(group_id) or registered.get(group_id)
            if group is None:
                raise InvalidRequest(
                    f"Tool group {group_id} is not registered; available:"
                    f" {', '.join([*builtin, *registered])}"
                )
            groups.append(group)
        listed = await asyncio.gather(*(self._definitions(g, provider_data) for g in groups))
        out: dict[str, GroupTool] = {}
        for group, (group_id, only, args), defs in zip(groups, refs, listed, strict=True):
            chosen = [d for d in defs if only in (None, d.name)]
            if only is not None and not chosen:
                raise InvalidRequest(f"Tool group {group_id} has no tool {only}")
            for definition in chosen:
                if definition.name in out:
                    if out[definition.name].toolgroup_id == group_id:
                        continue  # the same group named twice
                    raise InvalidRequest(f"Tool {definition.name} is offered by two tool groups")
                runner = self._runner(tenant, group, definition, provider_data)
                out[definition.name] = GroupTool(group_id, definition, runner, dict(args))
        return list(out.values())
