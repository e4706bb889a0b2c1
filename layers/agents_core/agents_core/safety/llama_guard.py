"""Llama Guard 3 served by the inference providers: the shield's `provider_shield_id` is a model
id the model router resolves (an OpenAI-compatible endpoint's model, or `bedrock/...`).

One model call per check: the conversation goes in Llama Guard's prompt (its categories S1-S14,
the roles `User` and `Agent`, the last message's role assessed), and the model answers `safe`
or `unsafe` with the violated categories on the next line (`unsafe\\nS1,S10`). Params:
`excluded_categories` (codes such as `S6` that never block), `user_message`.

The model is asked through `ask(model, prompt) -> text`, handed in by the service, so this
package does not depend on the inference package.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from ..api.common import SafetyViolation, ViolationLevel
from ..errors import InvalidRequest, UpstreamFailed
from .types import DEFAULT_USER_MESSAGE, Source, Verdict, known_keys

Ask = Callable[[str, str], Awaitable[str]]

#: Llama Guard 3's hazard taxonomy (MLCommons), by code.
CATEGORIES = {
    "S1": "Violent Crimes",
    "S2": "Non-Violent Crimes",
    "S3": "Sex Crimes",
    "S4": "Child Exploitation",
    "S5": "Defamation",
    "S6": "Specialized Advice",
    "S7": "Privacy",
    "S8": "Intellectual Property",
    "S9": "Indiscriminate Weapons",
    "S10": "Hate",
    "S11": "Self-Harm",
    "S12": "Sexual Content",
    "S13": "Elections",
    "S14": "Code Interpreter Abuse",
}

#: Codes as OpenAI moderation categories (S6, S7, S8 and S13 have none).
_OPENAI = {
    "S1": ["violence", "illicit/violent"],
    "S2": ["illicit"],
    "S3": ["sexual", "illicit"],
    "S4": ["sexual/minors"],
    "S5": ["harassment"],
    "S9": ["illicit/violent"],
    "S10": ["hate"],
    "S11": ["self-harm"],
    "S12": ["sexual"],
    "S14": ["illicit"],
}

_UNSAFE = re.compile(r"^unsafe\s*(?:\n\s*(S\d+(?:\s*,\s*S\d+)*))?\s*$")


def validate(provider_shield_id: str, params: dict[str, Any]) -> dict[str, Any]:
    known_keys(params, {"excluded_categories", "user_message"}, "llama-guard")
    excluded = params.get("excluded_categories", [])
    if not isinstance(excluded, list) or any(code not in CATEGORIES for code in excluded):
        raise InvalidRequest(
            "params.excluded_categories must be a list of Llama Guard codes"
            f" ({', '.join(CATEGORIES)})"
        )
    message = params.get("user_message")
    if message is not None and not (isinstance(message, str) and 0 < len(message) <= 1000):
        raise InvalidRequest("params.user_message must be text of 1 to 1000 characters")
    return params


def prompt(messages: list[dict[str, Any]], excluded: list[str]) -> str:
    """Llama Guard 3's classification prompt for the last message of `messages`."""
    lines = [f"{code}: {name}." for code, name in CATEGORIES.items() if code not in set(excluded)]
    turns = [(_role(m["role"]), m.get("content") or "") for m in messages]
    assessed = turns[-1][0]
    conversation = "\n\n".join(f"{role}: {text}" for role, text in turns)
    return (
        f"Task: Check if there is unsafe content in '{assessed}' messages in conversations"
        " according our safety policy with the below categories.\n\n"
        "<BEGIN UNSAFE CONTENT CATEGORIES>\n"
        + "\n".join(lines)
        + "\n<END UNSAFE CONTENT CATEGORIES>\n\n"
        "<BEGIN CONVERSATION>\n\n"
        f"{conversation}\n\n"
        "<END CONVERSATION>\n\n"
        f"Provide your safety assessment for ONLY THE LAST {assessed} message in the above"
        " conversation:\n"
        " - First line must read 'safe' or 'unsafe'.\n"
        " - If unsafe, a second line must include a comma-separated list of violated categories."
    )


def _role(role: str) -> str:
    return "Agent" if role == "assistant" else "User"


class LlamaGuardShield:
    name = "llama-guard"

    def __init__(self, ask: Ask) -> None:
        self._ask = ask

    async def run(
        self,
        provider_shield_id: str,
        params: dict[str, Any],
        messages: list[dict[str, Any]],
        source: Source,
    ) -> Verdict:
        messages = [m for m in messages if m.get("content")]
        if not messages:
            return Verdict()
        excluded = params.get("excluded_categories", [])
        answer = (await self._ask(provider_shield_id, prompt(messages, excluded))).strip()
        if answer.lower() == "safe":
            return Verdict()
        match = _UNSAFE.match(answer)
        if match is None:
            raise UpstreamFailed(
                f"Llama Guard model {provider_shield_id} answered neither 'safe' nor 'unsafe':"
                f" {answer[:200]!r}"
            )
        codes = [c.strip() for c in (match.group(1) or "").split(",") if c.strip()]
        if codes and set(codes) <= set(excluded):
            return Verdict()
        violation = SafetyViolation(
            violation_level=ViolationLevel.error,
            user_message=params.get("user_message") or DEFAULT_USER_MESSAGE,
            metadata={
                "violation_type": ",".join(codes) or "unsafe",
                "categories": [CATEGORIES.get(code, code) for code in codes],
                "model": provider_shield_id,
            },
        )
        openai = [c for code in codes for c in _OPENAI.get(code, [])]
        return Verdict(violation, list(dict.fromkeys(openai)))
