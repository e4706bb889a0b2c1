"""What every shield provider speaks: text messages in, a verdict out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..api.common import SafetyViolation
from ..errors import InvalidRequest

Source = Literal["input", "output"]

#: The message a blocked user sees when the provider has none of its own.
DEFAULT_USER_MESSAGE = "I can't answer that. Can I help with something else?"

#: OpenAI's moderation categories, each present in every moderation result.
OPENAI_CATEGORIES = (
    "harassment",
    "harassment/threatening",
    "hate",
    "hate/threatening",
    "illicit",
    "illicit/violent",
    "self-harm",
    "self-harm/intent",
    "self-harm/instructions",
    "sexual",
    "sexual/minors",
    "violence",
    "violence/graphic",
)


@dataclass
class Verdict:
    """A shield's answer: the violation (None: the text passed) and the OpenAI moderation
    categories it amounts to (for `/v1/moderations`)."""

    violation: SafetyViolation | None = None
    categories: list[str] = field(default_factory=list)


class ShieldProvider(Protocol):
    name: str

    async def run(
        self,
        provider_shield_id: str,
        params: dict[str, Any],
        messages: list[dict[str, Any]],
        source: Source,
    ) -> Verdict:
        """Check `messages` (`{"role", "content"}`, content text). Raises UpstreamFailed (or
        UpstreamTimeout) when the provider cannot answer."""
        ...


def known_keys(params: dict[str, Any], allowed: set[str], provider: str) -> None:
    """InvalidRequest for params the provider does not read (a typo must not pass silently)."""
    unknown = sorted(set(params) - allowed)
    if unknown:
        expected = ", ".join(sorted(allowed)) or "none"
        raise InvalidRequest(f"params {unknown} are not {provider} params (it reads: {expected})")
