"""The offline shield: regular expressions over the messages' text. Deterministic, instant, no
network; the built-in `offline` shield `make run` announces, and a shield for tests.

Params: `patterns`, a list of regexes or `{"pattern", "category"}` objects (category: an OpenAI
moderation category, for `/v1/moderations`), matched case-insensitively; `user_message`, what
a blocked user reads. Without `patterns` it uses DEFAULT_PATTERNS.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from ..api.common import SafetyViolation, ViolationLevel
from ..errors import InvalidRequest
from .types import DEFAULT_USER_MESSAGE, OPENAI_CATEGORIES, Source, Verdict, known_keys

#: A small default list: enough to see a shield block (and pass) without any service.
DEFAULT_PATTERNS: list[dict[str, str]] = [
    {"pattern": r"\b(?:bombs?|explosives?)\b", "category": "illicit/violent"},
    {"pattern": r"\b(?:kill|hurt|harm) (?:myself|yourself)\b", "category": "self-harm"},
    {"pattern": r"\b(?:kill|murder) (?:him|her|them|someone|people)\b", "category": "violence"},
]
MAX_PATTERNS = 100
MAX_PATTERN_LENGTH = 500


def validate(provider_shield_id: str, params: dict[str, Any]) -> dict[str, Any]:
    known_keys(params, {"patterns", "user_message"}, "offline")
    if "patterns" in params:
        _compiled(_normalized(params["patterns"]))
    message = params.get("user_message")
    if message is not None and not (isinstance(message, str) and 0 < len(message) <= 1000):
        raise InvalidRequest("params.user_message must be text of 1 to 1000 characters")
    return params


class OfflineShield:
    name = "offline"

    async def run(
        self,
        provider_shield_id: str,
        params: dict[str, Any],
        messages: list[dict[str, Any]],
        source: Source,
    ) -> Verdict:
        patterns = _normalized(params.get("patterns", DEFAULT_PATTERNS))
        for (pattern, category), regex in zip(patterns, _compiled(patterns), strict=True):
            for message in messages:
                match = regex.search(message.get("content") or "")
                if match is None:
                    continue
                violation = SafetyViolation(
                    violation_level=ViolationLevel.error,
                    user_message=params.get("user_message") or DEFAULT_USER_MESSAGE,
                    metadata={
                        "violation_type": category or "pattern",
                        "pattern": pattern,
                        "match": match.group(0),
                        "source": source,
                    },
                )
                return Verdict(violation, [category] if category else [])
        return Verdict()


def _normalized(patterns: Any) -> tuple[tuple[str, str | None], ...]:
    """(pattern, category) pairs; InvalidRequest for anything else."""
    if not isinstance(patterns, list) or not 1 <= len(patterns) <= MAX_PATTERNS:
        raise InvalidRequest(f"params.patterns must be a list of 1 to {MAX_PATTERNS} patterns")
    out = []
    for item in patterns:
        if isinstance(item, str):
            item = {"pattern": item}
        if not isinstance(item, dict) or not isinstance(item.get("pattern"), str):
            raise InvalidRequest(
                'each of params.patterns must be a regex or {"pattern": ..., "category": ...}'
            )
        known_keys(item, {"pattern", "category"}, "offline pattern")
        pattern, category = item["pattern"], item.get("category")
        if not 0 < len(pattern) <= MAX_PATTERN_LENGTH:
            raise InvalidRequest(f"a pattern must be 1 to {MAX_PATTERN_LENGTH} characters")
        if category is not None and category not in OPENAI_CATEGORIES:
            raise InvalidRequest(
                f"pattern category {category!r} is not an OpenAI moderation category:"
                f" use one of {list(OPENAI_CATEGORIES)}"
            )
        out.append((pattern, category))
    return tuple(out)


@lru_cache(maxsize=256)
def _compiled(patterns: tuple[tuple[str, str | None], ...]) -> list[re.Pattern[str]]:
    compiled = []
    for pattern, _ in patterns:
        try:
            compiled.append(re.compile(pattern, re.IGNORECASE))
        except re.error as err:
            raise InvalidRequest(f"pattern {pattern!r} is not a regular expression: {err}") from err
    return compiled
