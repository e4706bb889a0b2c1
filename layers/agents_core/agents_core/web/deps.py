"""The dependencies routes declare, each once: the caller's tenant, the services, the Llama
Stack client's provider data."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends

from ..services import Services
from .context import get_services, provider_data, tenant

Tenant = Annotated[str, Depends(tenant)]
Svc = Annotated[Services, Depends(get_services)]
ProviderData = Annotated[dict[str, Any] | None, Depends(provider_data)]
