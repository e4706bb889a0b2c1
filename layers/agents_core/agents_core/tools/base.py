"""What every tool shares: its definition as the model sees it, the failure the model reads,
and the bound on the text a tool hands back."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolDefinition:
    """A tool as the model sees it and `/v1/tools` lists it."""

    name: str
    description: str
    #: JSON schema of the arguments (an MCP tool's `inputSchema`).
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


class ToolFailed(Exception):
    """A tool call that failed (an error result, a timeout, an unreachable server, bad
    arguments). Its message is what the model reads as the call's result: the run goes on."""


def truncate(text: str, max_bytes: int) -> str:
    """`text` if its UTF-8 form fits in `max_bytes`, else its head followed by a marker saying
    it was cut and how large it was, the whole within `max_bytes`: the model still gets the
    beginning of a large output, and no stored item outgrows DynamoDB's 400 KB."""
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    marker = f"\n[truncated: the tool returned {len(data)} bytes; the first {{kept}} are shown]"
    kept = max(0, max_bytes - len(marker.format(kept=max_bytes)))
    head = data[:kept].decode(errors="ignore")  # never half a character
    return head + marker.format(kept=len(head.encode()))


def parse_arguments(arguments: str) -> dict[str, Any]:
    """A call's arguments as the model sent them (JSON text): an object, or ToolFailed."""
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except ValueError as err:
        raise ToolFailed(f"the arguments are not valid JSON ({err}): {arguments[:200]}") from None
    if not isinstance(value, dict):
        raise ToolFailed(f"the arguments must be a JSON object, not {arguments[:200]}")
    return value
