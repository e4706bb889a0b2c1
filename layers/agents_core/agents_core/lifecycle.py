"""Turn lifecycle events on EventBridge: a turn that pauses for client tools, completes or fails.

Source `serverless-agents`; detail types in `DETAIL_TYPES`; docs/events.md shows each detail.
Publishing is best effort: a failure is logged and never fails the turn.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from .log import logger

SOURCE = "serverless-agents"
DETAIL_TYPES = {
    "awaiting_input": "Turn Awaiting Input",
    "completed": "Turn Completed",
    "failed": "Turn Failed",
}


class TurnEventPublisher:
    """`client` is an EventBridge client, or None to create one at the first publish: events go
    out after the turn's last event has reached the caller, so nobody waits for that."""

    def __init__(self, client: Any, bus_name: str) -> None:
        self._events = client
        self.bus_name = bus_name

    async def publish(self, status: str, detail: dict[str, Any]) -> None:
        """Publish off the event loop (the call blocks); never raises."""
        await asyncio.to_thread(self._publish, status, detail)

    def _publish(self, status: str, detail: dict[str, Any]) -> None:
        entry = {
            "Source": SOURCE,
            "DetailType": DETAIL_TYPES[status],
            "Detail": json.dumps(detail),
            "EventBusName": self.bus_name,
        }
        try:
            if self._events is None:
                from . import aws

                self._events = aws.client("events", attempts=2)
            resp = self._events.put_events(Entries=[entry])
            if resp.get("FailedEntryCount"):
                raise RuntimeError(resp["Entries"][0].get("ErrorMessage", "rejected"))
        except Exception:
            logger.exception(
                "could not publish turn event", extra={"turn_id": detail.get("turn_id")}
            )


def ensure_event_bus(events: Any, name: str) -> None:
    """Create the bus if missing (local runs; template.yaml declares it in AWS)."""
    try:
        events.describe_event_bus(Name=name)
    except events.exceptions.ResourceNotFoundException:
        events.create_event_bus(Name=name)
