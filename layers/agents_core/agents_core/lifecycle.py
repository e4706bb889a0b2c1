"""Lifecycle events on EventBridge: a turn that pauses for client tools, completes or fails; a
response that completes, fails, ends incomplete or is cancelled.

Source `serverless-agents`; detail types in `DETAIL_TYPES` and `RESPONSE_DETAIL_TYPES`;
docs/events.md shows each detail. Publishing is best effort: a failure is logged and never fails
the turn or response.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextvars import ContextVar
from functools import partial
from typing import Any

from . import blocking, json_text
from .log import logger

#: The publishes held in this context (`hold`), or None: publish at once.
_held: ContextVar[list[Callable[[], None]] | None] = ContextVar("held_events", default=None)


def hold() -> list[Callable[[], None]]:
    """From here on in this context (a task and what it runs), each event published is not sent
    at once but added to the list returned, as a blocking call that never raises, for the caller
    to make after its own last write (a streamed run's stream log), so the event follows what
    it announces. The caller must make them."""
    held: list[Callable[[], None]] = []
    _held.set(held)
    return held


SOURCE = "serverless-agents"
DETAIL_TYPES = {
    "awaiting_input": "Turn Awaiting Input",
    "completed": "Turn Completed",
    "failed": "Turn Failed",
}
RESPONSE_DETAIL_TYPES = {
    "completed": "Response Completed",
    "failed": "Response Failed",
    "incomplete": "Response Incomplete",
    "cancelled": "Response Cancelled",
}


class TurnEventPublisher:
    """`client` is an EventBridge client, or None to create one at the first publish: events go
    out after the turn's last event has reached the caller, so nobody waits for that."""

    def __init__(self, client: Any, bus_name: str) -> None:
        self._events = client
        self.bus_name = bus_name

    async def publish(self, status: str, detail: dict[str, Any]) -> None:
        """Publish a turn's event (its request awaited on the loop, `blocking.run`), or hold it
        (`hold`); never raises."""
        await self._send(partial(self._publish, DETAIL_TYPES[status], detail))

    async def publish_response(self, status: str, detail: dict[str, Any]) -> None:
        """Publish a response's event, likewise."""
        await self._send(partial(self._publish, RESPONSE_DETAIL_TYPES[status], detail))

    @staticmethod
    async def _send(call: Callable[[], None]) -> None:
        held = _held.get()
        if held is None:
            await blocking.run(call)
        else:
            held.append(call)

    def prepare(self) -> None:
        """Create the EventBridge client now (a primed init), not at the first publish."""
        if self._events is None:
            from . import aws

            self._events = aws.client("events", attempts=2)

    async def open(self) -> None:
        """Make the client and open the connection its first publish takes (`aws.JsonClient`'s;
        a client of another kind is left to that publish)."""
        from .aws import JsonClient

        self.prepare()
        if isinstance(self._events, JsonClient):
            await self._events.open()

    def _publish(self, detail_type: str, detail: dict[str, Any]) -> None:
        entry = {
            "Source": SOURCE,
            "DetailType": detail_type,
            "Detail": json_text.dumps_str(detail),
            "EventBusName": self.bus_name,
        }
        try:
            self.prepare()
            resp = self._events.put_events(Entries=[entry])
            if resp.get("FailedEntryCount"):
                raise RuntimeError(resp["Entries"][0].get("ErrorMessage", "rejected"))
        except Exception:
            ids = {k: detail[k] for k in ("turn_id", "response_id") if k in detail}
            logger.exception("could not publish lifecycle event", extra=ids)


def ensure_event_bus(events: Any, name: str) -> None:
    """Create the bus if missing (local runs; template.yaml declares it in AWS). A bus another
    creator made meanwhile is the one to use."""
    try:
        events.describe_event_bus(Name=name)
    except events.exceptions.ResourceNotFoundException:
        with contextlib.suppress(events.exceptions.ResourceAlreadyExistsException):
            events.create_event_bus(Name=name)
