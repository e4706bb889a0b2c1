"""Helpers for turn tests: SSE parsing and agent/session set-up over HTTP."""

from __future__ import annotations

import json
from typing import Any

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather in a city",
    "parameters": [
        {"name": "city", "parameter_type": "string", "description": "City name", "required": True}
    ],
}


def sse_events(text: str) -> list[dict[str, Any]]:
    """The JSON of each `data:` line of an SSE body."""
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def event_types(events: list[dict[str, Any]]) -> list[str]:
    return [e["event"]["payload"]["event_type"] if "event" in e else "error" for e in events]


def new_session(api, **config: Any) -> tuple[str, str]:
    agent_config = {"model": "test-model", "instructions": "You are terse.", **config}
    agent_id = api.post("/v1/agents", json={"agent_config": agent_config}).json()["agent_id"]
    session = api.post(f"/v1/agents/{agent_id}/session", json={"session_name": "t"}).json()
    return agent_id, session["session_id"]


def turn_url(agent_id: str, session_id: str) -> str:
    return f"/v1/agents/{agent_id}/session/{session_id}/turn"


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}
