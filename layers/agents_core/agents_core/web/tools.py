"""Routes of tool groups, tools and the tool runtime (Llama Stack v0.2.14's `/v1/toolgroups`,
`/v1/tools`, `/v1/tool-runtime/*`), per tenant.

Calls to MCP servers carry the headers the caller gives for them in `X-LlamaStack-Provider-Data`
(`{"mcp_headers": {"<endpoint uri>": {"Authorization": "Bearer ..."}}}`), as the Llama Stack
client sends them; they are used for that request only, never stored.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from ..api.tools import (
    MAX_ENDPOINT_URI,
    MAX_TOOL_NAME,
    TOOLGROUP_ID_PATTERN,
    InvokeToolRequest,
    ListToolDefsResponse,
    ListToolGroupsResponse,
    ListToolsResponse,
    McpEndpoint,
    RegisterToolGroupRequest,
    Tool,
    ToolGroup,
    ToolInvocationResult,
)
from ..errors import InvalidRequest
from .common import json_response
from .deps import Provider, Svc, Tenant

router = APIRouter(prefix="/v1", tags=["Tool groups"])

ToolGroupId = Annotated[str, Path(pattern=TOOLGROUP_ID_PATTERN)]
#: A tool's name, or `group/tool`.
ToolName = Annotated[str, Path(min_length=1, max_length=2 * MAX_TOOL_NAME + 1)]
ToolGroupRef = Annotated[str | None, Query(min_length=1, max_length=2 * MAX_TOOL_NAME + 1)]


@router.post("/toolgroups", responses={200: {"model": ToolGroup}})
async def register_tool_group(
    body: RegisterToolGroupRequest, tenant: Tenant, svc: Svc, data: Provider
) -> Response:
    return json_response(await svc.toolgroups.register(tenant, body, data))


@router.get("/toolgroups", responses={200: {"model": ListToolGroupsResponse}})
async def list_tool_groups(tenant: Tenant, svc: Svc) -> Response:
    return json_response(ListToolGroupsResponse(data=await svc.toolgroups.list_groups(tenant)))


@router.get("/toolgroups/{toolgroup_id:path}", responses={200: {"model": ToolGroup}})
async def get_tool_group(toolgroup_id: ToolGroupId, tenant: Tenant, svc: Svc) -> Response:
    return json_response(await svc.toolgroups.get(tenant, toolgroup_id))


@router.delete("/toolgroups/{toolgroup_id:path}", status_code=204)
async def unregister_tool_group(toolgroup_id: ToolGroupId, tenant: Tenant, svc: Svc) -> Response:
    await svc.toolgroups.unregister(tenant, toolgroup_id)
    return Response(status_code=204)


@router.get("/tools", responses={200: {"model": ListToolsResponse}})
async def list_tools(
    tenant: Tenant, svc: Svc, data: Provider, toolgroup_id: ToolGroupRef = None
) -> Response:
    tools = await svc.toolgroups.list_tools(tenant, toolgroup_id, data)
    return json_response(ListToolsResponse(data=tools))


@router.get("/tools/{tool_name:path}", responses={200: {"model": Tool}})
async def get_tool(tool_name: ToolName, tenant: Tenant, svc: Svc, data: Provider) -> Response:
    return json_response(await svc.toolgroups.get_tool(tenant, tool_name, data))


@router.get("/tool-runtime/list-tools", responses={200: {"model": ListToolDefsResponse}})
async def list_runtime_tools(
    tenant: Tenant,
    svc: Svc,
    data: Provider,
    tool_group_id: ToolGroupRef = None,
    endpoint_uri: Annotated[
        str | None, Query(alias="mcp_endpoint[uri]", max_length=MAX_ENDPOINT_URI)
    ] = None,
    endpoint: Annotated[
        str | None, Query(alias="mcp_endpoint", max_length=MAX_ENDPOINT_URI)
    ] = None,
) -> Response:
    """`mcp_endpoint` as llama-stack-client sends it (`mcp_endpoint[uri]=...`) or as a URI."""
    uri = endpoint_uri or endpoint
    if uri is not None:
        from pydantic import ValidationError

        try:
            uri = McpEndpoint(uri=uri).uri
        except ValidationError as err:
            raise InvalidRequest(f"mcp_endpoint: {err.errors()[0]['msg']}") from err
    tools = await svc.toolgroups.list_runtime_tools(tenant, tool_group_id, uri, data)
    return json_response(ListToolDefsResponse(data=tools))


@router.post("/tool-runtime/invoke", responses={200: {"model": ToolInvocationResult}})
async def invoke_tool(
    body: InvokeToolRequest, tenant: Tenant, svc: Svc, data: Provider
) -> Response:
    result = await svc.toolgroups.invoke(tenant, body.tool_name, body.kwargs, data)
    return json_response(result)
