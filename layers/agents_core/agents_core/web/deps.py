"""The dependencies routes declare, each once: the caller's tenant, the services, the provider
data the Llama Stack client sends."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Header

from ..services import Services
from .context import get_services, tenant

Tenant = Annotated[str, Depends(tenant)]
Svc = Annotated[Services, Depends(get_services)]


async def provider_data(
    x_llamastack_provider_data: Annotated[str | None, Header(max_length=65536)] = None,
) -> Any:
    """What the Llama Stack client sends in `X-LlamaStack-Provider-Data` (400 if malformed):
    an `api.tools.ProviderData`, None without the header. Its models load only then."""
    if x_llamastack_provider_data is None:
        return None
    from ..api.tools import parse_provider_data

    return parse_provider_data(x_llamastack_provider_data)


#: Per-request provider data: headers for MCP servers, keyed by endpoint URI.
Provider = Annotated[Any, Depends(provider_data)]
