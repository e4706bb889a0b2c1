"""What the engine needs from the safety service: a port, like its storage and tool runtime.

The services hand in `SafetyService` (services/safety.py), which has this shape; engine tests
hand in a fake. Both faces check the same way: the run's new input before its first model call,
each answer before it is final (engine/loop.py `Shields`).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from .loop import Shields


class ShieldService(Protocol):
    async def known(self, tenant: str, shield_ids: list[str]) -> None:
        """InvalidRequest (400) unless every id names one of the tenant's shields."""
        ...

    async def check(
        self,
        tenant: str,
        shield_ids: list[str],
        messages: list[dict[str, Any]],
        *,
        source: Literal["input", "output"],
    ) -> Any | None:
        """The first blocking SafetyViolation, or None; raises when a shield fails."""
        ...


#: What a blocked run answers when its shield gave no message of its own.
BLOCKED_MESSAGE = "I can't answer that. Can I help with something else?"


async def shields_for(
    service: ShieldService | None,
    tenant: str,
    input_ids: list[str],
    output_ids: list[str],
    new_input: list[dict[str, Any]],
) -> Shields | None:
    """The loop's shields for a run, checked to exist now (a 400 before anything is stored);
    None when the run has none."""
    if not input_ids and not output_ids:
        return None
    if service is None:
        from ..errors import InvalidRequest

        raise InvalidRequest("shields are not available on this deployment")
    await service.known(tenant, [*input_ids, *output_ids])

    async def check(messages: list[dict[str, Any]], source: Literal["input", "output"]) -> Any:
        ids = input_ids if source == "input" else output_ids
        return await service.check(tenant, ids, messages, source=source)

    return Shields(check=check, input=new_input if input_ids else [], output=bool(output_ids))
