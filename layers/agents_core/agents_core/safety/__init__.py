"""Shield providers: Amazon Bedrock Guardrails (`bedrock`), Llama Guard served by the inference
providers (`llama-guard`), and a deterministic offline shield (`offline`).

Each provider checks its shield's params when the shield is registered (`validate`), and runs
the shield on text messages (`run`), answering a `Verdict`. Clients and the model call are
handed in, so tests give them local peers.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequest
from . import bedrock, llama_guard, offline

#: provider id -> its params check (at registration; no client needed)
_VALIDATORS = {
    "bedrock": bedrock.validate,
    "llama-guard": llama_guard.validate,
    "offline": offline.validate,
}


def validate(provider_id: str, provider_shield_id: str, params: dict[str, Any]) -> dict[str, Any]:
    """The shield's params as they will be stored; InvalidRequest for what the provider cannot
    run."""
    check = _VALIDATORS.get(provider_id)
    if check is None:
        raise InvalidRequest(
            f"provider_id {provider_id!r} is not a shield provider:"
            f" use one of {sorted(_VALIDATORS)}"
        )
    return check(provider_shield_id, params)
