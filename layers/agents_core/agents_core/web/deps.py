"""The dependencies routes declare, each once: the caller's tenant, the services, the provider
data the Llama Stack client sends."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header

from ..api.tools import ProviderData, parse_provider_data
from ..services import Services
from .context import get_services, tenant

Tenant = Annotated[str, Depends(tenant)]
Svc = Annotated[Services, Depends(get_services)]


def provider_data(
    x_llamastack_provider_data: Annotated[str | None, Header(max_length=65536)] = None,
) -> ProviderData:
    """What the Llama Stack client sends in `X-LlamaStack-Provider-Data` (400 if malformed)."""
    return parse_provider_data(x_llamastack_provider_data)


#: Per-request provider data: headers for MCP servers, keyed by endpoint URI.
Provider = Annotated[ProviderData, Depends(provider_data)]
