"""The dependencies routes declare, each once: the caller's tenant and the services."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from ..services import Services
from .context import get_services, tenant

Tenant = Annotated[str, Depends(tenant)]
Svc = Annotated[Services, Depends(get_services)]
